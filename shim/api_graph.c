/* CUDA graphs built node by node, and the queries on graphs and nodes (shim/gs_graph.h).
 *
 * Conditional nodes are in api_graph_cond.c. Not supported (a clear error): external semaphore nodes, kernel nodes whose
 * arguments come as `extra` (packed buffer), memcpy nodes with CUDA arrays. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gs_capture.h"
#include "gs_graph.h"

#ifndef cudaErrorOperatingSystem
#define cudaErrorOperatingSystem 304
#endif

static gs_graph *graphs;
static gs_gnode *node_of(void *np, int type);

/* ---- the model ---- */

int gs_graph_known_locked(const gs_graph *g) { return gs_ptr_known(GS_HANDLE_GRAPH, g); }

gs_graph *gs_graph_new_locked(void) {
    gs_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->next = graphs;
    graphs = g;
    gs_handle_add(GS_HANDLE_GRAPH, (uintptr_t)g);
    return g;
}

void gs_ops_clear(gs_gops *o) {
    for (size_t i = 0; i < o->n; i++) free(o->v[i].bytes);
    free(o->v);
    *o = (gs_gops){0};
}

cudaError_t gs_ops_append(gs_gops *o, const gs_gop *op) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 2;
        gs_gop *p = realloc(o->v, cap * sizeof *p);
        if (!p) { free(op->bytes); return cudaErrorMemoryAllocation; }
        o->v = p;
        o->cap = cap;
    }
    o->v[o->n++] = *op;
    return cudaSuccess;
}

cudaError_t gs_ops_copy(gs_gops *dst, const gs_gops *src) {
    for (size_t i = 0; i < src->n; i++) {
        gs_gop op = src->v[i];
        if (op.bytes) {
            size_t len = op.prefix + op.suffix + op.bulk + 1;
            op.bytes = malloc(len);
            if (!op.bytes) return cudaErrorMemoryAllocation;
            memcpy(op.bytes, src->v[i].bytes, len);
        }
        if (gs_ops_append(dst, &op)) return cudaErrorMemoryAllocation;
    }
    return cudaSuccess;
}

static void galloc_unref(gs_galloc *a) {
    if (!a || atomic_fetch_sub(&a->refs, 1) != 1) return;
    gs_cudaFree(a->ptr);
    free(a);
}

static void node_free(gs_gnode *n) {
    gs_handle_remove(GS_HANDLE_NODE, (uintptr_t)n);
    gs_ops_clear(&n->ops);
    if (n->child) gs_graph_free_locked(n->child);
    gs_cond_node_free_locked(n);
    galloc_unref(n->alloc);
    free(n->kargs);
    free(n->kargv);
    free(n->blob);
    free(n->deps);
    free(n);
}

cudaError_t gs_node_keep_blob_locked(gs_gnode *n, const void *data, size_t len, size_t at) {
    uint8_t *b = malloc(len ? len : 1);
    if (!b) return cudaErrorMemoryAllocation;
    if (len) memcpy(b, data, len);
    free(n->blob);
    n->blob = b;
    n->blob_len = len;
    n->blob_at = at;
    memcpy(n->params + at, &b, sizeof b);
    return cudaSuccess;
}

void gs_graph_free_locked(gs_graph *g) {
    gs_graph **pp = &graphs;
    while (*pp && *pp != g) pp = &(*pp)->next;
    if (*pp) *pp = g->next;
    gs_handle_remove(GS_HANDLE_GRAPH, (uintptr_t)g);
    for (size_t i = 0; i < g->n; i++) node_free(g->nodes[i]);
    free(g->nodes);
    gs_graph_conds_free_locked(g);
    gs_uobj_refs_release(&g->uobjs);
    free(g);
}

gs_gnode *gs_node_new_locked(gs_graph *g, int type) {
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 16;
        gs_gnode **p = realloc(g->nodes, cap * sizeof *p);
        if (!p) return NULL;
        g->nodes = p;
        g->cap = cap;
    }
    gs_gnode *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    gs_handle_add(GS_HANDLE_NODE, (uintptr_t)n);
    n->g = g;
    n->type = type;
    g->nodes[g->n++] = n;
    return n;
}

/* Looked up among the live nodes before it is read: an application's garbage or destroyed node is refused. */
int gs_node_known_locked(const gs_gnode *n) {
    if (!gs_ptr_known(GS_HANDLE_NODE, n)) return 0;
    for (gs_graph *g = graphs; g; g = g->next)
        if (g == n->g)
            for (size_t i = 0; i < g->n; i++)
                if (g->nodes[i] == n) return 1;
    return 0;
}

cudaError_t gs_node_add_dep_locked(gs_gnode *n, gs_gnode *dep) {
    for (size_t i = 0; i < n->ndeps; i++)
        if (n->deps[i] == dep) return cudaSuccess;
    if (n->ndeps == n->capdeps) {
        size_t cap = n->capdeps ? n->capdeps * 2 : 4;
        gs_gnode **p = realloc(n->deps, cap * sizeof *p);
        if (!p) return cudaErrorMemoryAllocation;
        n->deps = p;
        n->capdeps = cap;
    }
    n->deps[n->ndeps++] = dep;
    return cudaSuccess;
}

static size_t index_of(const gs_graph *g, const gs_gnode *n) {
    for (size_t i = 0; i < g->n; i++)
        if (g->nodes[i] == n) return i;
    return (size_t)-1;
}

static cudaError_t copy_kargs(gs_gnode *dst, const gs_gnode *src);

gs_graph *gs_graph_clone_locked(const gs_graph *g) {
    gs_graph *c = gs_graph_new_locked();
    if (!c) return NULL;
    int bad = 0;
    for (size_t i = 0; i < g->n && !bad; i++) {
        const gs_gnode *s = g->nodes[i];
        gs_gnode *d = gs_node_new_locked(c, s->type);
        if (!d) { bad = 1; break; }
        d->event = s->event;
        d->dptr = s->dptr;
        d->clone_of = s;
        memcpy(d->params, s->params, sizeof d->params);
        if (s->alloc) { d->alloc = s->alloc; atomic_fetch_add(&s->alloc->refs, 1); }
        bad = gs_ops_copy(&d->ops, &s->ops) || copy_kargs(d, s) ||
              (s->blob && gs_node_keep_blob_locked(d, s->blob, s->blob_len, s->blob_at)) || (s->child && !(d->child = gs_graph_clone_locked(s->child))) ||
              gs_cond_node_clone_locked(d, s);
    }
    for (size_t i = 0; i < g->n && !bad; i++)
        for (size_t j = 0; j < g->nodes[i]->ndeps && !bad; j++)
            bad = gs_node_add_dep_locked(c->nodes[i], c->nodes[index_of(g, g->nodes[i]->deps[j])]) != cudaSuccess;
    if (!bad) bad = gs_uobj_refs_copy(&c->uobjs, &g->uobjs) != cudaSuccess;
    if (!bad) bad = gs_graph_conds_copy_locked(c, g);
    if (bad) { gs_graph_free_locked(c); return NULL; }
    return c;
}

gs_gnode **gs_graph_order_locked(const gs_graph *g) {
    size_t n = g->n, done = 0;
    gs_gnode **out = malloc((n ? n : 1) * sizeof *out);
    unsigned char *placed = calloc(n ? n : 1, 1);
    if (!out || !placed) { free(out); free(placed); return NULL; }
    while (done < n) { /* Kahn's algorithm, O(n^2 * deps): graphs are small */
        size_t before = done;
        for (size_t i = 0; i < n; i++) {
            if (placed[i]) continue;
            int ready = 1;
            for (size_t j = 0; j < g->nodes[i]->ndeps && ready; j++)
                ready = placed[index_of(g, g->nodes[i]->deps[j])];
            if (ready) { placed[i] = 1; out[done++] = g->nodes[i]; }
        }
        if (done == before) { free(out); free(placed); return NULL; } /* a cycle */
    }
    free(placed);
    return out;
}

/* ---- building nodes' ops ---- */

typedef struct { unsigned x, y, z; } udim3;
typedef struct { /* cudaKernelNodeParams (the same in CUDA 11-13, and cudaKernelNodeParamsV2) */
    void *func;
    udim3 grid, block;
    unsigned shared;
    void **kernelParams;
    void **extra;
} kernel_params;
typedef struct { void *dst; size_t pitch; unsigned value, elementSize; size_t width, height; } memset_params;
typedef struct { void *fn, *data; } host_params;
typedef struct { void *ptr; size_t pitch, xsize, ysize; } g_pitched;
typedef struct { size_t x, y, z; } g_pos;
typedef struct { /* cudaMemcpy3DParms: 160 bytes in every version */
    void *src_array;
    g_pos src_pos;
    g_pitched src;
    void *dst_array;
    g_pos dst_pos;
    g_pitched dst;
    size_t width, height, depth;
    int kind;
} memcpy3d_params;

/* The node's own copy of the kernel's argument values, for cudaGraphKernelNodeGetParams. */
static cudaError_t keep_kargs(gs_gnode *n, const gs_gop *launch, const void *func) {
    gs_entry *k = gs_registry_find(func);
    if (!k || !k->have_layout || !launch) return cudaSuccess;
    free(n->kargs);
    free(n->kargv);
    n->kargs = malloc(launch->bulk + 1);
    n->kargv = calloc((size_t)k->nparams + 1, sizeof *n->kargv);
    if (!n->kargs || !n->kargv) return cudaErrorMemoryAllocation;
    memcpy(n->kargs, launch->bytes + launch->prefix + launch->suffix, launch->bulk);
    for (int i = 0; i < k->nparams; i++) n->kargv[i] = n->kargs + k->param_offsets[i];
    ((kernel_params *)n->params)->kernelParams = n->kargv;
    return cudaSuccess;
}

static cudaError_t copy_kargs(gs_gnode *dst, const gs_gnode *src) {
    if (!src->kargs || !src->ops.n) return cudaSuccess;
    return keep_kargs(dst, &dst->ops.v[0], ((const kernel_params *)src->params)->func);
}

cudaError_t gs_module_ensure(gs_module *m);
cudaError_t gs_entry_layout(gs_entry *k);

/* A kernel node's `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE, CU_LAUNCH_PARAM_END;
 * CUDA Runtime API, cudaKernelNodeParams): the packed argument buffer, as an array of pointers into it at the
 * kernel's parameter offsets (*out, malloc'd). Arguments come in kernelParams or extra, not both. */
static cudaError_t unpack_extra(const kernel_params *p, void ***out) {
    if (p->kernelParams) return cudaErrorInvalidValue;
    const uint8_t *buf = NULL;
    size_t len = 0;
    int have_len = 0;
    for (size_t i = 0; p->extra[i] != (void *)0; i += 2) {
        if (i >= 64) return cudaErrorInvalidValue; /* no CU_LAUNCH_PARAM_END */
        if (p->extra[i] == (void *)1) buf = p->extra[i + 1];
        else if (p->extra[i] == (void *)2 && p->extra[i + 1]) { len = *(const size_t *)p->extra[i + 1]; have_len = 1; }
        else return cudaErrorInvalidValue;
    }
    if (!buf || !have_len) return cudaErrorInvalidValue;
    gs_entry *k = gs_registry_find(p->func);
    if (!k) k = gs_drv_kernel_entry(p->func);
    if (!k || k->is_var) return (cudaError_t)98; /* cudaErrorInvalidDeviceFunction */
    cudaError_t e = gs_module_ensure(k->module);
    if (!e) e = gs_entry_layout(k);
    if (e) return e;
    if (len < k->param_bytes) return cudaErrorInvalidValue; /* the buffer must hold every parameter */
    void **argv = calloc((size_t)k->nparams + 1, sizeof *argv);
    if (!argv) return cudaErrorMemoryAllocation;
    for (int i = 0; i < k->nparams; i++) argv[i] = (void *)(buf + k->param_offsets[i]);
    *out = argv;
    return cudaSuccess;
}

cudaError_t gs_build_kernel(gs_gops *ops, const void *params, gs_gnode *n) {
    const kernel_params *p = params;
    if (!p || !p->func) return cudaErrorInvalidValue;
    void **argv = p->kernelParams, **unpacked = NULL;
    if (p->extra) {
        cudaError_t e = unpack_extra(p, &unpacked);
        if (e) return e;
        argv = unpacked;
    }
    gs_recorder r;
    gs_record_begin(&r, ops);
    cudaError_t e = gs_cudaLaunchKernel(p->func, (dim3){p->grid.x, p->grid.y, p->grid.z},
                                        (dim3){p->block.x, p->block.y, p->block.z}, argv, p->shared, NULL);
    gs_record_end(&r);
    free(unpacked);
    if (!e && n) {
        memcpy(n->params, p, sizeof *p);
        ((kernel_params *)n->params)->extra = NULL; /* the node keeps the values, given back as kernelParams */
        e = keep_kargs(n, ops->n ? &ops->v[ops->n - 1] : NULL, p->func);
    }
    return e;
}

cudaError_t gs_build_memset(gs_gops *ops, const void *params) {
    const memset_params *p = params;
    if (!p || !p->dst || !p->width || !p->height) return cudaErrorInvalidValue;
    unsigned es = p->elementSize;
    if (es != 1 && es != 2 && es != 4) return cudaErrorInvalidValue;
    size_t pitch = p->height > 1 ? p->pitch : p->width * es;
    if (p->height > 1 && pitch < p->width * es) return cudaErrorInvalidValue;
    cudaError_t e = gs_check_device_range(p->dst, pitch * (p->height - 1) + p->width * es);
    if (e) return e;
    gs_recorder r;
    gs_record_begin(&r, ops);
    if (es == 1 && p->height == 1) {
        e = gs_cudaMemsetAsync(p->dst, (int)p->value, p->width, NULL);
    } else if (es == 1) {
        e = gs_cudaMemset2DAsync(p->dst, pitch, (int)p->value, p->width, p->height, NULL);
    } else {
        gs_call c;
        gs_call_begin(&c, GS_OP_MEMSET_WIDE, 7);
        gs_w_uint(c.w, (uintptr_t)p->dst);
        gs_w_uint(c.w, pitch);
        gs_w_uint(c.w, p->value);
        gs_w_uint(c.w, p->width);
        gs_w_uint(c.w, p->height);
        gs_w_uint(c.w, es);
        gs_w_uint(c.w, 0);
        if (!gs_capture_record(0, &c, &e)) e = cudaErrorUnknown;
    }
    gs_record_end(&r);
    return e;
}

cudaError_t gs_build_memcpy3d(gs_gops *ops, const void *params) {
    const memcpy3d_params *m = params;
    if (!m) return cudaErrorInvalidValue;
    if (m->src_array || m->dst_array) {
        gs_warn_once("graph-memcpy-array", "memcpy nodes with CUDA arrays are not supported by gpushim yet");
        return cudaErrorNotSupported;
    }
    gs_recorder r;
    gs_record_begin(&r, ops);
    cudaError_t e = cudaSuccess;
    for (size_t z = 0; z < m->depth && !e; z++) {
        char *d = (char *)m->dst.ptr + (m->dst_pos.z + z) * m->dst.pitch * m->dst.ysize + m->dst_pos.y * m->dst.pitch +
                  m->dst_pos.x;
        const char *s = (const char *)m->src.ptr + (m->src_pos.z + z) * m->src.pitch * m->src.ysize +
                        m->src_pos.y * m->src.pitch + m->src_pos.x;
        e = gs_cudaMemcpy2DAsync(d, m->dst.pitch, s, m->src.pitch, m->width, m->height, m->kind, NULL);
    }
    gs_record_end(&r);
    return e;
}

cudaError_t gs_build_memcpy1d(gs_gops *ops, void *dst, const void *src, size_t count, int kind) {
    if (!count) return cudaErrorInvalidValue;
    gs_recorder r;
    gs_record_begin(&r, ops);
    cudaError_t e = gs_memcpy(dst, src, count, kind, NULL, 0, 1);
    gs_record_end(&r);
    return e;
}

cudaError_t gs_build_host(gs_gops *ops, const void *params) {
    const host_params *p = params;
    if (!p || !p->fn) return cudaErrorInvalidValue;
    gs_recorder r;
    gs_record_begin(&r, ops);
    cudaError_t e = gs_cudaLaunchHostFunc(NULL, (cudaHostFn_t)p->fn, p->data);
    gs_record_end(&r);
    return e;
}

/* ---- graphs ---- */

GS_IMPL cudaError_t gs_cudaGraphCreate(void **out, unsigned flags) {
    if (!out || flags) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&gs_graph_lock);
    gs_graph *g = gs_graph_new_locked();
    pthread_mutex_unlock(&gs_graph_lock);
    if (!g) return gs_ret(cudaErrorMemoryAllocation);
    *out = g;
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaGraphDestroy(void *gp) {
    pthread_mutex_lock(&gs_graph_lock);
    int found = gp && gs_graph_known_locked(gp) && !((gs_graph *)gp)->owner; /* a body is its node's */
    if (found) gs_graph_free_locked(gp); /* executable graphs hold copies of their own */
    pthread_mutex_unlock(&gs_graph_lock);
    return found ? cudaSuccess : gs_ret(cudaErrorInvalidValue);
}

GS_IMPL cudaError_t gs_cudaGraphClone(void **out, void *gp) {
    if (!out) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&gs_graph_lock);
    cudaError_t e = cudaSuccess;
    if (!gp || !gs_graph_known_locked(gp)) e = cudaErrorInvalidValue;
    else if (!(*out = gs_graph_clone_locked(gp))) e = cudaErrorMemoryAllocation;
    pthread_mutex_unlock(&gs_graph_lock);
    return gs_ret(e);
}

/* Adds a node to graph g after deps: the ops are built first (outside the lock: they may call the server),
 * then `fill` completes the node under the lock. */
typedef cudaError_t (*build_fn)(gs_gops *ops, const void *params, gs_gnode *n);

static cudaError_t add_node(void **out, void *gp, void *const *deps, size_t ndeps, int type, gs_gops *ops,
                            void (*fill)(gs_gnode *, const void *), const void *arg) {
    if (!out || (ndeps && !deps)) { gs_ops_clear(ops); return gs_ret(cudaErrorInvalidValue); }
    pthread_mutex_lock(&gs_graph_lock);
    cudaError_t e = cudaSuccess;
    gs_graph *g = gp;
    if (!g || !gs_graph_known_locked(g)) e = cudaErrorInvalidValue;
    for (size_t i = 0; !e && i < ndeps; i++) {
        gs_gnode *d = deps[i];
        if (!gs_node_known_locked(d) || d->g != g) e = cudaErrorInvalidValue;
        for (size_t j = 0; !e && j < i; j++)
            if (deps[j] == d) e = cudaErrorInvalidValue; /* CUDA: duplicate dependencies are an error */
    }
    gs_gnode *n = e ? NULL : gs_node_new_locked(g, type);
    if (!e && !n) e = cudaErrorMemoryAllocation;
    for (size_t i = 0; !e && i < ndeps; i++) e = gs_node_add_dep_locked(n, deps[i]);
    if (!e) {
        n->ops = *ops;
        *ops = (gs_gops){0};
        if (fill) fill(n, arg);
        *out = n;
    }
    pthread_mutex_unlock(&gs_graph_lock);
    gs_ops_clear(ops);
    return gs_ret(e);
}

static void fill_params(gs_gnode *n, const void *p) { memcpy(n->params, p, 56); }

cudaError_t gs_graph_add_built(void **out, void *g, void *const *deps, size_t nd, int type, gs_gops *ops,
                               const void *params, size_t psize) {
    cudaError_t e = add_node(out, g, deps, nd, type, ops, NULL, NULL);
    if (!e && params) {
        pthread_mutex_lock(&gs_graph_lock);
        gs_gnode *n = *out;
        memcpy(n->params, params, psize < sizeof n->params ? psize : sizeof n->params);
        pthread_mutex_unlock(&gs_graph_lock);
    }
    return e;
}

/* A node's ops replaced (type checked): the driver face's Set calls. */
cudaError_t gs_graph_node_set_ops(void *np, int type, gs_gops *ops, const void *params, size_t psize) {
    gs_gnode *n = node_of(np, type);
    if (!n) { gs_ops_clear(ops); return cudaErrorInvalidValue; }
    gs_ops_clear(&n->ops);
    n->ops = *ops;
    *ops = (gs_gops){0};
    if (params) memcpy(n->params, params, psize < sizeof n->params ? psize : sizeof n->params);
    pthread_mutex_unlock(&gs_graph_lock);
    return cudaSuccess;
}
static void fill_memcpy(gs_gnode *n, const void *p) { memcpy(n->params, p, sizeof(memcpy3d_params)); }
static void fill_event(gs_gnode *n, const void *p) { n->event = (uintptr_t)p; }
static void fill_child(gs_gnode *n, const void *p) { n->child = (gs_graph *)p; }
static void fill_alloc(gs_gnode *n, const void *p) { n->alloc = (gs_galloc *)p; }
static void fill_free(gs_gnode *n, const void *p) { n->dptr = (void *)p; }

GS_IMPL cudaError_t gs_cudaGraphAddKernelNode(void **out, void *g, void *const *deps, size_t nd, const void *params) {
    GS_ENTER();
    gs_gops ops = {0};
    gs_gnode tmp = {0};
    cudaError_t e = gs_build_kernel(&ops, params, &tmp);
    if (e) { gs_ops_clear(&ops); free(tmp.kargs); free(tmp.kargv); return gs_ret(e); }
    e = add_node(out, g, deps, nd, GT_KERNEL, &ops, NULL, NULL);
    if (!e) { /* the kernel's argument copy moves into the node */
        gs_gnode *n = *out;
        memcpy(n->params, tmp.params, sizeof n->params);
        n->kargs = tmp.kargs;
        n->kargv = tmp.kargv;
    } else {
        free(tmp.kargs);
        free(tmp.kargv);
    }
    return e;
}

GS_IMPL cudaError_t gs_cudaGraphAddMemsetNode(void **out, void *g, void *const *deps, size_t nd, const void *params) {
    GS_ENTER();
    gs_gops ops = {0};
    cudaError_t e = gs_build_memset(&ops, params);
    if (e) { gs_ops_clear(&ops); return gs_ret(e); }
    return add_node(out, g, deps, nd, GT_MEMSET, &ops, fill_params, params);
}

GS_IMPL cudaError_t gs_cudaGraphAddHostNode(void **out, void *g, void *const *deps, size_t nd, const void *params) {
    GS_ENTER();
    gs_gops ops = {0};
    cudaError_t e = gs_build_host(&ops, params);
    if (e) { gs_ops_clear(&ops); return gs_ret(e); }
    return add_node(out, g, deps, nd, GT_HOST, &ops, fill_params, params);
}

GS_IMPL cudaError_t gs_cudaGraphAddMemcpyNode(void **out, void *g, void *const *deps, size_t nd, const void *params) {
    GS_ENTER();
    gs_gops ops = {0};
    cudaError_t e = gs_build_memcpy3d(&ops, params);
    if (e) { gs_ops_clear(&ops); return gs_ret(e); }
    return add_node(out, g, deps, nd, GT_MEMCPY, &ops, fill_memcpy, params);
}

GS_IMPL cudaError_t gs_cudaGraphAddMemcpyNode1D(void **out, void *g, void *const *deps, size_t nd, void *dst,
                                                const void *src, size_t count, int kind) {
    GS_ENTER();
    gs_gops ops = {0};
    cudaError_t e = gs_build_memcpy1d(&ops, dst, src, count, kind);
    if (e) { gs_ops_clear(&ops); return gs_ret(e); }
    memcpy3d_params p = {.src = {(void *)src, count, count, 1}, .dst = {dst, count, count, 1},
                         .width = count, .height = 1, .depth = 1, .kind = kind};
    return add_node(out, g, deps, nd, GT_MEMCPY, &ops, fill_memcpy, &p);
}

GS_IMPL cudaError_t gs_cudaGraphAddEmptyNode(void **out, void *g, void *const *deps, size_t nd) {
    gs_gops ops = {0};
    return add_node(out, g, deps, nd, GT_EMPTY, &ops, NULL, NULL);
}

/* The op of an event record (EVENT_RECORD event stream flags) or wait (STREAM_WAIT_EVENT stream event flags)
 * node, split around the stream argument. */
static cudaError_t build_event_op(gs_gops *ops, void *event, int record) {
    if (!gs_handle_known(GS_HANDLE_EVENT, (uintptr_t)event)) return cudaErrorInvalidValue;
    gs_call c;
    gs_call_begin(&c, record ? GS_OP_EVENT_RECORD : GS_OP_STREAM_WAIT_EVENT, 3);
    if (record) {
        gs_w_uint(c.w, (uintptr_t)event);
        gs_w_uint(c.w, 0); /* the stream: replaced at launch */
    } else {
        gs_w_uint(c.w, 0);
        gs_w_uint(c.w, (uintptr_t)event);
    }
    gs_w_uint(c.w, 0);
    gs_gop op = {.kind = OP_CALL, .op = c.op};
    gs_reader r;
    gs_r_init(&r, c.w->buf, c.w->len);
    uint32_t n;
    gs_r_array(&r, &n);
    if (record) gs_r_skip(&r);
    op.prefix = (size_t)(r.p - c.w->buf);
    gs_r_skip(&r);
    op.suffix = c.w->len - (size_t)(r.p - c.w->buf);
    op.bytes = malloc(op.prefix + op.suffix + 1);
    if (!op.bytes) return cudaErrorMemoryAllocation;
    memcpy(op.bytes, c.w->buf, op.prefix);
    memcpy(op.bytes + op.prefix, r.p, op.suffix);
    return gs_ops_append(ops, &op);
}

static cudaError_t event_node(void **out, void *g, void *const *deps, size_t nd, void *event, int record) {
    gs_gops ops = {0};
    cudaError_t e = build_event_op(&ops, event, record);
    if (e) { gs_ops_clear(&ops); return gs_ret(e); }
    return add_node(out, g, deps, nd, record ? GT_EVENT_RECORD : GT_WAIT_EVENT, &ops, fill_event, event);
}

/* cudaGraphEventRecordNodeSetEvent / WaitNodeSetEvent, and the exec versions (x not NULL) */
static cudaError_t set_event(void *x, void *np, void *event, int record) {
    GS_ENTER();
    gs_gops ops = {0};
    cudaError_t e = build_event_op(&ops, event, record);
    if (e) { gs_ops_clear(&ops); return gs_ret(e); }
    int type = record ? GT_EVENT_RECORD : GT_WAIT_EVENT;
    if (x) return gs_graph_exec_set_ops(x, np, type, &ops);
    gs_gnode *n = node_of(np, type);
    if (!n) { gs_ops_clear(&ops); return gs_ret(cudaErrorInvalidValue); }
    gs_ops_clear(&n->ops);
    n->ops = ops;
    n->event = (uintptr_t)event;
    pthread_mutex_unlock(&gs_graph_lock);
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaGraphEventRecordNodeSetEvent(void *n, void *ev) { return set_event(NULL, n, ev, 1); }
GS_IMPL cudaError_t gs_cudaGraphEventWaitNodeSetEvent(void *n, void *ev) { return set_event(NULL, n, ev, 0); }
GS_IMPL cudaError_t gs_cudaGraphExecEventRecordNodeSetEvent(void *x, void *n, void *ev) {
    if (!x) return gs_ret(cudaErrorInvalidValue);
    return set_event(x, n, ev, 1);
}
GS_IMPL cudaError_t gs_cudaGraphExecEventWaitNodeSetEvent(void *x, void *n, void *ev) {
    if (!x) return gs_ret(cudaErrorInvalidValue);
    return set_event(x, n, ev, 0);
}

GS_IMPL cudaError_t gs_cudaGraphAddEventRecordNode(void **out, void *g, void *const *deps, size_t nd, void *event) {
    GS_ENTER();
    return event_node(out, g, deps, nd, event, 1);
}
GS_IMPL cudaError_t gs_cudaGraphAddEventWaitNode(void **out, void *g, void *const *deps, size_t nd, void *event) {
    GS_ENTER();
    return event_node(out, g, deps, nd, event, 0);
}

GS_IMPL cudaError_t gs_cudaGraphAddChildGraphNode(void **out, void *g, void *const *deps, size_t nd, void *child) {
    pthread_mutex_lock(&gs_graph_lock);
    gs_graph *c = child && child != g && gs_graph_known_locked(child) ? gs_graph_clone_locked(child) : NULL;
    pthread_mutex_unlock(&gs_graph_lock);
    if (!c) return gs_ret(cudaErrorInvalidValue);
    gs_gops ops = {0};
    cudaError_t e = add_node(out, g, deps, nd, GT_GRAPH, &ops, fill_child, c);
    if (e) {
        pthread_mutex_lock(&gs_graph_lock);
        gs_graph_free_locked(c);
        pthread_mutex_unlock(&gs_graph_lock);
    }
    return e;
}

/* cudaMemAllocNodeParams: poolProps (88 bytes), accessDescs, accessDescCount, bytesize, dptr (out) */
typedef struct { unsigned char pool_props[88]; void *access; size_t naccess, bytesize; void *dptr; } alloc_params;

static cudaError_t alloc_node(void **out, void *g, void *const *deps, size_t nd, alloc_params *p) {
    if (!p || !p->bytesize) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_galloc *a = calloc(1, sizeof *a);
    if (!a) return gs_ret(cudaErrorMemoryAllocation);
    cudaError_t e = gs_cudaMalloc(&a->ptr, p->bytesize);
    if (e) { free(a); return e; }
    atomic_init(&a->refs, 1);
    a->size = p->bytesize;
    gs_gops ops = {0};
    e = add_node(out, g, deps, nd, GT_MEM_ALLOC, &ops, fill_alloc, a);
    if (e) { galloc_unref(a); return e; }
    p->dptr = a->ptr;
    memcpy(((gs_gnode *)*out)->params, p, sizeof *p);
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaGraphAddMemAllocNode(void **out, void *g, void *const *deps, size_t nd, void *params) {
    return alloc_node(out, g, deps, nd, params);
}
GS_IMPL cudaError_t gs_cudaGraphAddMemFreeNode(void **out, void *g, void *const *deps, size_t nd, void *dptr) {
    if (!dptr) return gs_ret(cudaErrorInvalidValue);
    gs_gops ops = {0};
    return add_node(out, g, deps, nd, GT_MEM_FREE, &ops, fill_free, dptr);
}

/* cudaGraphNodeParams (CUDA 12.2+): type, reserved, then the union at offset 16 */
static cudaError_t add_generic(void **out, void *g, void *const *deps, size_t nd, unsigned char *p) {
    if (!p) return gs_ret(cudaErrorInvalidValue);
    int type;
    memcpy(&type, p, sizeof type);
    unsigned char *u = p + 16;
    switch (type) {
    case GT_KERNEL: return gs_cudaGraphAddKernelNode(out, g, deps, nd, u);
    case GT_MEMCPY: return gs_cudaGraphAddMemcpyNode(out, g, deps, nd, u + 16); /* cudaMemcpyNodeParams.copyParams */
    case GT_MEMSET: return gs_cudaGraphAddMemsetNode(out, g, deps, nd, u);
    case GT_HOST: return gs_cudaGraphAddHostNode(out, g, deps, nd, u);
    case GT_GRAPH: return gs_cudaGraphAddChildGraphNode(out, g, deps, nd, *(void **)u);
    case GT_EMPTY: return gs_cudaGraphAddEmptyNode(out, g, deps, nd);
    case GT_WAIT_EVENT: return gs_cudaGraphAddEventWaitNode(out, g, deps, nd, *(void **)u);
    case GT_EVENT_RECORD: return gs_cudaGraphAddEventRecordNode(out, g, deps, nd, *(void **)u);
    case GT_MEM_ALLOC: return alloc_node(out, g, deps, nd, (alloc_params *)u);
    case GT_MEM_FREE: return gs_cudaGraphAddMemFreeNode(out, g, deps, nd, *(void **)u);
    case GT_CONDITIONAL: return gs_graph_add_conditional(out, g, deps, nd, u);
    default:
        gs_warn_once("graph-node-type", "cudaGraphAddNode: node type %d is not supported by gpushim (external "
                     "semaphore nodes: gpushim has no external semaphores): cudaErrorNotSupported", type);
        return gs_ret(cudaErrorNotSupported);
    }
}

GS_IMPL cudaError_t gs_cudaGraphAddNode__12(void **out, void *g, void *const *deps, size_t nd, unsigned char *p) {
    return add_generic(out, g, deps, nd, p);
}
GS_IMPL cudaError_t gs_cudaGraphAddNode__13(void **out, void *g, void *const *deps, const void *edges, size_t nd,
                                            unsigned char *p) {
    (void)edges; /* default edges only (edge data of type 0 is the same as none) */
    return add_generic(out, g, deps, nd, p);
}

/* ---- dependencies ---- */

static cudaError_t dependencies(void *gp, void *const *from, void *const *to, size_t n, int add) {
    if (n && (!from || !to)) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&gs_graph_lock);
    cudaError_t e = gp && gs_graph_known_locked(gp) ? cudaSuccess : cudaErrorInvalidValue;
    for (size_t i = 0; !e && i < n; i++) {
        gs_gnode *f = from[i], *t = to[i];
        if (!gs_node_known_locked(f) || !gs_node_known_locked(t) || f->g != gp || t->g != gp || f == t) {
            e = cudaErrorInvalidValue;
        } else if (add) {
            for (size_t j = 0; j < t->ndeps; j++)
                if (t->deps[j] == f) e = cudaErrorInvalidValue; /* already there: CUDA refuses duplicates */
            if (!e) e = gs_node_add_dep_locked(t, f);
        } else {
            size_t j = 0;
            while (j < t->ndeps && t->deps[j] != f) j++;
            if (j == t->ndeps) e = cudaErrorInvalidValue;
            else t->deps[j] = t->deps[--t->ndeps];
        }
    }
    pthread_mutex_unlock(&gs_graph_lock);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaGraphAddDependencies(void *g, void *const *from, void *const *to, size_t n) {
    return dependencies(g, from, to, n, 1);
}
GS_IMPL cudaError_t gs_cudaGraphAddDependencies__13(void *g, void *const *from, void *const *to, const void *ed,
                                                    size_t n) {
    (void)ed;
    return dependencies(g, from, to, n, 1);
}
GS_IMPL cudaError_t gs_cudaGraphRemoveDependencies(void *g, void *const *from, void *const *to, size_t n) {
    return dependencies(g, from, to, n, 0);
}
GS_IMPL cudaError_t gs_cudaGraphRemoveDependencies__13(void *g, void *const *from, void *const *to, const void *ed,
                                                       size_t n) {
    (void)ed;
    return dependencies(g, from, to, n, 0);
}

/* ---- queries ---- */

/* Fills out[0..*count) (when out) with what `pick` selects and sets *count; CUDA's convention: with out
 * NULL, *count is the total; else at most *count entries are written, the rest of out is NULL. */
static cudaError_t list_nodes(void *gp, void **out, size_t *count, int roots) {
    if (!count) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&gs_graph_lock);
    gs_graph *g = gp;
    cudaError_t e = g && gs_graph_known_locked(g) ? cudaSuccess : cudaErrorInvalidValue;
    if (!e) {
        size_t k = 0, cap = *count;
        for (size_t i = 0; i < g->n; i++) {
            if (roots && g->nodes[i]->ndeps) continue;
            if (out && k < cap) out[k] = g->nodes[i];
            k++;
        }
        if (out) {
            for (size_t i = k; i < cap; i++) out[i] = NULL;
            *count = k < cap ? k : cap;
        } else {
            *count = k;
        }
    }
    pthread_mutex_unlock(&gs_graph_lock);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaGraphGetNodes(void *g, void **nodes, size_t *count) { return list_nodes(g, nodes, count, 0); }
GS_IMPL cudaError_t gs_cudaGraphGetRootNodes(void *g, void **nodes, size_t *count) {
    return list_nodes(g, nodes, count, 1);
}

static cudaError_t edges(void *gp, void **from, void **to, void *edata, size_t *count) {
    if (!count || (!from) != (!to)) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&gs_graph_lock);
    gs_graph *g = gp;
    cudaError_t e = g && gs_graph_known_locked(g) ? cudaSuccess : cudaErrorInvalidValue;
    if (!e) {
        size_t k = 0, cap = *count;
        for (size_t i = 0; i < g->n; i++)
            for (size_t j = 0; j < g->nodes[i]->ndeps; j++, k++)
                if (from && k < cap) { from[k] = g->nodes[i]->deps[j]; to[k] = g->nodes[i]; }
        if (from) {
            for (size_t i = k; i < cap; i++) from[i] = to[i] = NULL;
            if (edata) memset(edata, 0, 8 * cap); /* cudaGraphEdgeData: 8 bytes, zero = a default edge */
            *count = k < cap ? k : cap;
        } else {
            *count = k;
        }
    }
    pthread_mutex_unlock(&gs_graph_lock);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaGraphGetEdges(void *g, void **from, void **to, size_t *n) { return edges(g, from, to, NULL, n); }
GS_IMPL cudaError_t gs_cudaGraphGetEdges__13(void *g, void **from, void **to, void *ed, size_t *n) {
    return edges(g, from, to, ed, n);
}

static cudaError_t node_links(void *np, void **out, void *edata, size_t *count, int dependents) {
    if (!count) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&gs_graph_lock);
    gs_gnode *n = np;
    cudaError_t e = gs_node_known_locked(n) ? cudaSuccess : cudaErrorInvalidValue;
    if (!e) {
        size_t k = 0, cap = *count;
        if (!dependents) {
            for (size_t j = 0; j < n->ndeps; j++, k++)
                if (out && k < cap) out[k] = n->deps[j];
        } else {
            for (size_t i = 0; i < n->g->n; i++)
                for (size_t j = 0; j < n->g->nodes[i]->ndeps; j++)
                    if (n->g->nodes[i]->deps[j] == n) {
                        if (out && k < cap) out[k] = n->g->nodes[i];
                        k++;
                    }
        }
        if (out) {
            for (size_t i = k; i < cap; i++) out[i] = NULL;
            if (edata) memset(edata, 0, 8 * cap);
            *count = k < cap ? k : cap;
        } else {
            *count = k;
        }
    }
    pthread_mutex_unlock(&gs_graph_lock);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaGraphNodeGetDependencies(void *n, void **out, size_t *c) { return node_links(n, out, NULL, c, 0); }
GS_IMPL cudaError_t gs_cudaGraphNodeGetDependencies__13(void *n, void **out, void *ed, size_t *c) {
    return node_links(n, out, ed, c, 0);
}
GS_IMPL cudaError_t gs_cudaGraphNodeGetDependentNodes(void *n, void **out, size_t *c) {
    return node_links(n, out, NULL, c, 1);
}
GS_IMPL cudaError_t gs_cudaGraphNodeGetDependentNodes__13(void *n, void **out, void *ed, size_t *c) {
    return node_links(n, out, ed, c, 1);
}

/* Looks a node up and checks its type; returns it with the lock held, or NULL (lock released). */
static gs_gnode *node_of(void *np, int type) {
    pthread_mutex_lock(&gs_graph_lock);
    gs_gnode *n = np;
    if (gs_node_known_locked(n) && (type < 0 || n->type == type)) return n;
    pthread_mutex_unlock(&gs_graph_lock);
    return NULL;
}

GS_IMPL cudaError_t gs_cudaGraphNodeGetType(void *np, int *type) {
    if (!type) return gs_ret(cudaErrorInvalidValue);
    gs_gnode *n = node_of(np, -1);
    if (!n) return gs_ret(cudaErrorInvalidValue);
    *type = n->type;
    pthread_mutex_unlock(&gs_graph_lock);
    return cudaSuccess;
}

static cudaError_t get_params(void *np, int type, void *out, size_t size) {
    if (!out) return gs_ret(cudaErrorInvalidValue);
    gs_gnode *n = node_of(np, type);
    if (!n) return gs_ret(cudaErrorInvalidValue);
    memcpy(out, n->params, size);
    pthread_mutex_unlock(&gs_graph_lock);
    return cudaSuccess;
}

cudaError_t gs_graph_node_params(void *n, int type, void *out, size_t size) { return get_params(n, type, out, size); }

GS_IMPL cudaError_t gs_cudaGraphKernelNodeGetParams(void *n, void *p) { return get_params(n, GT_KERNEL, p, sizeof(kernel_params)); }
GS_IMPL cudaError_t gs_cudaGraphMemsetNodeGetParams(void *n, void *p) { return get_params(n, GT_MEMSET, p, sizeof(memset_params)); }
GS_IMPL cudaError_t gs_cudaGraphHostNodeGetParams(void *n, void *p) { return get_params(n, GT_HOST, p, sizeof(host_params)); }
GS_IMPL cudaError_t gs_cudaGraphMemcpyNodeGetParams(void *n, void *p) {
    return get_params(n, GT_MEMCPY, p, sizeof(memcpy3d_params));
}
GS_IMPL cudaError_t gs_cudaGraphMemAllocNodeGetParams(void *n, void *p) {
    return get_params(n, GT_MEM_ALLOC, p, sizeof(alloc_params));
}

static cudaError_t get_ptr(void *np, int type, void **out) {
    if (!out) return gs_ret(cudaErrorInvalidValue);
    gs_gnode *n = node_of(np, type);
    if (!n) return gs_ret(cudaErrorInvalidValue);
    *out = type == GT_GRAPH ? (void *)n->child : type == GT_MEM_FREE ? n->dptr : (void *)(uintptr_t)n->event;
    pthread_mutex_unlock(&gs_graph_lock);
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaGraphChildGraphNodeGetGraph(void *n, void **g) { return get_ptr(n, GT_GRAPH, g); }
GS_IMPL cudaError_t gs_cudaGraphEventRecordNodeGetEvent(void *n, void **ev) { return get_ptr(n, GT_EVENT_RECORD, ev); }
GS_IMPL cudaError_t gs_cudaGraphEventWaitNodeGetEvent(void *n, void **ev) { return get_ptr(n, GT_WAIT_EVENT, ev); }
GS_IMPL cudaError_t gs_cudaGraphMemFreeNodeGetParams(void *n, void **p) { return get_ptr(n, GT_MEM_FREE, p); }

/* Replaces a node's ops with freshly built ones (the Set calls on a graph's node). */
static cudaError_t set_node(void *np, int type, const void *params) {
    if (!params) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_gops ops = {0};
    gs_gnode tmp = {0};
    cudaError_t e = type == GT_KERNEL ? gs_build_kernel(&ops, params, &tmp)
                    : type == GT_MEMSET ? gs_build_memset(&ops, params)
                    : type == GT_HOST ? gs_build_host(&ops, params)
                                      : gs_build_memcpy3d(&ops, params);
    gs_gnode *n = e ? NULL : node_of(np, type);
    if (!e && !n) e = cudaErrorInvalidValue;
    if (!e) {
        gs_ops_clear(&n->ops);
        n->ops = ops;
        ops = (gs_gops){0};
        if (type == GT_KERNEL) {
            free(n->kargs);
            free(n->kargv);
            memcpy(n->params, tmp.params, sizeof n->params);
            n->kargs = tmp.kargs;
            n->kargv = tmp.kargv;
            tmp.kargs = NULL;
            tmp.kargv = NULL;
        } else {
            memcpy(n->params, params, type == GT_MEMCPY ? sizeof(memcpy3d_params) : 56);
        }
        pthread_mutex_unlock(&gs_graph_lock);
    }
    free(tmp.kargs);
    free(tmp.kargv);
    gs_ops_clear(&ops);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaGraphKernelNodeSetParams(void *n, const void *p) { return set_node(n, GT_KERNEL, p); }
GS_IMPL cudaError_t gs_cudaGraphMemsetNodeSetParams(void *n, const void *p) { return set_node(n, GT_MEMSET, p); }
GS_IMPL cudaError_t gs_cudaGraphHostNodeSetParams(void *n, const void *p) { return set_node(n, GT_HOST, p); }
GS_IMPL cudaError_t gs_cudaGraphMemcpyNodeSetParams(void *n, const void *p) { return set_node(n, GT_MEMCPY, p); }

GS_IMPL cudaError_t gs_cudaGraphDestroyNode(void *np) {
    gs_gnode *n = node_of(np, -1);
    if (!n) return gs_ret(cudaErrorInvalidValue);
    gs_graph *g = n->g;
    for (size_t i = 0; i < g->n; i++) { /* edges into and out of the node go with it */
        gs_gnode *m = g->nodes[i];
        for (size_t j = 0; j < m->ndeps;)
            if (m->deps[j] == n) m->deps[j] = m->deps[--m->ndeps];
            else j++;
    }
    size_t i = index_of(g, n);
    memmove(&g->nodes[i], &g->nodes[i + 1], (g->n - i - 1) * sizeof *g->nodes);
    g->n--;
    node_free(n);
    pthread_mutex_unlock(&gs_graph_lock);
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaGraphNodeFindInClone(void **out, void *orig, void *clone) {
    if (!out) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&gs_graph_lock);
    gs_graph *c = clone;
    cudaError_t e = cudaErrorInvalidValue;
    if (c && gs_graph_known_locked(c))
        for (size_t i = 0; i < c->n; i++)
            if (c->nodes[i]->clone_of == orig) { *out = c->nodes[i]; e = cudaSuccess; break; }
    pthread_mutex_unlock(&gs_graph_lock);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaGraphMemcpyNodeSetParams1D(void *np, void *dst, const void *src, size_t count, int kind) {
    GS_ENTER();
    gs_gops ops = {0};
    cudaError_t e = gs_build_memcpy1d(&ops, dst, src, count, kind);
    if (e) { gs_ops_clear(&ops); return gs_ret(e); }
    memcpy3d_params p = {.src = {(void *)src, count, count, 1}, .dst = {dst, count, count, 1},
                         .width = count, .height = 1, .depth = 1, .kind = kind};
    return gs_ret(gs_graph_node_set_ops(np, GT_MEMCPY, &ops, &p, sizeof p));
}

/* cudaGraphDebugDotPrint: the graph in Graphviz's DOT language, a node per line with its type */
static const char *type_name(int t) {
    static const char *names[] = {"kernel", "memcpy", "memset", "host", "graph", "empty", "wait_event",
                                  "event_record", "ext_sem_signal", "ext_sem_wait", "mem_alloc", "mem_free",
                                  "batch_mem_op", "conditional"};
    return t >= 0 && t < (int)(sizeof names / sizeof *names) ? names[t] : "node";
}

static void dot_graph(FILE *f, const gs_graph *g, const char *prefix) {
    for (size_t i = 0; i < g->n; i++) {
        fprintf(f, "  \"%s%zu\" [label=\"%s %zu\"];\n", prefix, i, type_name(g->nodes[i]->type), i);
        for (size_t j = 0; j < g->nodes[i]->ndeps; j++)
            fprintf(f, "  \"%s%zu\" -> \"%s%zu\";\n", prefix, index_of(g, g->nodes[i]->deps[j]), prefix, i);
        if (g->nodes[i]->child) {
            char sub[64];
            snprintf(sub, sizeof sub, "%s%zu.", prefix, i);
            dot_graph(f, g->nodes[i]->child, sub);
        }
    }
}

GS_IMPL cudaError_t gs_cudaGraphDebugDotPrint(void *gp, const char *path, unsigned flags) {
    (void)flags;
    if (!path) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&gs_graph_lock);
    cudaError_t e = gp && gs_graph_known_locked(gp) ? cudaSuccess : cudaErrorInvalidValue;
    FILE *f = e ? NULL : fopen(path, "w");
    if (!e && !f) e = cudaErrorOperatingSystem;
    if (f) {
        fprintf(f, "digraph cudaGraph {\n");
        dot_graph(f, gp, "n");
        fprintf(f, "}\n");
        if (fclose(f)) e = cudaErrorOperatingSystem;
    }
    pthread_mutex_unlock(&gs_graph_lock);
    return gs_ret(e);
}

/* cudaGraphNodeSetParams / cudaGraphExecNodeSetParams (CUDA 12.2+): cudaGraphNodeParams by type */
cudaError_t gs_cudaGraphExecKernelNodeSetParams(void *x, void *node, const void *p);
cudaError_t gs_cudaGraphExecMemsetNodeSetParams(void *x, void *node, const void *p);
cudaError_t gs_cudaGraphExecHostNodeSetParams(void *x, void *node, const void *p);
cudaError_t gs_cudaGraphExecMemcpyNodeSetParams(void *x, void *node, const void *p);

static cudaError_t set_generic(void *x, void *np, unsigned char *p) {
    if (!p) return gs_ret(cudaErrorInvalidValue);
    int type;
    memcpy(&type, p, sizeof type);
    unsigned char *u = p + 16;
    switch (type) {
    case GT_KERNEL: return x ? gs_cudaGraphExecKernelNodeSetParams(x, np, u) : gs_cudaGraphKernelNodeSetParams(np, u);
    case GT_MEMCPY:
        return x ? gs_cudaGraphExecMemcpyNodeSetParams(x, np, u + 16) : gs_cudaGraphMemcpyNodeSetParams(np, u + 16);
    case GT_MEMSET: return x ? gs_cudaGraphExecMemsetNodeSetParams(x, np, u) : gs_cudaGraphMemsetNodeSetParams(np, u);
    case GT_HOST: return x ? gs_cudaGraphExecHostNodeSetParams(x, np, u) : gs_cudaGraphHostNodeSetParams(np, u);
    case GT_EVENT_RECORD: return set_event(x, np, *(void **)u, 1);
    case GT_WAIT_EVENT: return set_event(x, np, *(void **)u, 0);
    default:
        gs_warn_once("graph-set-params", "cudaGraph(Exec)NodeSetParams for node type %d is not supported by gpushim "
                     "yet: cudaErrorNotSupported", type);
        return gs_ret(cudaErrorNotSupported);
    }
}

GS_IMPL cudaError_t gs_cudaGraphNodeSetParams(void *n, unsigned char *p) { return set_generic(NULL, n, p); }
GS_IMPL cudaError_t gs_cudaGraphExecNodeSetParams(void *x, void *n, unsigned char *p) {
    if (!x) return gs_ret(cudaErrorInvalidValue);
    return set_generic(x, n, p);
}
