/* Executable graphs: instantiation, updates, upload and launch (shim/gs_graph.h).
 *
 * An executable graph is a copy of its graph's ops in a topological order (child graphs inlined). Runs of
 * ops the server can perform by itself (kernels, memsets, device-to-device copies, host-to-device copies
 * whose data travels with the launch, host functions, event records and waits) are uploaded once as
 * segments (GRAPH_UPLOAD); a launch posts one GRAPH_LAUNCH frame per segment, carrying the host-to-device
 * data, read at launch time, and fresh host-function ids. Ops the client must take part in (copies into
 * host memory) are sent between segments as the ordinary calls they are. Running the ops one after the
 * other on the launch stream respects every dependency of the graph.
 *
 * Each executable graph keeps an event recorded after its last launch, so a launch on another stream is
 * ordered after the previous launch, as CUDA orders launches of one cudaGraphExec_t. */
#include <stdlib.h>
#include <string.h>

#include "gs_capture.h"
#include "gs_graph.h"

#define cudaErrorGraphExecUpdateFailure 910
/* cudaGraphInstantiateFlag*: AutoFreeOnLaunch 1, Upload 2, DeviceLaunch 4, UseNodePriority 8 */
#define INSTANTIATE_DEVICE_LAUNCH 4ull
#define INSTANTIATE_KNOWN 15ull
#define INLINE_H2D_MAX (4u << 20) /* larger host-to-device copies in a graph are sent as ordinary copies */

typedef struct {
    int type;
    const gs_gnode *origin; /* the graph's node it came from (for the exec SetParams calls) */
    size_t first, count;    /* its ops in exec.ops */
} xnode;

typedef struct {
    size_t first, count;
    uint64_t id; /* the server's segment, or 0: one op the client sends itself */
} segment;

typedef struct exec {
    struct exec *next;
    gs_gops ops;
    xnode *nodes;
    size_t n;
    gs_galloc **allocs;
    size_t nallocs;
    segment *segs;
    size_t nsegs;
    int uploaded;
    uint64_t event;       /* recorded after each launch: the next launch on another stream waits on it */
    uint64_t last_stream; /* stream of the last launch */
    int launched;
    unsigned long long flags; /* as instantiated (cudaGraphExecGetFlags) */
    gs_uobj_refs uobjs;       /* the graph's user object references, copied when instantiated */
} exec;

static exec *execs;
static _Atomic uint64_t next_segment_id = 1; /* instantiations run in parallel */

static int exec_known_locked(const exec *x) { return gs_ptr_known(GS_HANDLE_EXEC, x); }

/* ---- flattening ---- */

static cudaError_t cond_op_locked(exec *x, const gs_gnode *n);

static cudaError_t flatten_locked(exec *x, const gs_graph *g) {
    gs_gnode **order = gs_graph_order_locked(g);
    if (!order) return g->n ? cudaErrorInvalidValue : cudaSuccess; /* a cycle */
    /* the default values of the graph's conditional handles, before any of its nodes */
    cudaError_t e = gs_cond_defaults_locked(&x->ops, g, &x->allocs, &x->nallocs);
    for (size_t i = 0; i < g->n && !e; i++) {
        gs_gnode *n = order[i];
        if (n->type == GT_GRAPH) {
            e = flatten_locked(x, n->child);
            continue;
        }
        if (n->type == GT_CONDITIONAL) {
            e = cond_op_locked(x, n);
            continue;
        }
        xnode *p = realloc(x->nodes, (x->n + 1) * sizeof *p);
        if (!p) { e = cudaErrorMemoryAllocation; break; }
        x->nodes = p;
        x->nodes[x->n++] = (xnode){n->type, n, x->ops.n, n->ops.n};
        e = gs_ops_copy(&x->ops, &n->ops);
        if (!e && n->alloc) {
            gs_galloc **a = realloc(x->allocs, (x->nallocs + 1) * sizeof *a);
            if (!a) { e = cudaErrorMemoryAllocation; break; }
            x->allocs = a;
            x->allocs[x->nallocs++] = n->alloc;
            atomic_fetch_add(&n->alloc->refs, 1);
        }
    }
    free(order);
    return e;
}

static void exec_clear(exec *x) {
    gs_uobj_refs_release(&x->uobjs);
    gs_ops_clear(&x->ops);
    free(x->nodes);
    x->nodes = NULL;
    x->n = 0;
    for (size_t i = 0; i < x->nallocs; i++)
        if (atomic_fetch_sub(&x->allocs[i]->refs, 1) == 1) {
            gs_cudaFree(x->allocs[i]->ptr);
            free(x->allocs[i]);
        }
    free(x->allocs);
    x->allocs = NULL;
    x->nallocs = 0;
}

/* ---- upload ---- */

static int is_h2d(const gs_gop *op) {
    return (op->kind == OP_COPY && op->a[3] == cudaMemcpyHostToDevice) ||
           (op->kind == OP_COPY2D && op->a[6] == cudaMemcpyHostToDevice);
}

/* after_host: a host function comes earlier in the graph. A host-to-device copy after one must read its
 * source after the function ran (it may write it), so the client sends it itself, when the stream is there. */
static int server_side(const gs_gop *op, int after_host) {
    if (after_host && is_h2d(op)) return 0;
    switch (op->kind) {
    case OP_CALL:
    case OP_HOST_FUNC: return 1;
    case OP_COPY:
        return (op->a[3] == cudaMemcpyHostToDevice && op->a[2] <= INLINE_H2D_MAX) || op->a[3] == cudaMemcpyDeviceToDevice;
    case OP_COPY2D:
        return (op->a[6] == cudaMemcpyHostToDevice && op->a[4] * op->a[5] <= INLINE_H2D_MAX) ||
               op->a[6] == cudaMemcpyDeviceToDevice;
    default: return 0;
    }
}

/* One op as [op, args] for GRAPH_UPLOAD: the stream argument is 0 (the server puts the launch stream
 * there), a host-to-device copy's data is its length (the bytes come with each launch), a host function's
 * id is 0 (each launch brings fresh ids). */
static void encode_op(gs_wbuf *w, const gs_gop *op) {
    gs_w_array(w, 2);
    switch (op->kind) {
    case OP_CALL:
        gs_w_uint(w, (uint64_t)op->op);
        gs_w_raw(w, op->bytes, op->prefix);
        gs_w_uint(w, 0);
        gs_w_raw(w, op->bytes + op->prefix, op->suffix);
        if (op->has_bulk) gs_w_bin(w, op->bytes + op->prefix + op->suffix, op->bulk);
        break;
    case OP_HOST_FUNC:
        gs_w_uint(w, GS_OP_STREAM_HOST_FUNC);
        gs_w_array(w, 2);
        gs_w_uint(w, 0);
        gs_w_uint(w, 0);
        break;
    case OP_COPY:
        if (op->a[3] == cudaMemcpyHostToDevice) {
            gs_w_uint(w, GS_OP_MEMCPY_H2D);
            gs_w_array(w, 3);
            gs_w_uint(w, op->a[0]);
            gs_w_uint(w, 0);
            gs_w_uint(w, op->a[2]);
        } else {
            gs_w_uint(w, GS_OP_MEMCPY_D2D);
            gs_w_array(w, 4);
            gs_w_uint(w, op->a[0]);
            gs_w_uint(w, op->a[1]);
            gs_w_uint(w, op->a[2]);
            gs_w_uint(w, 0);
        }
        break;
    case OP_COPY2D:
        if (op->a[6] == cudaMemcpyHostToDevice) {
            gs_w_uint(w, GS_OP_MEMCPY2D_H2D); /* dst dpitch width height stream data */
            gs_w_array(w, 6);
            gs_w_uint(w, op->a[0]);
            gs_w_uint(w, op->a[1]);
            gs_w_uint(w, op->a[4]);
            gs_w_uint(w, op->a[5]);
            gs_w_uint(w, 0);
            gs_w_uint(w, op->a[4] * op->a[5]);
        } else {
            gs_w_uint(w, GS_OP_MEMCPY2D_D2D); /* dst dpitch src spitch width height stream */
            gs_w_array(w, 7);
            for (int i = 0; i < 6; i++) gs_w_uint(w, op->a[i]);
            gs_w_uint(w, 0);
        }
        break;
    }
}

/* What a conditional node's body may hold (CUDA: kernels, memsets, copies between device memory, empty
 * nodes, child graphs and conditional nodes). */
static int body_op_ok(const gs_gop *op) {
    switch (op->kind) {
    case OP_CALL:
        return op->op == GS_OP_LAUNCH || op->op == GS_OP_MEMSET || op->op == GS_OP_MEMSET2D ||
               op->op == GS_OP_MEMSET_WIDE || op->op == GS_OP_GRAPH_COND;
    case OP_COPY: return op->a[3] == cudaMemcpyDeviceToDevice;
    case OP_COPY2D: return op->a[6] == cudaMemcpyDeviceToDevice;
    default: return 0;
    }
}

/* A conditional node as one GRAPH_COND call [handle, type, bodies, stream]: each body graph flattened and
 * encoded like an uploaded segment. */
static cudaError_t cond_op_locked(exec *x, const gs_gnode *n) {
    gs_wbuf bw;
    gs_w_init(&bw);
    gs_w_array(&bw, n->nbodies);
    cudaError_t e = cudaSuccess;
    for (unsigned b = 0; b < n->nbodies && !e; b++) {
        exec body = {0};
        e = flatten_locked(&body, n->bodies[b]);
        for (size_t i = 0; i < body.n && !e; i++)
            if (body.nodes[i].type == GT_HOST || body.nodes[i].type == GT_MEM_ALLOC ||
                body.nodes[i].type == GT_MEM_FREE || body.nodes[i].type == GT_EVENT_RECORD ||
                body.nodes[i].type == GT_WAIT_EVENT)
                e = cudaErrorNotSupported;
        for (size_t i = 0; i < body.ops.n && !e; i++)
            if (!body_op_ok(&body.ops.v[i])) e = cudaErrorNotSupported;
        if (e == cudaErrorNotSupported)
            gs_warn_once("graph-cond-body", "a conditional node's body holds a node CUDA does not allow there "
                         "(host, event, memory allocation nodes, copies to or from host memory): "
                         "cudaGraphInstantiate returns cudaErrorNotSupported");
        if (!e) {
            gs_w_array(&bw, (uint32_t)body.ops.n);
            for (size_t i = 0; i < body.ops.n; i++) encode_op(&bw, &body.ops.v[i]);
        }
        /* the handles' memory the body retained stays with the executable graph */
        for (size_t i = 0; i < body.nallocs && !e; i++) {
            gs_galloc **a = realloc(x->allocs, (x->nallocs + 1) * sizeof *a);
            if (!a) { e = cudaErrorMemoryAllocation; break; }
            x->allocs = a;
            x->allocs[x->nallocs++] = body.allocs[i];
            atomic_fetch_add(&body.allocs[i]->refs, 1);
        }
        exec_clear(&body);
    }
    if (!e && bw.oom) e = cudaErrorMemoryAllocation;
    gs_wbuf w;
    gs_w_init(&w);
    gs_w_array(&w, 4);
    gs_w_uint(&w, n->handle);
    gs_w_uint(&w, (uint64_t)n->cond_type);
    gs_w_bin(&w, bw.buf, bw.len);
    gs_w_free(&bw);
    gs_gop op = {.kind = OP_CALL, .op = GS_OP_GRAPH_COND, .prefix = w.len};
    if (!e && !w.oom && !(op.bytes = malloc(w.len + 1))) e = cudaErrorMemoryAllocation;
    if (!e && w.oom) e = cudaErrorMemoryAllocation;
    if (!e) memcpy(op.bytes, w.buf, w.len);
    gs_w_free(&w);
    if (e) return e;
    xnode *p = realloc(x->nodes, (x->n + 1) * sizeof *p);
    if (!p) { free(op.bytes); return cudaErrorMemoryAllocation; }
    x->nodes = p;
    x->nodes[x->n++] = (xnode){n->type, n, x->ops.n, 1};
    return gs_ops_append(&x->ops, &op); /* which frees op.bytes when it fails */
}

static void free_segments(exec *x) {
    for (size_t i = 0; i < x->nsegs; i++) {
        if (!x->segs[i].id) continue;
        gs_call c;
        gs_call_begin(&c, GS_OP_GRAPH_FREE, 1);
        gs_w_uint(c.w, x->segs[i].id);
        gs_call_post(&c);
    }
    free(x->segs);
    x->segs = NULL;
    x->nsegs = 0;
    x->uploaded = 0;
}

/* Splits the ops into segments and uploads the server's ones (called with the exec private to the caller:
 * its ops are copied under the lock first). */
static cudaError_t upload(exec *x) {
    free_segments(x);
    cudaError_t e = cudaSuccess;
    int after_host = 0;
    for (size_t i = 0; i < x->ops.n && !e;) {
        size_t j = i;
        while (j < x->ops.n && server_side(&x->ops.v[j], after_host)) after_host |= x->ops.v[j++].kind == OP_HOST_FUNC;
        int client = j == i;
        if (client) j = i + 1;
        segment *p = realloc(x->segs, (x->nsegs + 1) * sizeof *p);
        if (!p) return cudaErrorMemoryAllocation;
        x->segs = p;
        segment *s = &x->segs[x->nsegs++];
        *s = (segment){i, j - i, client ? 0 : atomic_fetch_add(&next_segment_id, 1)};
        if (!client) {
            gs_wbuf w;
            gs_w_init(&w);
            gs_w_array(&w, (uint32_t)(j - i));
            for (size_t k = i; k < j; k++) encode_op(&w, &x->ops.v[k]);
            if (w.oom) {
                e = cudaErrorMemoryAllocation;
            } else {
                gs_call c;
                gs_call_begin(&c, GS_OP_GRAPH_UPLOAD, 2);
                gs_w_uint(c.w, s->id);
                c.bulk = w.buf;
                c.bulk_len = w.len;
                e = gs_call_post(&c);
            }
            gs_w_free(&w);
        }
        i = j;
    }
    /* A graph for device launch: its one segment is what a kernel's cudaGraphLaunch(x) runs (the server
     * refuses one with other operations than kernels, memsets and device-to-device copies). */
    if (!e && (x->flags & INSTANTIATE_DEVICE_LAUNCH)) {
        if (x->nsegs != 1 || !x->segs[0].id) {
            gs_warn_once("graph-device-segments", "cudaGraphInstantiateFlagDeviceLaunch: the graph must be kernels, "
                         "memsets and device-to-device copies only (and not empty): cudaErrorInvalidValue");
            e = cudaErrorInvalidValue;
        } else {
            gs_call c;
            gs_call_begin(&c, GS_OP_GRAPH_DEVICE, 2);
            gs_w_uint(c.w, (uintptr_t)x);
            gs_w_uint(c.w, x->segs[0].id);
            e = gs_call_run(&c);
            gs_call_end(&c);
        }
    }
    x->uploaded = !e;
    return e;
}

/* ---- instantiate / destroy ---- */

static cudaError_t instantiate(void **exec_out, void *gp, unsigned long long flags) {
    if (!exec_out) return gs_ret(cudaErrorInvalidValue);
    if (flags & ~INSTANTIATE_KNOWN) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    exec *x = calloc(1, sizeof *x);
    if (!x) return gs_ret(cudaErrorMemoryAllocation);
    pthread_mutex_lock(&gs_graph_lock);
    cudaError_t e = gp && gs_graph_known_locked(gp) ? flatten_locked(x, gp) : cudaErrorInvalidValue;
    if (!e) e = gs_uobj_refs_copy(&x->uobjs, &((gs_graph *)gp)->uobjs);
    pthread_mutex_unlock(&gs_graph_lock);
    /* The event that orders a launch after the previous one (created here: launches never wait). */
    gs_call c;
    if (!e) {
        gs_call_begin(&c, GS_OP_EVENT_CREATE, 2);
        gs_w_int(c.w, gs_thread()->device);
        gs_w_uint(c.w, cudaEventDisableTiming);
        e = gs_call_run(&c);
        if (!e) x->event = gs_u64(&c);
        gs_call_end(&c);
    }
    x->flags = flags;
    if (!e) e = upload(x);
    if (e) {
        if (x->event) {
            gs_call_begin(&c, GS_OP_EVENT_DESTROY, 1);
            gs_w_uint(c.w, x->event);
            gs_call_post(&c);
        }
        free_segments(x);
        exec_clear(x);
        free(x);
        return gs_ret(e);
    }
    pthread_mutex_lock(&gs_graph_lock);
    x->next = execs;
    execs = x;
    gs_handle_add(GS_HANDLE_EXEC, (uintptr_t)x);
    pthread_mutex_unlock(&gs_graph_lock);
    *exec_out = x;
    return cudaSuccess;
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
/* cudaGraphInstantiateParams: flags (8), uploadStream, errNode_out, result_out (int) */
typedef struct { unsigned long long flags; void *upload_stream, *err_node; int result; } instantiate_params;
GS_IMPL cudaError_t gs_cudaGraphInstantiateWithParams(void **exec_out, void *g, instantiate_params *p) {
    if (!p) return gs_ret(cudaErrorInvalidValue);
    cudaError_t e = instantiate(exec_out, g, p->flags);
    p->err_node = NULL;
    p->result = e ? 1 : 0; /* cudaGraphInstantiateSuccess / Error */
    return e;
}

GS_IMPL cudaError_t gs_cudaGraphExecDestroy(void *xp) {
    exec *x = xp;
    pthread_mutex_lock(&gs_graph_lock);
    exec **pp = &execs;
    while (*pp && *pp != x) pp = &(*pp)->next;
    int found = x && *pp;
    if (found) {
        *pp = x->next;
        gs_handle_remove(GS_HANDLE_EXEC, (uintptr_t)x);
    }
    pthread_mutex_unlock(&gs_graph_lock);
    if (!found) return gs_ret(cudaErrorInvalidValue);
    /* What its launches sent is on the server already; its segments and ordering event remain. */
    if (gs_ensure_connected() == cudaSuccess) {
        free_segments(x);
        gs_call c;
        gs_call_begin(&c, GS_OP_EVENT_DESTROY, 1);
        gs_w_uint(c.w, x->event);
        gs_call_post(&c);
    }
    free(x->segs);
    exec_clear(x);
    free(x);
    return cudaSuccess;
}

/* ---- launch ---- */

/* Sends one op again, on stream h (recorded instead when h is itself capturing: a graph launched into
 * a capture becomes part of it). */
cudaError_t gs_op_replay(const gs_gop *op, uint64_t h) {
    cudaStream_t s = gs_stream_of_handle(h); /* a known handle, or the legacy stream */
    switch (op->kind) {
    case OP_CALL: {
        gs_call c;
        gs_call_begin(&c, op->op, 0);
        gs_w_reset(c.w);
        gs_w_raw(c.w, op->bytes, op->prefix);
        gs_w_uint(c.w, h);
        gs_w_raw(c.w, op->bytes + op->prefix, op->suffix);
        if (op->has_bulk) {
            c.bulk = op->bytes + op->prefix + op->suffix;
            c.bulk_len = op->bulk;
        }
        cudaError_t e;
        if (!gs_capture_record(h, &c, &e)) e = gs_call_post(&c);
        return e;
    }
    case OP_COPY:
        return gs_memcpy((void *)op->a[0], (const void *)op->a[1], op->a[2], (int)op->a[3], s, 0, 1);
    case OP_COPY2D:
        return gs_cudaMemcpy2DAsync((void *)op->a[0], op->a[1], (const void *)op->a[2], op->a[3], op->a[4], op->a[5],
                                    (int)op->a[6], s);
    case OP_HOST_FUNC:
        return gs_cudaLaunchHostFunc(s, (cudaHostFn_t)op->a[0], (void *)op->a[1]);
    default:
        return cudaErrorUnknown;
    }
}

/* One GRAPH_LAUNCH frame: the segment's host-to-device data and host-function ids gathered now. */
static cudaError_t launch_segment(const exec *x, const segment *sg, uint64_t h, uint64_t event) {
    size_t data_len = 0, ncb = 0;
    for (size_t i = sg->first; i < sg->first + sg->count; i++) {
        const gs_gop *op = &x->ops.v[i];
        if (op->kind == OP_HOST_FUNC) ncb++;
        else if (op->kind == OP_COPY && op->a[3] == cudaMemcpyHostToDevice) data_len += op->a[2];
        else if (op->kind == OP_COPY2D && op->a[6] == cudaMemcpyHostToDevice) data_len += op->a[4] * op->a[5];
    }
    uint8_t *data = malloc(data_len + 1);
    if (!data) return cudaErrorMemoryAllocation;
    gs_call c;
    gs_call_begin(&c, GS_OP_GRAPH_LAUNCH, 5);
    gs_w_uint(c.w, sg->id);
    gs_w_uint(c.w, h);
    gs_w_uint(c.w, event);
    gs_w_array(c.w, (uint32_t)ncb);
    cudaStream_t s = gs_stream_of_handle(h);
    size_t off = 0;
    cudaError_t e = cudaSuccess;
    for (size_t i = sg->first; i < sg->first + sg->count; i++) {
        const gs_gop *op = &x->ops.v[i];
        if (op->kind == OP_HOST_FUNC) {
            uint64_t id = gs_callback_register(0, (void *)op->a[0], (void *)op->a[1], s);
            if (!id) e = cudaErrorMemoryAllocation;
            gs_w_uint(c.w, id);
        } else if (op->kind == OP_COPY && op->a[3] == cudaMemcpyHostToDevice) {
            memcpy(data + off, (const void *)op->a[1], op->a[2]);
            off += op->a[2];
        } else if (op->kind == OP_COPY2D && op->a[6] == cudaMemcpyHostToDevice) {
            for (size_t r = 0; r < op->a[5]; r++) /* rows packed, as MEMCPY2D_H2D takes them */
                memcpy(data + off + r * op->a[4], (const char *)op->a[2] + r * op->a[3], op->a[4]);
            off += op->a[4] * op->a[5];
        }
    }
    c.bulk = data;
    c.bulk_len = data_len;
    if (!e) e = gs_call_post(&c);
    free(data);
    return e;
}

static void post_event_call(int op, uint64_t a, uint64_t b) {
    gs_call c;
    gs_call_begin(&c, op, 3);
    gs_w_uint(c.w, a);
    gs_w_uint(c.w, b);
    gs_w_uint(c.w, 0);
    gs_call_post(&c);
}

static pthread_mutex_t launch_lock = PTHREAD_MUTEX_INITIALIZER; /* one launch or update of an exec at a time */

static cudaError_t graph_launch(void *xp, cudaStream_t s, int ptsz) {
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptsz, &h);
    if (e) return gs_ret(e);
    exec *x = xp;
    pthread_mutex_lock(&launch_lock);
    pthread_mutex_lock(&gs_graph_lock);
    int known = x && exec_known_locked(x);
    pthread_mutex_unlock(&gs_graph_lock);
    if (!known) {
        pthread_mutex_unlock(&launch_lock);
        return gs_ret(cudaErrorInvalidValue);
    }
    int capturing = gs_capture_status(h) != 0;
    if (capturing) { /* the graph's work becomes part of the capture, op by op */
        for (size_t i = 0; i < x->ops.n && !e; i++) e = gs_op_replay(&x->ops.v[i], h);
        pthread_mutex_unlock(&launch_lock);
        return gs_ret(e);
    }
    if (x->launched && x->last_stream != h) post_event_call(GS_OP_STREAM_WAIT_EVENT, h, x->event);
    x->launched = 1;
    x->last_stream = h;
    if (!x->uploaded) e = upload(x);
    int recorded = 0; /* the last segment records the ordering event itself: one frame per launch */
    int seen_host = 0;
    for (size_t i = 0; i < x->nsegs && !e; i++) {
        const segment *sg = &x->segs[i];
        recorded = sg->id && i == x->nsegs - 1;
        const gs_gop *op = &x->ops.v[sg->first];
        if (!sg->id && is_h2d(op) && seen_host) e = gs_stream_sync(h); /* the host function ran (server_side) */
        if (!e) e = sg->id ? launch_segment(x, sg, h, recorded ? x->event : 0) : gs_op_replay(op, h);
        for (size_t k = sg->first; k < sg->first + sg->count; k++) seen_host |= x->ops.v[k].kind == OP_HOST_FUNC;
    }
    if (!recorded) post_event_call(GS_OP_EVENT_RECORD, x->event, h);
    pthread_mutex_unlock(&launch_lock);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaGraphLaunch(void *x, cudaStream_t s) { return graph_launch(x, s, 0); }
GS_IMPL cudaError_t gs_cudaGraphLaunch_ptsz(void *x, cudaStream_t s) { return graph_launch(x, s, 1); }

static cudaError_t graph_upload(void *xp, cudaStream_t s, int ptsz) {
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptsz, &h);
    if (e) return gs_ret(e);
    pthread_mutex_lock(&launch_lock);
    pthread_mutex_lock(&gs_graph_lock);
    int known = xp && exec_known_locked(xp);
    pthread_mutex_unlock(&gs_graph_lock);
    if (known && !((exec *)xp)->uploaded) e = upload(xp);
    pthread_mutex_unlock(&launch_lock);
    return known ? gs_ret(e) : gs_ret(cudaErrorInvalidValue);
}

GS_IMPL cudaError_t gs_cudaGraphUpload(void *x, cudaStream_t s) { return graph_upload(x, s, 0); }
GS_IMPL cudaError_t gs_cudaGraphUpload_ptsz(void *x, cudaStream_t s) { return graph_upload(x, s, 1); }

/* ---- updates ---- */

/* Replaces the ops of the exec's node that came from `origin` (type checked); launches after it use them. */
static cudaError_t exec_set(void *xp, void *origin, int type, gs_gops *ops) {
    exec *x = xp;
    pthread_mutex_lock(&launch_lock);
    pthread_mutex_lock(&gs_graph_lock);
    cudaError_t e = x && exec_known_locked(x) ? cudaSuccess : cudaErrorInvalidValue;
    xnode *xn = NULL;
    for (size_t i = 0; !e && i < x->n && !xn; i++)
        if (x->nodes[i].origin == origin) xn = &x->nodes[i];
    if (!e && (!xn || xn->type != type)) e = cudaErrorInvalidValue;
    if (!e) { /* splice: ops before the node, the new ops, ops after it */
        gs_gops out = {0};
        gs_gops before = {x->ops.v, xn->first, xn->first};
        gs_gops after = {x->ops.v + xn->first + xn->count, x->ops.n - xn->first - xn->count, 0};
        e = gs_ops_copy(&out, &before);
        if (!e) e = gs_ops_copy(&out, ops);
        if (!e) e = gs_ops_copy(&out, &after);
        if (e) {
            gs_ops_clear(&out);
        } else {
            size_t old = xn->count;
            for (size_t i = 0; i < x->n; i++)
                if (x->nodes[i].first > xn->first) x->nodes[i].first = x->nodes[i].first - old + ops->n;
            xn->count = ops->n;
            gs_ops_clear(&x->ops);
            x->ops = out;
            x->uploaded = 0;
        }
    }
    pthread_mutex_unlock(&gs_graph_lock);
    pthread_mutex_unlock(&launch_lock);
    gs_ops_clear(ops);
    return gs_ret(e);
}

cudaError_t gs_graph_exec_set_ops(void *x, void *node, int type, gs_gops *ops) { return exec_set(x, node, type, ops); }

GS_IMPL cudaError_t gs_cudaGraphExecKernelNodeSetParams(void *x, void *node, const void *p) {
    GS_ENTER();
    gs_gops ops = {0};
    cudaError_t e = gs_build_kernel(&ops, p, NULL);
    if (e) { gs_ops_clear(&ops); return gs_ret(e); }
    return exec_set(x, node, GT_KERNEL, &ops);
}
GS_IMPL cudaError_t gs_cudaGraphExecMemsetNodeSetParams(void *x, void *node, const void *p) {
    GS_ENTER();
    gs_gops ops = {0};
    cudaError_t e = gs_build_memset(&ops, p);
    if (e) { gs_ops_clear(&ops); return gs_ret(e); }
    return exec_set(x, node, GT_MEMSET, &ops);
}
GS_IMPL cudaError_t gs_cudaGraphExecHostNodeSetParams(void *x, void *node, const void *p) {
    GS_ENTER();
    gs_gops ops = {0};
    cudaError_t e = gs_build_host(&ops, p);
    if (e) { gs_ops_clear(&ops); return gs_ret(e); }
    return exec_set(x, node, GT_HOST, &ops);
}
GS_IMPL cudaError_t gs_cudaGraphExecMemcpyNodeSetParams(void *x, void *node, const void *p) {
    GS_ENTER();
    gs_gops ops = {0};
    cudaError_t e = gs_build_memcpy3d(&ops, p);
    if (e) { gs_ops_clear(&ops); return gs_ret(e); }
    return exec_set(x, node, GT_MEMCPY, &ops);
}
GS_IMPL cudaError_t gs_cudaGraphExecMemcpyNodeSetParams1D(void *x, void *node, void *dst, const void *src,
                                                          size_t count, int kind) {
    GS_ENTER();
    gs_gops ops = {0};
    cudaError_t e = gs_build_memcpy1d(&ops, dst, src, count, kind);
    if (e) { gs_ops_clear(&ops); return gs_ret(e); }
    return exec_set(x, node, GT_MEMCPY, &ops);
}

/* cudaGraphExecUpdateResult */
enum { UPDATE_SUCCESS = 0, UPDATE_ERROR_TOPOLOGY = 2, UPDATE_ERROR_TYPE = 3 };

/* cudaGraphExecUpdate: the new graph must have the same nodes, of the same types, in the same order (CUDA:
 * the same topology); their parameters replace the exec's. */
static cudaError_t exec_update(void *xp, void *gp, int *result, void **err_node) {
    exec *x = xp;
    exec fresh = {0};
    if (result) *result = 1; /* cudaGraphExecUpdateError */
    if (err_node) *err_node = NULL;
    pthread_mutex_lock(&launch_lock);
    pthread_mutex_lock(&gs_graph_lock);
    cudaError_t e = x && exec_known_locked(x) && gp && gs_graph_known_locked(gp) ? cudaSuccess : cudaErrorInvalidValue;
    if (!e) e = flatten_locked(&fresh, gp);
    if (!e) {
        int why = fresh.n != x->n ? UPDATE_ERROR_TOPOLOGY : UPDATE_SUCCESS;
        for (size_t i = 0; !why && i < x->n; i++)
            if (fresh.nodes[i].type != x->nodes[i].type) {
                why = UPDATE_ERROR_TYPE;
                if (err_node) *err_node = (void *)fresh.nodes[i].origin;
            }
        if (result) *result = why;
        if (why) {
            e = cudaErrorGraphExecUpdateFailure;
        } else {
            for (size_t i = 0; i < x->n; i++) fresh.nodes[i].origin = x->nodes[i].origin; /* the old handles stay valid */
            gs_gops ops = x->ops;
            xnode *nodes = x->nodes;
            gs_galloc **allocs = x->allocs;
            size_t nallocs = x->nallocs;
            x->ops = fresh.ops;
            x->nodes = fresh.nodes;
            x->allocs = fresh.allocs;
            x->nallocs = fresh.nallocs;
            fresh.ops = ops;
            fresh.nodes = nodes;
            fresh.allocs = allocs;
            fresh.nallocs = nallocs;
            x->uploaded = 0;
        }
    }
    pthread_mutex_unlock(&gs_graph_lock);
    pthread_mutex_unlock(&launch_lock);
    exec_clear(&fresh);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaGraphExecUpdate__11(void *x, void *g, void **err_node, int *result) {
    return exec_update(x, g, result, err_node);
}
/* cudaGraphExecUpdateResultInfo: result, errorNode, errorFromNode */
typedef struct { int result; void *error_node, *error_from_node; } update_info;
static cudaError_t exec_update_info(void *x, void *g, update_info *info) {
    if (!info) return gs_ret(cudaErrorInvalidValue);
    info->error_from_node = NULL;
    return exec_update(x, g, &info->result, &info->error_node);
}
GS_IMPL cudaError_t gs_cudaGraphExecUpdate__12(void *x, void *g, update_info *info) { return exec_update_info(x, g, info); }
GS_IMPL cudaError_t gs_cudaGraphExecUpdate__13(void *x, void *g, update_info *info) { return exec_update_info(x, g, info); }

GS_IMPL cudaError_t gs_cudaGraphExecGetFlags(void *xp, unsigned long long *flags) {
    if (!flags) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&gs_graph_lock);
    int known = xp && exec_known_locked(xp);
    if (known) *flags = ((exec *)xp)->flags;
    pthread_mutex_unlock(&gs_graph_lock);
    return known ? cudaSuccess : gs_ret(cudaErrorInvalidValue);
}
