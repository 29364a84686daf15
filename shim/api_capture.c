/* Stream capture: while a stream captures, the asynchronous calls issued on it become nodes of the graph
 * being built instead of being sent (shim/gs_graph.h). A kernel launch or a memset is kept as its encoded
 * call (kernel parameters take their values at capture time, as in CUDA); a copy as its pointers, size and
 * kind (a copy from host memory reads it when the graph runs, CUDA's semantics); a host function as its
 * function and data.
 *
 * Several streams may take part in one capture: an event recorded in a capturing stream carries the
 * stream's current dependencies, and a stream that waits on it joins the capture with them (fork), or, if
 * it is already part of it, adds them to its own (join). cudaStreamEndCapture on the origin stream ends
 * the capture of every stream in it; a stream that forked and did not join back into the origin makes it
 * fail with cudaErrorStreamCaptureUnjoined (CUDA Programming Guide, "Cross-stream Dependencies and Events").
 *
 * cudaMallocAsync in a capturing stream adds a memory allocation node: the memory is allocated at once and
 * stays allocated while the graph or an executable graph made from it exists (CUDA reserves it at
 * instantiation); cudaFreeAsync adds a free node, which does nothing when the graph runs.
 *
 * The same hooks serve graph construction (cudaGraphAdd*Node): a thread-local recorder collects the calls
 * into the node being built. */
#include <stdlib.h>
#include <string.h>

#include "gs_capture.h"
#include "gs_graph.h"

#define cudaErrorStreamCaptureUnmatched 902
#define cudaErrorStreamCaptureUnjoined 904
#define cudaErrorStreamCaptureIsolation 905
#define cudaErrorStreamCaptureWrongThread 908

enum { CAPTURE_NONE = 0, CAPTURE_ACTIVE = 1, CAPTURE_INVALIDATED = 2 };
enum { MODE_GLOBAL = 0, MODE_THREAD_LOCAL = 1, MODE_RELAXED = 2 };

typedef struct {
    gs_gnode **v;
    size_t n, cap;
} nodeset;

/* One capture: its graph and the streams in it. */
typedef struct capgraph {
    gs_graph *g;
    uint64_t origin;
    int mode, invalidated, nstreams;
    int borrowed; /* cudaStreamBeginCaptureToGraph: the caller's graph, never freed here */
    pthread_t thread;
    unsigned long long id;
} capgraph;

/* What a stream has seen of the streams of its capture: stream -> how far (a vector clock). A stream's
 * own entry grows with each call it captures; the origin must have seen every stream's latest entry
 * for the capture to end joined. */
typedef struct {
    uint64_t *stream;
    unsigned long *seen;
    size_t n, cap;
} vclock;

typedef struct {
    uint64_t stream;
    capgraph *cg;
    nodeset deps; /* the nodes the stream's next captured call depends on */
    vclock clock;
} capture;

typedef struct {
    uint64_t event;
    capgraph *cg;
    nodeset deps;
    vclock clock;
} captured_event;

_Atomic int gs_capture_count;
pthread_mutex_t gs_graph_lock = PTHREAD_MUTEX_INITIALIZER;
_Thread_local gs_recorder *gs_rec;
static capture *caps;
static size_t ncaps, caps_cap;
static captured_event *cevents; /* events last recorded in a capturing stream */
static size_t ncevents, cevents_cap;
static unsigned long long next_capture_id = 1;
static _Thread_local int thread_mode; /* cudaThreadExchangeStreamCaptureMode */

void gs_record_begin(gs_recorder *r, gs_gops *ops) {
    r->ops = ops;
    gs_rec = r;
    atomic_fetch_add(&gs_capture_count, 1); /* so the hooks look */
}

void gs_record_end(gs_recorder *r) {
    (void)r;
    gs_rec = NULL;
    atomic_fetch_sub(&gs_capture_count, 1);
}

static cudaError_t set_add(nodeset *s, gs_gnode *n) {
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i] == n) return cudaSuccess;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4;
        gs_gnode **p = realloc(s->v, cap * sizeof *p);
        if (!p) return cudaErrorMemoryAllocation;
        s->v = p;
        s->cap = cap;
    }
    s->v[s->n++] = n;
    return cudaSuccess;
}

static cudaError_t set_copy(nodeset *dst, const nodeset *src) {
    dst->n = 0;
    for (size_t i = 0; i < src->n; i++)
        if (set_add(dst, src->v[i])) return cudaErrorMemoryAllocation;
    return cudaSuccess;
}

static unsigned long *clock_entry(vclock *c, uint64_t stream) {
    for (size_t i = 0; i < c->n; i++)
        if (c->stream[i] == stream) return &c->seen[i];
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4;
        uint64_t *s = realloc(c->stream, cap * sizeof *s);
        if (!s) return NULL;
        c->stream = s;
        unsigned long *v = realloc(c->seen, cap * sizeof *v);
        if (!v) return NULL;
        c->seen = v;
        c->cap = cap;
    }
    c->stream[c->n] = stream;
    c->seen[c->n] = 0;
    return &c->seen[c->n++];
}

static unsigned long clock_get(const vclock *c, uint64_t stream) {
    for (size_t i = 0; i < c->n; i++)
        if (c->stream[i] == stream) return c->seen[i];
    return 0;
}

static cudaError_t clock_merge(vclock *into, const vclock *from) {
    for (size_t i = 0; i < from->n; i++) {
        unsigned long *e = clock_entry(into, from->stream[i]);
        if (!e) return cudaErrorMemoryAllocation;
        if (*e < from->seen[i]) *e = from->seen[i];
    }
    return cudaSuccess;
}

static void clock_free(vclock *c) {
    free(c->stream);
    free(c->seen);
    *c = (vclock){0};
}

/* The stream did something in the capture (joined it, captured a call). */
static cudaError_t tick(capture *k) {
    unsigned long *e = clock_entry(&k->clock, k->stream);
    if (!e) return cudaErrorMemoryAllocation;
    ++*e;
    return cudaSuccess;
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

static void drop_event_locked(captured_event *ce) {
    free(ce->deps.v);
    clock_free(&ce->clock);
    *ce = cevents[--ncevents];
}

/* A stream leaves its capture; the capture (and its graph, unless kept) goes with its last stream. */
static void leave_locked(capture *k, int keep_graph) {
    capgraph *cg = k->cg;
    free(k->deps.v);
    clock_free(&k->clock);
    *k = caps[--ncaps];
    atomic_fetch_sub(&gs_capture_count, 1);
    if (--cg->nstreams) return;
    for (size_t i = 0; i < ncevents;)
        if (cevents[i].cg == cg) drop_event_locked(&cevents[i]);
        else i++;
    if (!keep_graph && !cg->borrowed) gs_graph_free_locked(cg->g);
    free(cg);
}

static cudaError_t join_locked(capgraph *cg, uint64_t stream, const nodeset *deps, const vclock *clock) {
    if (ncaps == caps_cap) {
        size_t cap = caps_cap ? caps_cap * 2 : 8;
        capture *p = realloc(caps, cap * sizeof *p);
        if (!p) return cudaErrorMemoryAllocation;
        caps = p;
        caps_cap = cap;
    }
    capture *k = &caps[ncaps];
    *k = (capture){stream, cg, {0}, {0}};
    if ((deps && set_copy(&k->deps, deps)) || (clock && clock_merge(&k->clock, clock)) || tick(k)) {
        free(k->deps.v);
        clock_free(&k->clock);
        return cudaErrorMemoryAllocation;
    }
    ncaps++;
    cg->nstreams++;
    atomic_fetch_add(&gs_capture_count, 1);
    return cudaSuccess;
}

/* Adds a node of `type` holding op to the capture of k, after the stream's dependencies. */
static cudaError_t add_captured_locked(capture *k, int type, const gs_gop *op, gs_gnode **out) {
    gs_gnode *n = gs_node_new_locked(k->cg->g, type);
    if (!n) return cudaErrorMemoryAllocation;
    cudaError_t e = op ? gs_ops_append(&n->ops, op) : cudaSuccess;
    for (size_t i = 0; !e && i < k->deps.n; i++) e = gs_node_add_dep_locked(n, k->deps.v[i]);
    if (e) return e;
    k->deps.n = 0;
    if (set_add(&k->deps, n) || tick(k)) return cudaErrorMemoryAllocation;
    if (out) *out = n;
    return cudaSuccess;
}

/* Looks up the capture of `stream`: 0 when it is not capturing (the call proceeds); else 1 with *e set
 * to cudaErrorStreamCaptureInvalidated when the capture was invalidated, or to 0 with the lock held. */
static int enter_capture(uint64_t stream, capture **out, cudaError_t *e) {
    pthread_mutex_lock(&gs_graph_lock);
    capture *k = find_locked(stream);
    if (!k) { pthread_mutex_unlock(&gs_graph_lock); return 0; }
    if (k->cg->invalidated) {
        pthread_mutex_unlock(&gs_graph_lock);
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

/* Splits an encoded call around its stream argument into an op. */
static cudaError_t op_of_call(gs_call *c, int idx, gs_gop *out) {
    const uint8_t *buf = c->w->buf;
    gs_reader r;
    gs_r_init(&r, buf, c->w->len);
    uint32_t n = 0;
    gs_r_array(&r, &n);
    for (int i = 0; i < idx; i++) gs_r_skip(&r);
    size_t pre = (size_t)(r.p - buf);
    gs_r_skip(&r);
    size_t post = (size_t)(r.p - buf);
    if (c->w->oom) return cudaErrorMemoryAllocation;
    if (r.err || n <= (uint32_t)idx) return cudaErrorUnknown;
    gs_gop nd = {.kind = OP_CALL, .op = c->op, .prefix = pre, .suffix = c->w->len - post, .bulk = c->bulk_len,
                 .has_bulk = c->bulk != NULL || c->bulk_len};
    nd.bytes = malloc(nd.prefix + nd.suffix + nd.bulk + 1);
    if (!nd.bytes) return cudaErrorMemoryAllocation;
    memcpy(nd.bytes, buf, pre);
    memcpy(nd.bytes + pre, buf + post, nd.suffix);
    if (nd.bulk) memcpy(nd.bytes + pre + nd.suffix, c->bulk, nd.bulk);
    *out = nd;
    return cudaSuccess;
}

static int type_of_call(int op) {
    return op == GS_OP_LAUNCH ? GT_KERNEL : op == GS_OP_STREAM_WAIT_VALUE ? GT_EMPTY : GT_MEMSET;
}

int gs_capture_record_slow(uint64_t stream, gs_call *c, cudaError_t *e) {
    int idx = stream_arg(c->op);
    if (idx < 0) return 0;
    if (gs_rec) {
        gs_gop op;
        *e = op_of_call(c, idx, &op);
        if (!*e) *e = gs_ops_append(gs_rec->ops, &op);
        return 1;
    }
    capture *k;
    if (!enter_capture(stream, &k, e)) return 0;
    if (!k) return 1;
    gs_gop op;
    *e = op_of_call(c, idx, &op);
    if (!*e) *e = add_captured_locked(k, type_of_call(c->op), &op, NULL);
    pthread_mutex_unlock(&gs_graph_lock);
    return 1;
}

int gs_capture_copy_slow(uint64_t stream, void *dst, const void *src, size_t n, int kind, int async, cudaError_t *e) {
    capture *k = NULL;
    if (!gs_rec && !enter_capture(stream, &k, e)) return 0;
    if (!gs_rec && !k) return 1;
    /* The device ranges are checked now, as CUDA checks a copy when it is captured. */
    cudaError_t bad = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice
                          ? gs_check_device_range(dst, n) : cudaSuccess;
    if (!bad && (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice))
        bad = gs_check_device_range(src, n);
    gs_gop op = {.kind = OP_COPY, .a = {(uintptr_t)dst, (uintptr_t)src, n, (uintptr_t)kind}};
    if (bad) {
        *e = bad;
    } else if (gs_rec) {
        *e = gs_ops_append(gs_rec->ops, &op);
    } else if (!async) { /* a synchronous copy would wait for a stream that runs nothing yet */
        k->cg->invalidated = 1;
        *e = cudaErrorStreamCaptureUnsupported;
    } else {
        *e = add_captured_locked(k, GT_MEMCPY, &op, NULL);
    }
    if (k) pthread_mutex_unlock(&gs_graph_lock);
    return 1;
}

int gs_capture_copy2d_slow(uint64_t stream, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t height, int kind, cudaError_t *e) {
    capture *k = NULL;
    if (!gs_rec && !enter_capture(stream, &k, e)) return 0;
    if (!gs_rec && !k) return 1;
    cudaError_t bad = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice
                          ? gs_check_device_range(dst, dpitch * (height - 1) + width) : cudaSuccess;
    if (!bad && (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice))
        bad = gs_check_device_range(src, spitch * (height - 1) + width);
    gs_gop op = {.kind = OP_COPY2D,
                 .a = {(uintptr_t)dst, dpitch, (uintptr_t)src, spitch, width, height, (uintptr_t)kind}};
    *e = bad ? bad : gs_rec ? gs_ops_append(gs_rec->ops, &op) : add_captured_locked(k, GT_MEMCPY, &op, NULL);
    if (k) pthread_mutex_unlock(&gs_graph_lock);
    return 1;
}

int gs_capture_host_func_slow(uint64_t stream, void *fn, void *data, int is_stream_callback, cudaError_t *e) {
    gs_gop op = {.kind = OP_HOST_FUNC, .a = {(uintptr_t)fn, (uintptr_t)data}};
    if (gs_rec) {
        *e = gs_ops_append(gs_rec->ops, &op);
        return 1;
    }
    capture *k;
    if (!enter_capture(stream, &k, e)) return 0;
    if (!k) return 1;
    if (is_stream_callback) { /* CUDA does not capture cudaStreamAddCallback (cudaLaunchHostFunc it does) */
        k->cg->invalidated = 1;
        *e = cudaErrorStreamCaptureUnsupported;
    } else {
        *e = add_captured_locked(k, GT_HOST, &op, NULL);
    }
    pthread_mutex_unlock(&gs_graph_lock);
    return 1;
}

int gs_capture_event_record_slow(uint64_t event, uint64_t stream, cudaError_t *e) {
    pthread_mutex_lock(&gs_graph_lock);
    captured_event *ce = find_event_locked(event);
    capture *k = find_locked(stream);
    int handled = 1;
    if (!k) {
        if (ce) drop_event_locked(ce); /* recorded for real again */
        handled = 0;
    } else if (k->cg->invalidated) {
        *e = cudaErrorStreamCaptureInvalidated;
    } else {
        *e = cudaSuccess;
        if (!ce) {
            if (ncevents == cevents_cap) {
                size_t cap = cevents_cap ? cevents_cap * 2 : 16;
                captured_event *p = realloc(cevents, cap * sizeof *p);
                if (!p) *e = cudaErrorMemoryAllocation;
                else { cevents = p; cevents_cap = cap; }
            }
            if (!*e) {
                ce = &cevents[ncevents++];
                *ce = (captured_event){event, NULL, {0}, {0}};
            }
        }
        if (ce) {
            ce->cg = k->cg;
            ce->clock.n = 0;
            *e = set_copy(&ce->deps, &k->deps);
            if (!*e) *e = clock_merge(&ce->clock, &k->clock);
        }
    }
    pthread_mutex_unlock(&gs_graph_lock);
    return handled;
}

int gs_capture_wait_event_slow(uint64_t stream, uint64_t event, unsigned flags, cudaError_t *e) {
    (void)flags; /* cudaEventWaitExternal only matters across captures, which are refused */
    pthread_mutex_lock(&gs_graph_lock);
    captured_event *ce = find_event_locked(event);
    capture *k = find_locked(stream);
    int handled = 1;
    *e = cudaSuccess;
    if (!ce && !k) {
        handled = 0;
    } else if ((k && k->cg->invalidated) || (ce && ce->cg->invalidated)) {
        *e = cudaErrorStreamCaptureInvalidated;
    } else if (!ce) {
        /* waiting on work outside the capture: CUDA refuses a dependency across capture boundaries */
        gs_warn_once("capture-outside-event", "a capturing stream waited on an event not recorded in the "
                     "capture: cudaErrorStreamCaptureIsolation, the capture is invalidated");
        k->cg->invalidated = 1;
        *e = cudaErrorStreamCaptureIsolation;
    } else if (!k) { /* fork: the stream joins the capture */
        *e = join_locked(ce->cg, stream, &ce->deps, &ce->clock);
    } else if (k->cg != ce->cg) {
        k->cg->invalidated = ce->cg->invalidated = 1;
        *e = cudaErrorStreamCaptureIsolation;
    } else { /* join: the stream's next work also depends on the event's */
        for (size_t i = 0; !*e && i < ce->deps.n; i++) *e = set_add(&k->deps, ce->deps.v[i]);
        if (!*e) *e = clock_merge(&k->clock, &ce->clock);
    }
    pthread_mutex_unlock(&gs_graph_lock);
    return handled;
}

int gs_capture_stream_op_slow(uint64_t stream, int op, cudaError_t *e) {
    pthread_mutex_lock(&gs_graph_lock);
    capture *k = find_locked(stream);
    int handled = 0;
    if (k && op == GS_OP_STREAM_DESTROY) {
        k->cg->invalidated = 1;
        leave_locked(k, 0); /* the stream goes, and its part of the capture with it */
    } else if (k && (op == GS_OP_STREAM_SYNC || op == GS_OP_STREAM_QUERY)) {
        *e = k->cg->invalidated ? cudaErrorStreamCaptureInvalidated : cudaErrorStreamCaptureUnsupported;
        k->cg->invalidated = 1;
        handled = 1;
    }
    pthread_mutex_unlock(&gs_graph_lock);
    return handled;
}

int gs_capture_refuse_slow(uint64_t stream, const char *what, cudaError_t *e) {
    capture *k;
    if (!enter_capture(stream, &k, e)) return 0;
    if (!k) return 1;
    gs_warn_once(what, "%s in a capturing stream is not supported by gpushim yet: it returns "
                 "cudaErrorStreamCaptureUnsupported and invalidates the capture", what);
    k->cg->invalidated = 1;
    *e = cudaErrorStreamCaptureUnsupported;
    pthread_mutex_unlock(&gs_graph_lock);
    return 1;
}

int gs_capture_device_sync_slow(cudaError_t *e) {
    pthread_mutex_lock(&gs_graph_lock);
    int handled = ncaps != 0;
    for (size_t i = 0; i < ncaps; i++) caps[i].cg->invalidated = 1;
    pthread_mutex_unlock(&gs_graph_lock);
    if (handled) *e = cudaErrorStreamCaptureUnsupported;
    return handled;
}

int gs_capture_malloc_slow(uint64_t stream, void **ptr, size_t size, cudaError_t *e) {
    pthread_mutex_lock(&gs_graph_lock);
    capture *k = find_locked(stream);
    pthread_mutex_unlock(&gs_graph_lock);
    if (!k) return 0;
    gs_galloc *a = calloc(1, sizeof *a);
    if (!a) { *e = cudaErrorMemoryAllocation; return 1; }
    *e = gs_cudaMalloc(&a->ptr, size); /* outside the lock: a server call */
    if (*e) { free(a); return 1; }
    atomic_init(&a->refs, 1);
    a->size = size;
    capture *k2;
    if (!enter_capture(stream, &k2, e) || !k2) {
        if (!*e) *e = cudaErrorStreamCaptureInvalidated;
        gs_cudaFree(a->ptr);
        free(a);
        return 1;
    }
    gs_gnode *n = NULL;
    *e = add_captured_locked(k2, GT_MEM_ALLOC, NULL, &n);
    if (n) n->alloc = a;
    pthread_mutex_unlock(&gs_graph_lock);
    if (!n) { gs_cudaFree(a->ptr); free(a); return 1; }
    *ptr = a->ptr;
    return 1;
}

int gs_capture_free_slow(uint64_t stream, void *ptr, cudaError_t *e) {
    capture *k;
    if (!enter_capture(stream, &k, e)) return 0;
    if (!k) return 1;
    gs_gnode *n = NULL;
    *e = add_captured_locked(k, GT_MEM_FREE, NULL, &n);
    if (n) n->dptr = ptr;
    pthread_mutex_unlock(&gs_graph_lock);
    return 1;
}

/* A forked child has a session of its own, where its parent's streams are not capturing. */
static void capture_after_fork(void) {
    pthread_mutex_init(&gs_graph_lock, NULL);
    ncaps = 0;
    ncevents = 0;
    atomic_store(&gs_capture_count, 0);
}

__attribute__((constructor)) static void capture_init(void) { pthread_atfork(NULL, NULL, capture_after_fork); }

int gs_capture_status(uint64_t stream) {
    if (!gs_capture_any()) return CAPTURE_NONE;
    pthread_mutex_lock(&gs_graph_lock);
    capture *k = find_locked(stream);
    int st = !k ? CAPTURE_NONE : k->cg->invalidated ? CAPTURE_INVALIDATED : CAPTURE_ACTIVE;
    pthread_mutex_unlock(&gs_graph_lock);
    return st;
}

/* ---- begin / end ---- */

/* Begins a capture on s into a new graph, or into `into` after its nodes deps (cudaStreamBeginCaptureToGraph). */
static cudaError_t begin_capture_into(cudaStream_t s, int mode, int ptsz, gs_graph *into, void *const *deps,
                                      size_t ndeps) {
    GS_ENTER();
    if ((unsigned)mode > MODE_RELAXED || (ndeps && !deps)) return gs_ret(cudaErrorInvalidValue);
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptsz, &h);
    if (e) return gs_ret(e);
    if (gs_is_legacy_handle(h)) return gs_ret(cudaErrorStreamCaptureUnsupported); /* the legacy stream cannot be captured */
    pthread_mutex_lock(&gs_graph_lock);
    capgraph *cg = NULL;
    nodeset start = {0};
    if (into && !gs_graph_known_locked(into)) e = cudaErrorInvalidValue;
    for (size_t i = 0; !e && i < ndeps; i++) {
        gs_gnode *d = deps[i];
        if (!gs_node_known_locked(d) || d->g != into) e = cudaErrorInvalidValue;
        else e = set_add(&start, d);
    }
    if (e) {
    } else if (find_locked(h)) {
        e = cudaErrorIllegalState;
    } else if (!(cg = calloc(1, sizeof *cg)) || !(cg->g = into ? into : gs_graph_new_locked())) {
        e = cudaErrorMemoryAllocation;
    } else {
        cg->origin = h;
        cg->mode = mode;
        cg->thread = pthread_self();
        cg->id = next_capture_id++;
        cg->borrowed = into != NULL;
        e = join_locked(cg, h, &start, NULL);
        if (e && !into) gs_graph_free_locked(cg->g);
    }
    if (e) free(cg);
    free(start.v);
    pthread_mutex_unlock(&gs_graph_lock);
    return gs_ret(e);
}

static cudaError_t begin_capture(cudaStream_t s, int mode, int ptsz) {
    return begin_capture_into(s, mode, ptsz, NULL, NULL, 0);
}

GS_IMPL cudaError_t gs_cudaStreamBeginCapture(cudaStream_t s, int mode) { return begin_capture(s, mode, 0); }
GS_IMPL cudaError_t gs_cudaStreamBeginCapture_ptsz(cudaStream_t s, int mode) { return begin_capture(s, mode, 1); }
GS_IMPL cudaError_t gs_cudaStreamBeginCaptureToGraph(cudaStream_t s, void *g, void *const *deps, const void *ed,
                                                     size_t n, int mode) {
    (void)ed;
    if (!g) return gs_ret(cudaErrorInvalidValue);
    return begin_capture_into(s, mode, 0, g, deps, n);
}
GS_IMPL cudaError_t gs_cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t s, void *g, void *const *deps, const void *ed,
                                                          size_t n, int mode) {
    (void)ed;
    if (!g) return gs_ret(cudaErrorInvalidValue);
    return begin_capture_into(s, mode, 1, g, deps, n);
}

static cudaError_t end_capture(cudaStream_t s, void **graph_out, int ptsz) {
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptsz, &h);
    if (e) return gs_ret(e);
    pthread_mutex_lock(&gs_graph_lock);
    capture *k = find_locked(h);
    capgraph *cg = k ? k->cg : NULL;
    if (!graph_out && (!cg || !cg->borrowed)) {
        /* only a capture into the caller's graph (cudaStreamBeginCaptureToGraph) may end without asking for it,
         * as the Programming Guide's conditional-node examples do */
        e = cudaErrorInvalidValue;
    } else if (!k) {
        e = cudaErrorIllegalState;
    } else if (cg->mode != MODE_RELAXED && !pthread_equal(cg->thread, pthread_self())) {
        e = cudaErrorStreamCaptureWrongThread;
    } else if (cg->origin != h) {
        e = cudaErrorStreamCaptureUnmatched; /* a capture ends on the stream it began on */
        cg->invalidated = 1;
    } else {
        if (!cg->invalidated)
            for (size_t i = 0; i < ncaps; i++)
                if (caps[i].cg == cg && caps[i].stream != h &&
                    clock_get(&k->clock, caps[i].stream) < clock_get(&caps[i].clock, caps[i].stream))
                    e = cudaErrorStreamCaptureUnjoined; /* a fork whose latest work the origin never waited on */
        int bad = cg->invalidated || e;
        if (!e) e = cg->invalidated ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
        gs_graph *g = cg->g;
        for (size_t i = 0; i < ncaps;) /* every stream of the capture leaves it */
            if (caps[i].cg == cg) leave_locked(&caps[i], !bad);
            else i++;
        if (graph_out) *graph_out = bad ? NULL : g;
    }
    pthread_mutex_unlock(&gs_graph_lock);
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

/* ---- cudaStreamGetCaptureInfo, every ABI ---- */

static cudaError_t capture_info(cudaStream_t s, int ptsz, int *status, unsigned long long *id, void **graph,
                                const void ***deps, const void **edges, size_t *ndeps) {
    if (!status) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptsz, &h);
    if (e) return gs_ret(e);
    pthread_mutex_lock(&gs_graph_lock);
    capture *k = find_locked(h);
    *status = !k ? CAPTURE_NONE : k->cg->invalidated ? CAPTURE_INVALIDATED : CAPTURE_ACTIVE;
    if (k) {
        if (id) *id = k->cg->id;
        if (graph) *graph = k->cg->g;
        if (deps) *deps = (const void **)k->deps.v;
        if (ndeps) *ndeps = k->deps.n;
    } else {
        if (graph) *graph = NULL;
        if (deps) *deps = NULL;
        if (ndeps) *ndeps = 0;
    }
    if (edges) *edges = NULL; /* all edges are default edges */
    pthread_mutex_unlock(&gs_graph_lock);
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaStreamGetCaptureInfo(cudaStream_t s, int *st, unsigned long long *id) {
    return capture_info(s, 0, st, id, NULL, NULL, NULL, NULL);
}
GS_IMPL cudaError_t gs_cudaStreamGetCaptureInfo_ptsz(cudaStream_t s, int *st, unsigned long long *id) {
    return capture_info(s, 1, st, id, NULL, NULL, NULL, NULL);
}
GS_IMPL cudaError_t gs_cudaStreamGetCaptureInfo__13(cudaStream_t s, int *st, unsigned long long *id, void **g,
                                                    const void ***deps, const void **edges, size_t *n) {
    return capture_info(s, 0, st, id, g, deps, edges, n);
}
GS_IMPL cudaError_t gs_cudaStreamGetCaptureInfo_v2(cudaStream_t s, int *st, unsigned long long *id, void **g,
                                                   const void ***deps, size_t *n) {
    return capture_info(s, 0, st, id, g, deps, NULL, n);
}
GS_IMPL cudaError_t gs_cudaStreamGetCaptureInfo_v2_ptsz(cudaStream_t s, int *st, unsigned long long *id, void **g,
                                                        const void ***deps, size_t *n) {
    return capture_info(s, 1, st, id, g, deps, NULL, n);
}
GS_IMPL cudaError_t gs_cudaStreamGetCaptureInfo_v3(cudaStream_t s, int *st, unsigned long long *id, void **g,
                                                   const void ***deps, const void **edges, size_t *n) {
    return capture_info(s, 0, st, id, g, deps, edges, n);
}
GS_IMPL cudaError_t gs_cudaStreamGetCaptureInfo_v3_ptsz(cudaStream_t s, int *st, unsigned long long *id, void **g,
                                                        const void ***deps, const void **edges, size_t *n) {
    return capture_info(s, 1, st, id, g, deps, edges, n);
}
GS_IMPL cudaError_t gs_cudaStreamGetCaptureInfo_ptsz__13(cudaStream_t s, int *st, unsigned long long *id, void **g,
                                                         const void ***deps, const void **edges, size_t *n) {
    return capture_info(s, 1, st, id, g, deps, edges, n);
}

/* ---- cudaStreamUpdateCaptureDependencies: the nodes the stream's next captured call depends on ---- */

static cudaError_t update_capture_deps(cudaStream_t s, int ptsz, void *const *nodes, size_t n, unsigned flags) {
    /* cudaStreamAddCaptureDependencies 0, cudaStreamSetCaptureDependencies 1 */
    if (flags > 1 || (n && !nodes)) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptsz, &h);
    if (e) return gs_ret(e);
    pthread_mutex_lock(&gs_graph_lock);
    capture *k = find_locked(h);
    if (!k) e = cudaErrorIllegalState;
    else if (k->cg->invalidated) e = cudaErrorStreamCaptureInvalidated;
    for (size_t i = 0; !e && i < n; i++) {
        gs_gnode *d = nodes[i];
        if (!gs_node_known_locked(d) || d->g != k->cg->g) e = cudaErrorInvalidValue;
    }
    if (!e) {
        if (flags == 1) k->deps.n = 0;
        for (size_t i = 0; !e && i < n; i++) e = set_add(&k->deps, nodes[i]);
    }
    pthread_mutex_unlock(&gs_graph_lock);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaStreamUpdateCaptureDependencies(cudaStream_t s, void *const *nodes, size_t n, unsigned f) {
    return update_capture_deps(s, 0, nodes, n, f);
}
GS_IMPL cudaError_t gs_cudaStreamUpdateCaptureDependencies_ptsz(cudaStream_t s, void *const *nodes, size_t n,
                                                                unsigned f) {
    return update_capture_deps(s, 1, nodes, n, f);
}
GS_IMPL cudaError_t gs_cudaStreamUpdateCaptureDependencies__13(cudaStream_t s, void *const *nodes, const void *ed,
                                                               size_t n, unsigned f) {
    (void)ed;
    return update_capture_deps(s, 0, nodes, n, f);
}
GS_IMPL cudaError_t gs_cudaStreamUpdateCaptureDependencies_v2(cudaStream_t s, void *const *nodes, const void *ed,
                                                              size_t n, unsigned f) {
    (void)ed;
    return update_capture_deps(s, 0, nodes, n, f);
}
GS_IMPL cudaError_t gs_cudaStreamUpdateCaptureDependencies_v2_ptsz(cudaStream_t s, void *const *nodes,
                                                                   const void *ed, size_t n, unsigned f) {
    (void)ed;
    return update_capture_deps(s, 1, nodes, n, f);
}
GS_IMPL cudaError_t gs_cudaStreamUpdateCaptureDependencies_ptsz__13(cudaStream_t s, void *const *nodes,
                                                                    const void *ed, size_t n, unsigned f) {
    (void)ed;
    return update_capture_deps(s, 1, nodes, n, f);
}
