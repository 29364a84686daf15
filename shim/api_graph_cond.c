/* Conditional graph nodes (CUDA C++ Programming Guide, "Conditional Graph Nodes"; docs/graphs.md).
 *
 * A handle (cudaGraphConditionalHandleCreate) is the device address of a 4-byte cell in server memory,
 * allocated for the graph and kept while the graph, its clones or an executable graph made from it exist.
 * Kernels set it with cudaGraphSetConditional (the PTX engine stores the value at the handle). A conditional
 * node (cudaGraphAddNode with cudaGraphNodeTypeConditional) owns its body graphs; when the graph is
 * instantiated each body is flattened like a graph and the node becomes one GRAPH_COND call in the uploaded
 * segment, which the server runs in stream order: IF, WHILE or SWITCH on the cell's value. A launch stays
 * one frame. Handles made with cudaGraphCondAssignDefault get their default value at the start of each
 * launch of the graph (and of each run of the body whose graph they were made for). */
#include <stdlib.h>
#include <string.h>

#include "gs_graph.h"

#define COND_ASSIGN_DEFAULT 1u /* cudaGraphCondAssignDefault */
#define COND_MAX_BODIES (1u << 16)

cudaError_t gs_cudaMemcpy(void *d, const void *s, size_t n, int kind);

GS_IMPL cudaError_t gs_cudaGraphConditionalHandleCreate(uint64_t *out, void *gp, unsigned dflt, unsigned flags) {
    if (!out || (flags & ~COND_ASSIGN_DEFAULT)) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&gs_graph_lock);
    int known = gp && gs_graph_known_locked(gp);
    pthread_mutex_unlock(&gs_graph_lock);
    if (!known) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_galloc *a = calloc(1, sizeof *a);
    if (!a) return gs_ret(cudaErrorMemoryAllocation);
    cudaError_t e = gs_cudaMalloc(&a->ptr, 8);
    if (e) { free(a); return e; }
    atomic_init(&a->refs, 1);
    a->size = 8;
    uint64_t init = dflt; /* the value before any launch (CUDA leaves it unspecified without the flag) */
    e = gs_cudaMemcpy(a->ptr, &init, sizeof init, cudaMemcpyHostToDevice);
    pthread_mutex_lock(&gs_graph_lock);
    gs_graph *g = gp;
    gs_gcond *c = NULL;
    if (!e && !gs_graph_known_locked(g)) e = cudaErrorInvalidValue; /* destroyed meanwhile */
    if (!e && !(c = realloc(g->conds, (g->nconds + 1) * sizeof *c))) e = cudaErrorMemoryAllocation;
    if (!e) {
        g->conds = c;
        g->conds[g->nconds++] = (gs_gcond){a, dflt, flags};
        *out = (uint64_t)(uintptr_t)a->ptr;
    }
    pthread_mutex_unlock(&gs_graph_lock);
    if (e) galloc_unref(a);
    return gs_ret(e);
}

void gs_graph_conds_free_locked(gs_graph *g) {
    for (size_t i = 0; i < g->nconds; i++) galloc_unref(g->conds[i].mem);
    free(g->conds);
    g->conds = NULL;
    g->nconds = 0;
}

int gs_graph_conds_copy_locked(gs_graph *d, const gs_graph *s) {
    if (!s->nconds) return 0;
    d->conds = malloc(s->nconds * sizeof *d->conds);
    if (!d->conds) return 1;
    memcpy(d->conds, s->conds, s->nconds * sizeof *d->conds);
    d->nconds = s->nconds;
    for (size_t i = 0; i < s->nconds; i++) atomic_fetch_add(&s->conds[i].mem->refs, 1);
    return 0;
}

void gs_cond_node_free_locked(gs_gnode *n) {
    for (unsigned i = 0; i < n->nbodies; i++)
        if (n->bodies[i]) gs_graph_free_locked(n->bodies[i]);
    free(n->bodies);
    n->bodies = NULL;
    n->nbodies = 0;
}

static cudaError_t make_bodies_locked(gs_gnode *n, unsigned count) {
    n->bodies = calloc(count, sizeof *n->bodies);
    if (!n->bodies) return cudaErrorMemoryAllocation;
    n->nbodies = count;
    for (unsigned i = 0; i < count; i++) {
        if (!(n->bodies[i] = gs_graph_new_locked())) return cudaErrorMemoryAllocation;
        n->bodies[i]->owner = n;
    }
    return cudaSuccess;
}

int gs_cond_node_clone_locked(gs_gnode *d, const gs_gnode *s) {
    if (s->type != GT_CONDITIONAL) return 0;
    d->cond_type = s->cond_type;
    d->handle = s->handle;
    d->bodies = calloc(s->nbodies ? s->nbodies : 1, sizeof *d->bodies);
    if (!d->bodies) return 1;
    d->nbodies = s->nbodies;
    for (unsigned i = 0; i < s->nbodies; i++) {
        if (!(d->bodies[i] = gs_graph_clone_locked(s->bodies[i]))) return 1;
        d->bodies[i]->owner = d;
    }
    return 0;
}

/* Whether h is a handle made for g or for a graph that contains g (a body of one of its nodes). */
static int handle_of_locked(const gs_graph *g, uint64_t h) {
    for (; g; g = g->owner ? g->owner->g : NULL)
        for (size_t i = 0; i < g->nconds; i++)
            if ((uint64_t)(uintptr_t)g->conds[i].mem->ptr == h) return 1;
    return 0;
}

typedef struct {
    uint64_t handle;
    int type;
    unsigned size;
    gs_graph **body_out; /* phGraph_out: the node's body array */
} cond_params;

typedef struct {
    const cond_params *p;
    cudaError_t e;
} cond_fill;

static void fill_cond(gs_gnode *n, const void *arg) {
    cond_fill *f = (cond_fill *)arg;
    n->cond_type = f->p->type;
    n->handle = f->p->handle;
    f->e = make_bodies_locked(n, f->p->size);
}

/* cudaConditionalNodeParams: handle, type, size, phGraph_out (out: the node's bodies) */
cudaError_t gs_graph_add_conditional(void **out, void *gp, void *const *deps, size_t nd, unsigned char *params) {
    cond_params *p = (cond_params *)params;
    int ok = p->type == 0 ? p->size == 1 || p->size == 2 : p->type == 1 ? p->size == 1
           : p->type == 2 && p->size >= 1 && p->size <= COND_MAX_BODIES;
    if (!ok || !out) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&gs_graph_lock);
    ok = gp && gs_graph_known_locked(gp) && handle_of_locked(gp, p->handle);
    pthread_mutex_unlock(&gs_graph_lock);
    if (!ok) return gs_ret(cudaErrorInvalidValue);
    gs_gops ops = {0};
    cond_fill f = {p, cudaSuccess};
    cudaError_t e = add_node(out, gp, deps, nd, GT_CONDITIONAL, &ops, fill_cond, &f);
    if (e) return e;
    if (f.e) { /* no memory for the bodies: the node goes again */
        gs_cudaGraphDestroyNode(*out);
        return gs_ret(f.e);
    }
    pthread_mutex_lock(&gs_graph_lock);
    p->body_out = ((gs_gnode *)*out)->bodies;
    pthread_mutex_unlock(&gs_graph_lock);
    return cudaSuccess;
}

/* MEMSET_WIDE of one 4-byte element: a handle's default value, as a graph op. */
static cudaError_t default_op(gs_gops *ops, const gs_gcond *c) {
    gs_wbuf w;
    gs_w_init(&w);
    gs_w_array(&w, 7); /* dst pitch value width height elem stream */
    gs_w_uint(&w, (uint64_t)(uintptr_t)c->mem->ptr);
    gs_w_uint(&w, 0);
    gs_w_uint(&w, c->dflt);
    gs_w_uint(&w, 1);
    gs_w_uint(&w, 1);
    gs_w_uint(&w, 4);
    gs_gop op = {.kind = OP_CALL, .op = GS_OP_MEMSET_WIDE, .prefix = w.len};
    op.bytes = w.oom ? NULL : malloc(w.len + 1);
    if (op.bytes) memcpy(op.bytes, w.buf, w.len);
    gs_w_free(&w);
    if (!op.bytes) return cudaErrorMemoryAllocation;
    return gs_ops_append(ops, &op); /* which frees op.bytes when it fails */
}

cudaError_t gs_cond_defaults_locked(gs_gops *ops, const gs_graph *g, gs_galloc ***allocs, size_t *nallocs) {
    for (size_t i = 0; i < g->nconds; i++) {
        const gs_gcond *c = &g->conds[i];
        gs_galloc **a = realloc(*allocs, (*nallocs + 1) * sizeof *a);
        if (!a) return cudaErrorMemoryAllocation;
        *allocs = a;
        a[(*nallocs)++] = c->mem;
        atomic_fetch_add(&c->mem->refs, 1);
        if (c->flags & COND_ASSIGN_DEFAULT) {
            cudaError_t e = default_op(ops, c);
            if (e) return e;
        }
    }
    return cudaSuccess;
}
