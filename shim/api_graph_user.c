/* User objects (cudaUserObjectCreate, Retain, Release; cudaGraphRetainUserObject, ReleaseUserObject): a
 * reference-counted destructor. Graphs hold references; clones and executable graphs hold copies of their
 * graph's references. The destructor runs when the last reference goes, on the thread that released it
 * (CUDA runs it on an internal thread; either way it must not call CUDA). */
#include <stdlib.h>

#include "gs_graph.h"

#define UOBJ_MAGIC 0x4a424f55u /* "UOBJ" */
#define USER_OBJECT_NO_DESTRUCTOR_SYNC 1u
#define GRAPH_USER_OBJECT_MOVE 1u

typedef struct gs_uobj {
    uint32_t magic;
    unsigned long refs; /* under uobj_lock */
    void *ptr;
    cudaHostFn_t destroy;
    struct gs_uobj *next;
} gs_uobj;

static pthread_mutex_t uobj_lock = PTHREAD_MUTEX_INITIALIZER;
static gs_uobj *uobjs;

static int uobj_known_locked(const gs_uobj *o) {
    for (gs_uobj *p = uobjs; p; p = p->next)
        if (p == o) return 1;
    return 0;
}

/* Drops count references; returns the object when that was the last (removed, to be destroyed). */
static gs_uobj *release_locked(gs_uobj *o, unsigned count) {
    o->refs = o->refs > count ? o->refs - count : 0;
    if (o->refs) return NULL;
    gs_uobj **pp = &uobjs;
    while (*pp && *pp != o) pp = &(*pp)->next;
    if (*pp) *pp = o->next;
    return o;
}

static void destroy(gs_uobj *o) {
    if (!o) return;
    o->destroy(o->ptr);
    free(o);
}

cudaError_t gs_uobj_refs_copy(gs_uobj_refs *dst, const gs_uobj_refs *src) {
    if (!src->n) return cudaSuccess;
    dst->obj = malloc(src->n * sizeof *dst->obj);
    dst->count = malloc(src->n * sizeof *dst->count);
    if (!dst->obj || !dst->count) {
        free(dst->obj);
        free(dst->count);
        *dst = (gs_uobj_refs){0};
        return cudaErrorMemoryAllocation;
    }
    pthread_mutex_lock(&uobj_lock);
    for (size_t i = 0; i < src->n; i++) {
        dst->obj[i] = src->obj[i];
        dst->count[i] = src->count[i];
        src->obj[i]->refs += src->count[i];
    }
    dst->n = src->n;
    pthread_mutex_unlock(&uobj_lock);
    return cudaSuccess;
}

void gs_uobj_refs_release(gs_uobj_refs *r) {
    for (size_t i = 0; i < r->n; i++) {
        pthread_mutex_lock(&uobj_lock);
        gs_uobj *dead = release_locked(r->obj[i], r->count[i]);
        pthread_mutex_unlock(&uobj_lock);
        destroy(dead);
    }
    free(r->obj);
    free(r->count);
    *r = (gs_uobj_refs){0};
}

GS_IMPL cudaError_t gs_cudaUserObjectCreate(void **out, void *ptr, cudaHostFn_t fn, unsigned refs, unsigned flags) {
    if (!out || !fn || !refs || flags != USER_OBJECT_NO_DESTRUCTOR_SYNC) return gs_ret(cudaErrorInvalidValue);
    gs_uobj *o = calloc(1, sizeof *o);
    if (!o) return gs_ret(cudaErrorMemoryAllocation);
    *o = (gs_uobj){UOBJ_MAGIC, refs, ptr, fn, NULL};
    pthread_mutex_lock(&uobj_lock);
    o->next = uobjs;
    uobjs = o;
    pthread_mutex_unlock(&uobj_lock);
    *out = o;
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaUserObjectRetain(void *obj, unsigned count) {
    if (!count) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&uobj_lock);
    int ok = uobj_known_locked(obj);
    if (ok) ((gs_uobj *)obj)->refs += count;
    pthread_mutex_unlock(&uobj_lock);
    return ok ? cudaSuccess : gs_ret(cudaErrorInvalidValue);
}

GS_IMPL cudaError_t gs_cudaUserObjectRelease(void *obj, unsigned count) {
    if (!count) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&uobj_lock);
    int ok = uobj_known_locked(obj) && ((gs_uobj *)obj)->refs >= count;
    gs_uobj *dead = ok ? release_locked(obj, count) : NULL;
    pthread_mutex_unlock(&uobj_lock);
    destroy(dead);
    return ok ? cudaSuccess : gs_ret(cudaErrorInvalidValue);
}

GS_IMPL cudaError_t gs_cudaGraphRetainUserObject(void *gp, void *obj, unsigned count, unsigned flags) {
    if (!count || (flags & ~GRAPH_USER_OBJECT_MOVE)) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&gs_graph_lock);
    pthread_mutex_lock(&uobj_lock);
    gs_graph *g = gp;
    cudaError_t e = g && gs_graph_known_locked(g) && uobj_known_locked(obj) ? cudaSuccess : cudaErrorInvalidValue;
    size_t i = 0;
    if (!e) {
        while (i < g->uobjs.n && g->uobjs.obj[i] != obj) i++;
        if (i == g->uobjs.n) {
            void *o2 = realloc(g->uobjs.obj, (i + 1) * sizeof *g->uobjs.obj);
            if (o2) g->uobjs.obj = o2;
            void *c2 = o2 ? realloc(g->uobjs.count, (i + 1) * sizeof *g->uobjs.count) : NULL;
            if (c2) g->uobjs.count = c2;
            if (!o2 || !c2) e = cudaErrorMemoryAllocation;
            else { g->uobjs.obj[i] = obj; g->uobjs.count[i] = 0; g->uobjs.n++; }
        }
    }
    if (!e) {
        g->uobjs.count[i] += count;
        if (!(flags & GRAPH_USER_OBJECT_MOVE)) ((gs_uobj *)obj)->refs += count; /* Move: the caller's references */
    }
    pthread_mutex_unlock(&uobj_lock);
    pthread_mutex_unlock(&gs_graph_lock);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaGraphReleaseUserObject(void *gp, void *obj, unsigned count) {
    if (!count) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&gs_graph_lock);
    pthread_mutex_lock(&uobj_lock);
    gs_graph *g = gp;
    cudaError_t e = cudaErrorInvalidValue;
    gs_uobj *dead = NULL;
    for (size_t i = 0; g && gs_graph_known_locked(g) && i < g->uobjs.n; i++)
        if (g->uobjs.obj[i] == obj && g->uobjs.count[i] >= count) {
            g->uobjs.count[i] -= count;
            dead = release_locked(obj, count);
            if (!g->uobjs.count[i]) {
                g->uobjs.obj[i] = g->uobjs.obj[g->uobjs.n - 1];
                g->uobjs.count[i] = g->uobjs.count[--g->uobjs.n];
            }
            e = cudaSuccess;
            break;
        }
    pthread_mutex_unlock(&uobj_lock);
    pthread_mutex_unlock(&gs_graph_lock);
    destroy(dead);
    return gs_ret(e);
}
