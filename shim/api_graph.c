/* Stream capture and CUDA graphs, in the client, for work captured on one stream.
 *
 * While a stream captures, the asynchronous calls issued on it are recorded, not sent: a kernel launch
 * or a memset as its encoded arguments around the stream argument plus a copy of its bulk data (kernel
 * parameters take their values at capture time, as in CUDA); a copy as its pointers, size and kind; a
 * host function as its function and data. cudaGraphLaunch sends them again, in order, as the ordinary
 * asynchronous calls they were, on the stream it is given: the server sees plain stream-ordered work.
 * Copies from host memory read it when the graph runs (CUDA's semantics), not when it was captured.
 *
 * A graph is immutable once captured; it and the executable graphs instantiated from it share one
 * reference-counted list of nodes, so an executable graph outlives cudaGraphDestroy of its graph. Each
 * executable graph keeps an event recorded after its last launch, so a launch on another stream is
 * ordered after the previous launch, as CUDA orders launches of one cudaGraphExec_t.
 *
 * Not supported (cudaErrorStreamCaptureUnsupported, named once): dependencies across streams during
 * capture (fork/join through events), stream-ordered allocation in a captured stream. The graph
 * construction API (cudaGraphAdd*Node, ...) and graph updates stay unimplemented. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gs_api.h"
#include "gs_capture.h"

#define cudaErrorStreamCaptureWrongThread 908

enum { CAPTURE_NONE = 0, CAPTURE_ACTIVE = 1, CAPTURE_INVALIDATED = 2 };
enum { MODE_GLOBAL = 0, MODE_THREAD_LOCAL = 1, MODE_RELAXED = 2 };
/* cudaGraphInstantiateFlag*: AutoFreeOnLaunch 1, Upload 2, DeviceLaunch 4, UseNodePriority 8 */
#define INSTANTIATE_DEVICE_LAUNCH 4ull
#define INSTANTIATE_KNOWN 15ull

/* Defined later in the unity build (api_memory.c, api_stream.c). */
cudaError_t gs_cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, int k,
                                 cudaStream_t st);
cudaError_t gs_cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data);

enum { NODE_CALL, NODE_COPY, NODE_COPY2D, NODE_HOST_FUNC };

typedef struct {
    int kind, op;
    /* NODE_CALL: the encoded argument array before the stream argument, after it, then the bulk data */
    uint8_t *bytes;
    size_t prefix, suffix, bulk;
    int has_bulk;
    uintptr_t a[7]; /* NODE_COPY: dst, src, n, kind; NODE_COPY2D: dst, dpitch, src, spitch, w, h, kind;
                       NODE_HOST_FUNC: fn, data */
} node;

typedef struct {
    _Atomic int refs;
    node *nodes;
    size_t n, cap;
} gbody;

typedef struct graph {
    struct graph *next;
    gbody *b;
} graph;

typedef struct exec {
    struct exec *next;
    gbody *b;
    uint64_t event;       /* recorded after each launch: the next launch on another stream waits on it */
    uint64_t last_stream; /* stream of the last launch */
    int launched;
} exec;

typedef struct {
    uint64_t stream;
    int mode, invalidated;
    pthread_t thread;
    gbody *b;
} capture;

typedef struct {
    uint64_t event, stream;
} captured_event;

_Atomic int gs_capture_count;
static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER; /* everything below */
static capture *caps;
static size_t ncaps, caps_cap;
static captured_event *cevents; /* events last recorded in a capturing stream */
static size_t ncevents, cevents_cap;
static graph *graphs;
static exec *execs;
static _Thread_local int thread_mode; /* cudaThreadExchangeStreamCaptureMode */

static void body_unref(gbody *b) {
    if (!b || atomic_fetch_sub(&b->refs, 1) != 1) return;
    for (size_t i = 0; i < b->n; i++) free(b->nodes[i].bytes);
    free(b->nodes);
    free(b);
}

static capture *find_locked(uint64_t stream) {
    for (size_t i = 0; i < ncaps; i++)
        if (caps[i].stream == stream) return &caps[i];
    return NULL;
}

static captured_event *find_event_locked(uint64_t event) {
    for (size_t i = 0; i < ncevents; i++)
        if (cevents[i].event == event) return &cevents[i];
    return NULL;
}

/* Ends a capture (its nodes are kept when `keep`, for a graph); forgets its captured events. */
static gbody *end_locked(capture *k, int keep) {
    gbody *b = k->b;
    uint64_t stream = k->stream;
    *k = caps[--ncaps];
    atomic_fetch_sub(&gs_capture_count, 1);
    for (size_t i = 0; i < ncevents;)
        if (cevents[i].stream == stream) cevents[i] = cevents[--ncevents];
        else i++;
    if (!keep) { body_unref(b); return NULL; }
    return b;
}

static void invalidate_locked(capture *k) {
    if (k) k->invalidated = 1;
}

/* Appends a node to the capture; takes ownership of nd->bytes. */
static cudaError_t append_locked(capture *k, node *nd) {
    gbody *b = k->b;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        node *p = realloc(b->nodes, cap * sizeof *p);
        if (!p) { free(nd->bytes); return cudaErrorMemoryAllocation; }
        b->nodes = p;
        b->cap = cap;
    }
    b->nodes[b->n++] = *nd;
    return cudaSuccess;
}

/* Looks up the capture of `stream`: 0 when it is not capturing (the call proceeds); else 1 with *e set
 * to cudaErrorStreamCaptureInvalidated when the capture was invalidated, or to 0 with the lock held. */
static int enter_capture(uint64_t stream, capture **out, cudaError_t *e) {
    pthread_mutex_lock(&graph_lock);
    capture *k = find_locked(stream);
    if (!k) { pthread_mutex_unlock(&graph_lock); return 0; }
    if (k->invalidated) {
        pthread_mutex_unlock(&graph_lock);
        *e = cudaErrorStreamCaptureInvalidated;
        *out = NULL;
        return 1;
    }
    *out = k;
    *e = cudaSuccess;
    return 1;
}

/* Index of the stream argument of the encoded calls that are recorded as they are. */
static int stream_arg(int op) {
    switch (op) {
    case GS_OP_LAUNCH: return 6;
    case GS_OP_MEMSET: return 3;
    case GS_OP_MEMSET2D: return 5;
    case GS_OP_MEMSET_WIDE: return 6;      /* the driver face's cuMemsetD16/D32 */
    case GS_OP_STREAM_WAIT_VALUE: return 0; /* the driver face's cuStreamWaitValue32/64 */
    default: return -1;
    }
}

int gs_capture_record_slow(uint64_t stream, gs_call *c, cudaError_t *e) {
    int idx = stream_arg(c->op);
    capture *k;
    if (idx < 0 || !enter_capture(stream, &k, e)) return 0;
    if (!k) return 1;
    const uint8_t *buf = c->w->buf;
    gs_reader r;
    gs_r_init(&r, buf, c->w->len);
    uint32_t n = 0;
    gs_r_array(&r, &n);
    for (int i = 0; i < idx; i++) gs_r_skip(&r);
    size_t pre = (size_t)(r.p - buf);
    gs_r_skip(&r);
    size_t post = (size_t)(r.p - buf);
    if (r.err || c->w->oom || n <= (uint32_t)idx) {
        *e = c->w->oom ? cudaErrorMemoryAllocation : cudaErrorUnknown;
    } else {
        node nd = {.kind = NODE_CALL, .op = c->op, .prefix = pre, .suffix = c->w->len - post,
                   .bulk = c->bulk_len, .has_bulk = c->bulk != NULL || c->bulk_len};
        nd.bytes = malloc(nd.prefix + nd.suffix + nd.bulk + 1);
        if (!nd.bytes) {
            *e = cudaErrorMemoryAllocation;
        } else {
            memcpy(nd.bytes, buf, pre);
            memcpy(nd.bytes + pre, buf + post, nd.suffix);
            if (nd.bulk) memcpy(nd.bytes + pre + nd.suffix, c->bulk, nd.bulk);
            *e = append_locked(k, &nd);
        }
    }
    pthread_mutex_unlock(&graph_lock);
    return 1;
}

int gs_capture_copy_slow(uint64_t stream, void *dst, const void *src, size_t n, int kind, int async, cudaError_t *e) {
    capture *k;
    if (!enter_capture(stream, &k, e)) return 0;
    if (!k) return 1;
    /* The device ranges are checked now, as CUDA checks a copy when it is captured. */
    cudaError_t bad = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice
                          ? gs_check_device_range(dst, n) : cudaSuccess;
    if (!bad && (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice))
        bad = gs_check_device_range(src, n);
    if (bad) {
        *e = bad;
    } else if (!async) { /* a synchronous copy would wait for a stream that runs nothing yet */
        invalidate_locked(k);
        *e = cudaErrorStreamCaptureUnsupported;
    } else {
        node nd = {.kind = NODE_COPY, .a = {(uintptr_t)dst, (uintptr_t)src, n, (uintptr_t)kind}};
        *e = append_locked(k, &nd);
    }
    pthread_mutex_unlock(&graph_lock);
    return 1;
}

int gs_capture_copy2d_slow(uint64_t stream, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t height, int kind, cudaError_t *e) {
    capture *k;
    if (!enter_capture(stream, &k, e)) return 0;
    if (!k) return 1;
    cudaError_t bad = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice
                          ? gs_check_device_range(dst, dpitch * (height - 1) + width) : cudaSuccess;
    if (!bad && (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice))
        bad = gs_check_device_range(src, spitch * (height - 1) + width);
    node nd = {.kind = NODE_COPY2D,
               .a = {(uintptr_t)dst, dpitch, (uintptr_t)src, spitch, width, height, (uintptr_t)kind}};
    *e = bad ? bad : append_locked(k, &nd);
    pthread_mutex_unlock(&graph_lock);
    return 1;
}

int gs_capture_host_func_slow(uint64_t stream, void *fn, void *data, int is_stream_callback, cudaError_t *e) {
    capture *k;
    if (!enter_capture(stream, &k, e)) return 0;
    if (!k) return 1;
    if (is_stream_callback) { /* CUDA does not capture cudaStreamAddCallback (cudaLaunchHostFunc it does) */
        invalidate_locked(k);
        *e = cudaErrorStreamCaptureUnsupported;
    } else {
        node nd = {.kind = NODE_HOST_FUNC, .a = {(uintptr_t)fn, (uintptr_t)data}};
        *e = append_locked(k, &nd);
    }
    pthread_mutex_unlock(&graph_lock);
    return 1;
}

int gs_capture_event_record_slow(uint64_t event, uint64_t stream, cudaError_t *e) {
    pthread_mutex_lock(&graph_lock);
    captured_event *ce = find_event_locked(event);
    capture *k = find_locked(stream);
    int handled = 1;
    if (!k) {
        if (ce) *ce = cevents[--ncevents]; /* recorded for real again */
        handled = 0;
    } else if (k->invalidated) {
        *e = cudaErrorStreamCaptureInvalidated;
    } else if (ce) {
        ce->stream = stream;
        *e = cudaSuccess;
    } else {
        *e = cudaSuccess;
        if (ncevents == cevents_cap) {
            size_t cap = cevents_cap ? cevents_cap * 2 : 16;
            captured_event *p = realloc(cevents, cap * sizeof *p);
            if (!p) *e = cudaErrorMemoryAllocation;
            else { cevents = p; cevents_cap = cap; }
        }
        if (!*e) cevents[ncevents++] = (captured_event){event, stream};
    }
    pthread_mutex_unlock(&graph_lock);
    return handled;
}

static void cross_stream_warning(void) {
    gs_warn_once("capture-cross-stream",
                 "stream capture across streams (an event recorded in a capturing stream and waited on by "
                 "another stream, or a capturing stream waiting on outside work) is not supported by gpushim "
                 "yet: cudaStreamWaitEvent returns cudaErrorStreamCaptureUnsupported and invalidates the capture");
}

int gs_capture_wait_event_slow(uint64_t stream, uint64_t event, unsigned flags, cudaError_t *e) {
    pthread_mutex_lock(&graph_lock);
    captured_event *ce = find_event_locked(event);
    capture *k = find_locked(stream);
    int handled = 1;
    if (!ce && !k) {
        handled = 0;
    } else if (k && k->invalidated) {
        *e = cudaErrorStreamCaptureInvalidated;
    } else if (ce && k && ce->stream == stream && !flags) {
        *e = cudaSuccess; /* a wait on the stream's own earlier work: already ordered */
    } else {
        cross_stream_warning();
        invalidate_locked(k);
        if (ce) invalidate_locked(find_locked(ce->stream));
        *e = cudaErrorStreamCaptureUnsupported;
    }
    pthread_mutex_unlock(&graph_lock);
    return handled;
}

int gs_capture_stream_op_slow(uint64_t stream, int op, cudaError_t *e) {
    pthread_mutex_lock(&graph_lock);
    capture *k = find_locked(stream);
    int handled = 0;
    if (k && op == GS_OP_STREAM_DESTROY) {
        end_locked(k, 0); /* the stream goes, and its capture with it */
    } else if (k && (op == GS_OP_STREAM_SYNC || op == GS_OP_STREAM_QUERY)) {
        *e = k->invalidated ? cudaErrorStreamCaptureInvalidated : cudaErrorStreamCaptureUnsupported;
        invalidate_locked(k);
        handled = 1;
    }
    pthread_mutex_unlock(&graph_lock);
    return handled;
}

int gs_capture_refuse_slow(uint64_t stream, const char *what, cudaError_t *e) {
    capture *k;
    if (!enter_capture(stream, &k, e)) return 0;
    if (!k) return 1;
    gs_warn_once(what, "%s in a capturing stream is not supported by gpushim yet: it returns "
                 "cudaErrorStreamCaptureUnsupported and invalidates the capture", what);
    invalidate_locked(k);
    *e = cudaErrorStreamCaptureUnsupported;
    pthread_mutex_unlock(&graph_lock);
    return 1;
}

int gs_capture_device_sync_slow(cudaError_t *e) {
    pthread_mutex_lock(&graph_lock);
    int handled = ncaps != 0;
    for (size_t i = 0; i < ncaps; i++) invalidate_locked(&caps[i]);
    pthread_mutex_unlock(&graph_lock);
    if (handled) *e = cudaErrorStreamCaptureUnsupported;
    return handled;
}

/* A forked child has a session of its own, where its parent's streams are not capturing. */
static void capture_after_fork(void) {
    pthread_mutex_init(&graph_lock, NULL);
    for (size_t i = 0; i < ncaps; i++) body_unref(caps[i].b);
    ncaps = 0;
    ncevents = 0;
    atomic_store(&gs_capture_count, 0);
}

__attribute__((constructor)) static void capture_init(void) { pthread_atfork(NULL, NULL, capture_after_fork); }

int gs_capture_status(uint64_t stream) {
    if (!gs_capture_any()) return CAPTURE_NONE;
    pthread_mutex_lock(&graph_lock);
    capture *k = find_locked(stream);
    int st = !k ? CAPTURE_NONE : k->invalidated ? CAPTURE_INVALIDATED : CAPTURE_ACTIVE;
    pthread_mutex_unlock(&graph_lock);
    return st;
}

/* ---- capture ---- */

static cudaError_t begin_capture(cudaStream_t s, int mode, int ptsz) {
    GS_ENTER();
    if ((unsigned)mode > MODE_RELAXED) return gs_ret(cudaErrorInvalidValue);
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptsz, &h);
    if (e) return gs_ret(e);
    if (gs_is_legacy_handle(h)) return gs_ret(cudaErrorStreamCaptureUnsupported); /* the legacy stream cannot be captured */
    gbody *b = calloc(1, sizeof *b);
    if (!b) return gs_ret(cudaErrorMemoryAllocation);
    atomic_init(&b->refs, 1);
    pthread_mutex_lock(&graph_lock);
    if (find_locked(h)) {
        e = cudaErrorIllegalState;
    } else if (ncaps == caps_cap) {
        size_t cap = caps_cap ? caps_cap * 2 : 8;
        capture *p = realloc(caps, cap * sizeof *p);
        if (!p) e = cudaErrorMemoryAllocation;
        else { caps = p; caps_cap = cap; }
    }
    if (!e) {
        caps[ncaps++] = (capture){h, mode, 0, pthread_self(), b};
        atomic_fetch_add(&gs_capture_count, 1);
        b = NULL;
    }
    pthread_mutex_unlock(&graph_lock);
    free(b);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaStreamBeginCapture(cudaStream_t s, int mode) { return begin_capture(s, mode, 0); }
GS_IMPL cudaError_t gs_cudaStreamBeginCapture_ptsz(cudaStream_t s, int mode) { return begin_capture(s, mode, 1); }

static cudaError_t end_capture(cudaStream_t s, void **graph_out, int ptsz) {
    if (!graph_out) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptsz, &h);
    if (e) return gs_ret(e);
    graph *g = calloc(1, sizeof *g);
    if (!g) return gs_ret(cudaErrorMemoryAllocation);
    pthread_mutex_lock(&graph_lock);
    capture *k = find_locked(h);
    if (!k) {
        e = cudaErrorIllegalState;
    } else if (k->mode != MODE_RELAXED && !pthread_equal(k->thread, pthread_self())) {
        e = cudaErrorStreamCaptureWrongThread;
    } else if (k->invalidated) {
        end_locked(k, 0);
        *graph_out = NULL;
        e = cudaErrorStreamCaptureInvalidated;
    } else {
        g->b = end_locked(k, 1);
        g->next = graphs;
        graphs = g;
        *graph_out = g;
        g = NULL;
    }
    pthread_mutex_unlock(&graph_lock);
    free(g);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaStreamEndCapture(cudaStream_t s, void **graph) { return end_capture(s, graph, 0); }
GS_IMPL cudaError_t gs_cudaStreamEndCapture_ptsz(cudaStream_t s, void **graph) { return end_capture(s, graph, 1); }

GS_IMPL cudaError_t gs_cudaThreadExchangeStreamCaptureMode(int *mode) {
    if (!mode || (unsigned)*mode > MODE_RELAXED) return gs_ret(cudaErrorInvalidValue);
    int old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return cudaSuccess;
}

/* ---- graphs ---- */

static int graph_known_locked(const graph *g) {
    for (graph *p = graphs; p; p = p->next)
        if (p == g) return 1;
    return 0;
}

static int exec_known_locked(const exec *x) {
    for (exec *p = execs; p; p = p->next)
        if (p == x) return 1;
    return 0;
}

GS_IMPL cudaError_t gs_cudaGraphDestroy(void *gp) {
    graph *g = gp;
    pthread_mutex_lock(&graph_lock);
    graph **pp = &graphs;
    while (*pp && *pp != g) pp = &(*pp)->next;
    int found = g && *pp;
    if (found) *pp = g->next;
    pthread_mutex_unlock(&graph_lock);
    if (!found) return gs_ret(cudaErrorInvalidValue);
    body_unref(g->b); /* executable graphs keep their own reference */
    free(g);
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaGraphGetNodes(void *gp, void **nodes, size_t *count) {
    if (!count) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&graph_lock);
    graph *g = gp;
    cudaError_t e = cudaSuccess;
    if (!g || !graph_known_locked(g)) {
        e = cudaErrorInvalidValue;
    } else if (!nodes) {
        *count = g->b->n;
    } else {
        size_t k = *count < g->b->n ? *count : g->b->n;
        for (size_t i = 0; i < *count; i++) nodes[i] = i < k ? (void *)&g->b->nodes[i] : NULL;
        *count = k;
    }
    pthread_mutex_unlock(&graph_lock);
    return gs_ret(e);
}

static cudaError_t instantiate(void **exec_out, void *gp, unsigned long long flags) {
    if (!exec_out) return gs_ret(cudaErrorInvalidValue);
    if (flags & INSTANTIATE_DEVICE_LAUNCH) {
        gs_warn_once("graph-device-launch", "cudaGraphInstantiateFlagDeviceLaunch is not supported by gpushim "
                     "yet; instantiation returns cudaErrorNotSupported");
        return gs_ret(cudaErrorNotSupported);
    }
    if (flags & ~INSTANTIATE_KNOWN) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    exec *x = calloc(1, sizeof *x);
    if (!x) return gs_ret(cudaErrorMemoryAllocation);
    /* The event that orders a launch after the previous one (created here: launches never wait). */
    gs_call c;
    gs_call_begin(&c, GS_OP_EVENT_CREATE, 2);
    gs_w_int(c.w, gs_thread()->device);
    gs_w_uint(c.w, cudaEventDisableTiming);
    cudaError_t e = gs_call_run(&c);
    if (!e) x->event = gs_u64(&c);
    gs_call_end(&c);
    if (e) { free(x); return gs_ret(e); }
    pthread_mutex_lock(&graph_lock);
    graph *g = gp;
    if (!g || !graph_known_locked(g)) {
        e = cudaErrorInvalidValue;
    } else {
        x->b = g->b;
        atomic_fetch_add(&x->b->refs, 1);
        x->next = execs;
        execs = x;
        *exec_out = x;
    }
    pthread_mutex_unlock(&graph_lock);
    if (e) {
        gs_call_begin(&c, GS_OP_EVENT_DESTROY, 1);
        gs_w_uint(c.w, x->event);
        gs_call_post(&c);
        free(x);
    }
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaGraphInstantiate__11(void **exec_out, void *g, void **err_node, char *log, size_t log_size) {
    if (err_node) *err_node = NULL;
    if (log && log_size) log[0] = 0;
    return instantiate(exec_out, g, 0);
}
GS_IMPL cudaError_t gs_cudaGraphInstantiate__12(void **exec_out, void *g, unsigned long long flags) {
    return instantiate(exec_out, g, flags);
}
GS_IMPL cudaError_t gs_cudaGraphInstantiate__13(void **exec_out, void *g, unsigned long long flags) {
    return instantiate(exec_out, g, flags);
}
GS_IMPL cudaError_t gs_cudaGraphInstantiateWithFlags(void **exec_out, void *g, unsigned long long flags) {
    return instantiate(exec_out, g, flags);
}

GS_IMPL cudaError_t gs_cudaGraphExecDestroy(void *xp) {
    exec *x = xp;
    pthread_mutex_lock(&graph_lock);
    exec **pp = &execs;
    while (*pp && *pp != x) pp = &(*pp)->next;
    int found = x && *pp;
    if (found) *pp = x->next;
    pthread_mutex_unlock(&graph_lock);
    if (!found) return gs_ret(cudaErrorInvalidValue);
    /* What its launches sent is on the server already; only the ordering event remains. */
    if (gs_ensure_connected() == cudaSuccess) {
        gs_call c;
        gs_call_begin(&c, GS_OP_EVENT_DESTROY, 1);
        gs_w_uint(c.w, x->event);
        gs_call_post(&c);
    }
    body_unref(x->b);
    free(x);
    return cudaSuccess;
}

/* Sends one node again, on stream h (recorded instead when h is itself capturing: a graph launched into
 * a capture becomes part of it). */
static cudaError_t replay(const node *nd, uint64_t h) {
    cudaStream_t s = gs_stream_of_handle(h); /* a known handle, or the legacy stream */
    switch (nd->kind) {
    case NODE_CALL: {
        gs_call c;
        gs_call_begin(&c, nd->op, 0);
        gs_w_reset(c.w);
        gs_w_raw(c.w, nd->bytes, nd->prefix);
        gs_w_uint(c.w, h);
        gs_w_raw(c.w, nd->bytes + nd->prefix, nd->suffix);
        if (nd->has_bulk) {
            c.bulk = nd->bytes + nd->prefix + nd->suffix;
            c.bulk_len = nd->bulk;
        }
        cudaError_t e;
        if (!gs_capture_record(h, &c, &e)) e = gs_call_post(&c);
        return e;
    }
    case NODE_COPY:
        return gs_memcpy((void *)nd->a[0], (const void *)nd->a[1], nd->a[2], (int)nd->a[3], s, 0, 1);
    case NODE_COPY2D:
        return gs_cudaMemcpy2DAsync((void *)nd->a[0], nd->a[1], (const void *)nd->a[2], nd->a[3], nd->a[4],
                                    nd->a[5], (int)nd->a[6], s);
    case NODE_HOST_FUNC:
        return gs_cudaLaunchHostFunc(s, (cudaHostFn_t)nd->a[0], (void *)nd->a[1]);
    default:
        return cudaErrorUnknown;
    }
}

static void post_event_call(int op, uint64_t a, uint64_t b) {
    gs_call c;
    gs_call_begin(&c, op, 3);
    gs_w_uint(c.w, a);
    gs_w_uint(c.w, b);
    gs_w_uint(c.w, 0);
    gs_call_post(&c);
}

static cudaError_t graph_launch(void *xp, cudaStream_t s, int ptsz) {
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptsz, &h);
    if (e) return gs_ret(e);
    exec *x = xp;
    pthread_mutex_lock(&graph_lock);
    if (!x || !exec_known_locked(x)) {
        pthread_mutex_unlock(&graph_lock);
        return gs_ret(cudaErrorInvalidValue);
    }
    gbody *b = x->b;
    atomic_fetch_add(&b->refs, 1);
    int capturing = find_locked(h) != NULL;
    int wait = !capturing && x->launched && x->last_stream != h;
    uint64_t event = x->event;
    if (!capturing) {
        x->launched = 1;
        x->last_stream = h;
    }
    pthread_mutex_unlock(&graph_lock);
    if (wait) post_event_call(GS_OP_STREAM_WAIT_EVENT, h, event); /* after the previous launch */
    for (size_t i = 0; i < b->n && !e; i++) e = replay(&b->nodes[i], h);
    if (!capturing) post_event_call(GS_OP_EVENT_RECORD, event, h);
    body_unref(b);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaGraphLaunch(void *x, cudaStream_t s) { return graph_launch(x, s, 0); }
GS_IMPL cudaError_t gs_cudaGraphLaunch_ptsz(void *x, cudaStream_t s) { return graph_launch(x, s, 1); }

static cudaError_t graph_upload(void *xp, cudaStream_t s, int ptsz) {
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptsz, &h);
    if (e) return gs_ret(e);
    pthread_mutex_lock(&graph_lock);
    int known = xp && exec_known_locked(xp);
    pthread_mutex_unlock(&graph_lock);
    return known ? cudaSuccess : gs_ret(cudaErrorInvalidValue); /* nothing to upload ahead */
}

GS_IMPL cudaError_t gs_cudaGraphUpload(void *x, cudaStream_t s) { return graph_upload(x, s, 0); }
GS_IMPL cudaError_t gs_cudaGraphUpload_ptsz(void *x, cudaStream_t s) { return graph_upload(x, s, 1); }
