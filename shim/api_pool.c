/* Memory pools of the runtime face, in the client: each device's default pool, pools made by
 * cudaMemPoolCreate, the device's current pool (cudaDeviceSetMemPool) that cudaMallocAsync draws from.
 *
 * A pool is an account of stream-ordered allocations: the memory itself comes from the server's
 * allocator (cudaMallocAsync allocates at once, which stream order allows, and cudaFreeAsync frees when
 * the stream reaches it). Freed memory goes back to the server at once, so a pool never holds memory
 * beyond what is in use: its reserved memory equals its used memory, and trimming has nothing to release.
 * A pool's maxSize (cudaMemPoolProps) is enforced: an allocation beyond it fails with
 * cudaErrorMemoryAllocation. Pools cannot be exported or imported (cudaErrorNotSupported, named). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gs_api.h"

#define RPOOL_MAGIC 0x4c4f4f52u /* "ROOL" */
enum { ATTR_REUSE_FOLLOW = 1, ATTR_REUSE_OPPORTUNISTIC = 2, ATTR_REUSE_INTERNAL = 3, ATTR_RELEASE_THRESHOLD = 4,
       ATTR_RESERVED_CURRENT = 5, ATTR_RESERVED_HIGH = 6, ATTR_USED_CURRENT = 7, ATTR_USED_HIGH = 8 };

typedef struct rpool {
    uint32_t magic;
    int device, is_default, destroyed;
    int reuse[3];
    uint64_t threshold, max_size, used, high;
    struct rpool *next;
} rpool;

typedef struct {
    uintptr_t ptr;
    size_t size;
    rpool *pool;
} pool_alloc;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static rpool default_pools[GS_MAX_DEVICES];
static rpool *pool_current[GS_MAX_DEVICES]; /* NULL: the default pool */
static rpool *created;
static pool_alloc *palloc;
static size_t npalloc, palloc_cap;

static rpool *default_pool_locked(int dev) {
    rpool *p = &default_pools[dev];
    if (!p->magic) *p = (rpool){.magic = RPOOL_MAGIC, .device = dev, .is_default = 1, .reuse = {1, 1, 1}};
    return p;
}

/* A live pool of this process, or NULL. */
static rpool *as_pool_locked(void *h) {
    rpool *p = h;
    if (p >= default_pools && p < default_pools + GS_MAX_DEVICES) return p->magic == RPOOL_MAGIC ? p : NULL;
    for (rpool *q = created; q; q = q->next)
        if (q == p && !q->destroyed) return q;
    return NULL;
}

static void pool_release_locked(rpool *p) {
    if (p->is_default || !p->destroyed || p->used) return;
    rpool **pp = &created;
    while (*pp && *pp != p) pp = &(*pp)->next;
    if (*pp) *pp = p->next;
    free(p);
}

/* Allocates from `pool` (NULL: the current device's current pool), as cudaMallocAsync does. */
cudaError_t gs_pool_malloc(void **ptr, size_t size, void *pool) {
    int dev = gs_thread()->device;
    if (dev < 0 || dev >= GS_MAX_DEVICES) return cudaErrorInvalidDevice;
    pthread_mutex_lock(&pool_lock);
    rpool *p = pool ? as_pool_locked(pool) : pool_current[dev] ? pool_current[dev] : default_pool_locked(dev);
    cudaError_t e = !p ? cudaErrorInvalidValue
                    : p->device != dev ? cudaErrorInvalidValue
                    : p->max_size && p->used + size > p->max_size ? cudaErrorMemoryAllocation
                                                                 : cudaSuccess;
    if (!e) p->used += size; /* held while the server allocates, so concurrent callers respect maxSize */
    pthread_mutex_unlock(&pool_lock);
    if (e) return e;
    e = gs_cudaMalloc(ptr, size);
    pthread_mutex_lock(&pool_lock);
    if (!e && npalloc == palloc_cap) {
        size_t cap = palloc_cap ? palloc_cap * 2 : 16;
        pool_alloc *q = realloc(palloc, cap * sizeof *q);
        if (q) { palloc = q; palloc_cap = cap; }
    }
    if (e || npalloc == palloc_cap) {
        p->used -= size;
        if (!e) e = cudaErrorMemoryAllocation; /* (the allocation leaks to the session: no memory left here) */
    } else {
        palloc[npalloc++] = (pool_alloc){(uintptr_t)*ptr, size, p};
        if (p->used > p->high) p->high = p->used;
    }
    pthread_mutex_unlock(&pool_lock);
    return e;
}

/* An allocation is freed (cudaFreeAsync, cudaFree): its pool's account goes down. */
void gs_pool_forget(void *ptr) {
    pthread_mutex_lock(&pool_lock);
    for (size_t i = 0; i < npalloc; i++)
        if (palloc[i].ptr == (uintptr_t)ptr) {
            rpool *p = palloc[i].pool;
            p->used -= palloc[i].size;
            palloc[i] = palloc[--npalloc];
            pool_release_locked(p);
            break;
        }
    pthread_mutex_unlock(&pool_lock);
}

static cudaError_t pool_check_dev(int dev) {
    cudaError_t e = gs_check_device(dev);
    return e ? e : dev >= GS_MAX_DEVICES ? cudaErrorInvalidDevice : cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaDeviceGetDefaultMemPool(void **pool, int dev) {
    if (!pool) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    cudaError_t e = pool_check_dev(dev);
    if (e) return gs_ret(e);
    pthread_mutex_lock(&pool_lock);
    *pool = default_pool_locked(dev);
    pthread_mutex_unlock(&pool_lock);
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaDeviceGetMemPool(void **pool, int dev) {
    if (!pool) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    cudaError_t e = pool_check_dev(dev);
    if (e) return gs_ret(e);
    pthread_mutex_lock(&pool_lock);
    *pool = pool_current[dev] ? pool_current[dev] : default_pool_locked(dev);
    pthread_mutex_unlock(&pool_lock);
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaDeviceSetMemPool(int dev, void *pool) {
    GS_ENTER();
    cudaError_t e = pool_check_dev(dev);
    if (e) return gs_ret(e);
    pthread_mutex_lock(&pool_lock);
    rpool *p = as_pool_locked(pool);
    if (!p || p->device != dev) e = cudaErrorInvalidValue; /* a pool serves the device it was made for */
    else pool_current[dev] = p->is_default ? NULL : p;
    pthread_mutex_unlock(&pool_lock);
    return gs_ret(e);
}

/* cudaMemPoolProps: allocType, handleTypes, location {type, id}, win32SecurityAttributes, maxSize, usage */
typedef struct {
    int alloc_type, handle_types, loc_type, loc_id;
    void *win32;
    size_t max_size;
    unsigned short usage;
    unsigned char reserved[54];
} pool_props;

GS_IMPL cudaError_t gs_cudaMemPoolCreate(void **pool, const pool_props *props) {
    if (!pool || !props) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    /* cudaMemAllocationTypePinned (1) on cudaMemLocationTypeDevice (1); no shareable handle types */
    if (props->alloc_type != 1 || props->loc_type != 1) return gs_ret(cudaErrorInvalidValue);
    if (props->handle_types) {
        gs_warn_once("mempool-handles", "cudaMemPoolCreate with shareable handle types is not supported by "
                     "gpushim yet: cudaErrorNotSupported");
        return gs_ret(cudaErrorNotSupported);
    }
    cudaError_t e = pool_check_dev(props->loc_id);
    if (e) return gs_ret(cudaErrorInvalidValue);
    rpool *p = calloc(1, sizeof *p);
    if (!p) return gs_ret(cudaErrorMemoryAllocation);
    *p = (rpool){.magic = RPOOL_MAGIC, .device = props->loc_id, .reuse = {1, 1, 1}, .max_size = props->max_size};
    pthread_mutex_lock(&pool_lock);
    p->next = created;
    created = p;
    pthread_mutex_unlock(&pool_lock);
    *pool = p;
    return cudaSuccess;
}

/* CUDA: a pool with allocations still out is released once they are freed; a device's current pool
 * reverts to its default pool. The default pool cannot be destroyed. */
GS_IMPL cudaError_t gs_cudaMemPoolDestroy(void *pool) {
    pthread_mutex_lock(&pool_lock);
    rpool *p = as_pool_locked(pool);
    cudaError_t e = !p || p->is_default ? cudaErrorInvalidValue : cudaSuccess;
    if (!e) {
        for (int d = 0; d < GS_MAX_DEVICES; d++)
            if (pool_current[d] == p) pool_current[d] = NULL;
        p->destroyed = 1;
        pool_release_locked(p);
    }
    pthread_mutex_unlock(&pool_lock);
    return gs_ret(e);
}

cudaError_t gs_cudaMallocAsync(void **p, size_t n, cudaStream_t s);
cudaError_t gs_cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s);
cudaError_t gs_malloc_async_from(void **ptr, size_t size, cudaStream_t s, int ptsz, void *pool);

GS_IMPL cudaError_t gs_cudaMallocFromPoolAsync(void **ptr, size_t size, void *pool, cudaStream_t s) {
    if (!pool) return gs_ret(cudaErrorInvalidValue);
    return gs_malloc_async_from(ptr, size, s, 0, pool);
}
GS_IMPL cudaError_t gs_cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, void *pool, cudaStream_t s) {
    if (!pool) return gs_ret(cudaErrorInvalidValue);
    return gs_malloc_async_from(ptr, size, s, 1, pool);
}

GS_IMPL cudaError_t gs_cudaMemPoolGetAttribute(void *pool, int attr, void *value) {
    if (!value) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&pool_lock);
    rpool *p = as_pool_locked(pool);
    cudaError_t e = p ? cudaSuccess : cudaErrorInvalidValue;
    if (p) switch (attr) {
        case ATTR_REUSE_FOLLOW: case ATTR_REUSE_OPPORTUNISTIC: case ATTR_REUSE_INTERNAL:
            *(int *)value = p->reuse[attr - 1];
            break;
        case ATTR_RELEASE_THRESHOLD: *(uint64_t *)value = p->threshold; break;
        case ATTR_RESERVED_CURRENT: case ATTR_USED_CURRENT: *(uint64_t *)value = p->used; break;
        case ATTR_RESERVED_HIGH: case ATTR_USED_HIGH: *(uint64_t *)value = p->high; break;
        default: e = cudaErrorInvalidValue;
        }
    pthread_mutex_unlock(&pool_lock);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaMemPoolSetAttribute(void *pool, int attr, void *value) {
    if (!value) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&pool_lock);
    rpool *p = as_pool_locked(pool);
    cudaError_t e = p ? cudaSuccess : cudaErrorInvalidValue;
    if (p) switch (attr) {
        case ATTR_REUSE_FOLLOW: case ATTR_REUSE_OPPORTUNISTIC: case ATTR_REUSE_INTERNAL:
            p->reuse[attr - 1] = *(int *)value != 0;
            break;
        case ATTR_RELEASE_THRESHOLD: p->threshold = *(uint64_t *)value; break;
        case ATTR_RESERVED_HIGH: case ATTR_USED_HIGH: /* high watermarks can only be reset (to the current use) */
            if (*(uint64_t *)value) e = cudaErrorInvalidValue;
            else p->high = p->used;
            break;
        default: e = cudaErrorInvalidValue; /* the current values are read-only */
        }
    pthread_mutex_unlock(&pool_lock);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaMemPoolTrimTo(void *pool, size_t keep) {
    (void)keep; /* nothing is held beyond what is in use */
    pthread_mutex_lock(&pool_lock);
    int ok = as_pool_locked(pool) != NULL;
    pthread_mutex_unlock(&pool_lock);
    return ok ? cudaSuccess : gs_ret(cudaErrorInvalidValue);
}

/* Every device of the session reads and writes every pool's memory (gpushim's devices share one host). */
GS_IMPL cudaError_t gs_cudaMemPoolSetAccess(void *pool, const int *descs, size_t count) {
    pthread_mutex_lock(&pool_lock);
    rpool *p = as_pool_locked(pool);
    pthread_mutex_unlock(&pool_lock);
    if (!p || (count && !descs)) return gs_ret(cudaErrorInvalidValue);
    for (size_t i = 0; i < count; i++) { /* cudaMemAccessDesc: location {type, id}, flags */
        const int *d = descs + 3 * i;
        if (d[0] != 1 || gs_check_device(d[1]) || (unsigned)d[2] > 3 || d[2] == 2) return gs_ret(cudaErrorInvalidValue);
        if (d[1] == p->device && d[2] != 3) return gs_ret(cudaErrorInvalidDevice); /* the owner keeps access */
    }
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaMemPoolGetAccess(int *flags, void *pool, const int *location) {
    if (!flags || !location) return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&pool_lock);
    rpool *p = as_pool_locked(pool);
    pthread_mutex_unlock(&pool_lock);
    if (!p || location[0] != 1 || gs_check_device(location[1])) return gs_ret(cudaErrorInvalidValue);
    *flags = 3; /* cudaMemAccessFlagsProtReadWrite */
    return cudaSuccess;
}

/* CUDA 13: pools by location (devices only here) */
GS_IMPL cudaError_t gs_cudaMemGetDefaultMemPool(void **pool, const int *location, int type) {
    if (!location || location[0] != 1 || type != 1) return gs_ret(cudaErrorInvalidValue);
    return gs_cudaDeviceGetDefaultMemPool(pool, location[1]);
}
GS_IMPL cudaError_t gs_cudaMemGetMemPool(void **pool, const int *location, int type) {
    if (!location || location[0] != 1 || type != 1) return gs_ret(cudaErrorInvalidValue);
    return gs_cudaDeviceGetMemPool(pool, location[1]);
}
GS_IMPL cudaError_t gs_cudaMemSetMemPool(const int *location, int type, void *pool) {
    if (!location || location[0] != 1 || type != 1) return gs_ret(cudaErrorInvalidValue);
    return gs_cudaDeviceSetMemPool(location[1], pool);
}
