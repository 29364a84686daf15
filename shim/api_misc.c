/* Device limits and configuration, stream-ordered allocation, peer copies and peer access, and small
 * queries applications make often (PyTorch asks cudaStreamIsCapturing around most work). */
#include <pthread.h>
#include <string.h>

#include "gs_api.h"
#include "gs_capture.h"
#include "gs_registry.h"

#define cudaErrorPeerAccessAlreadyEnabled 704
#define cudaErrorPeerAccessNotEnabled 705

/* ---- limits (kept by the server, which applies those the backend acts on) ---- */

static cudaError_t device_limit(int limit, uint64_t value, int set, uint64_t *out) {
    GS_ENTER();
    gs_call c;
    gs_call_begin(&c, GS_OP_DEVICE_LIMIT, 4);
    gs_w_int(c.w, gs_thread()->device);
    gs_w_int(c.w, limit);
    gs_w_uint(c.w, value);
    gs_w_uint(c.w, (uint64_t)set);
    cudaError_t e = gs_call_run(&c);
    if (!e && out) *out = gs_u64(&c);
    gs_call_end(&c);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaDeviceSetLimit(int limit, size_t value) { return device_limit(limit, value, 1, NULL); }

GS_IMPL cudaError_t gs_cudaDeviceGetLimit(size_t *value, int limit) {
    if (!value) return gs_ret(cudaErrorInvalidValue);
    uint64_t v = 0;
    cudaError_t e = device_limit(limit, 0, 0, &v);
    if (!e) *value = (size_t)v;
    return e;
}

/* ---- cache and shared-memory bank preferences: hints, kept per device in the client ---- */

static int cache_config[GS_MAX_DEVICES], shmem_config[GS_MAX_DEVICES];

static cudaError_t set_config(int *table, int value, int max) {
    GS_ENTER();
    if (value < 0 || value > max) return gs_ret(cudaErrorInvalidValue);
    table[gs_thread()->device] = value;
    return cudaSuccess;
}

static cudaError_t get_config(const int *table, int *out) {
    if (!out) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    *out = table[gs_thread()->device];
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaDeviceSetCacheConfig(int cfg) { return set_config(cache_config, cfg, 3); }
GS_IMPL cudaError_t gs_cudaDeviceGetCacheConfig(int *cfg) { return get_config(cache_config, cfg); }
GS_IMPL cudaError_t gs_cudaDeviceSetSharedMemConfig(int cfg) { return set_config(shmem_config, cfg, 2); }
GS_IMPL cudaError_t gs_cudaDeviceGetSharedMemConfig(int *cfg) { return get_config(shmem_config, cfg); }

/* ---- stream-ordered allocation: the allocation is made at once (which stream order allows), the free
 * happens when the stream reaches it ---- */

/* cudaMallocAsync (pool NULL: the device's current pool) and cudaMallocFromPoolAsync (api_pool.c) */
cudaError_t gs_malloc_async_from(void **ptr, size_t size, cudaStream_t s, int ptsz, void *pool) {
    if (!ptr) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptsz, &h);
    if (e) return gs_ret(e);
    if (gs_capture_malloc(h, ptr, size, &e)) return gs_ret(e); /* a memory allocation node */
    return gs_ret(gs_pool_malloc(ptr, size, pool));
}

static cudaError_t malloc_async(void **ptr, size_t size, cudaStream_t s, int ptsz) {
    return gs_malloc_async_from(ptr, size, s, ptsz, NULL);
}

static cudaError_t free_async(void *ptr, cudaStream_t s, int ptsz) {
    GS_ENTER();
    if (!ptr) return cudaSuccess;
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptsz, &h);
    if (e) return gs_ret(e);
    if (gs_capture_free(h, ptr, &e)) return gs_ret(e); /* a memory free node */
    gs_range r;
    if (!gs_ranges_find((uintptr_t)ptr, &r) || r.kind != cudaMemoryTypeDevice || r.base != (uintptr_t)ptr)
        return gs_ret(cudaErrorInvalidValue);
    gs_ranges_remove(r.base, cudaMemoryTypeDevice, NULL);
    gs_pool_forget(ptr);
    gs_call c;
    gs_call_begin(&c, GS_OP_FREE_ASYNC, 2);
    gs_w_uint(c.w, (uintptr_t)ptr);
    gs_w_uint(c.w, h);
    return gs_ret(gs_call_post(&c));
}

GS_IMPL cudaError_t gs_cudaMallocAsync(void **p, size_t n, cudaStream_t s) { return malloc_async(p, n, s, 0); }
GS_IMPL cudaError_t gs_cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s) { return malloc_async(p, n, s, 1); }
GS_IMPL cudaError_t gs_cudaFreeAsync(void *p, cudaStream_t s) { return free_async(p, s, 0); }
GS_IMPL cudaError_t gs_cudaFreeAsync_ptsz(void *p, cudaStream_t s) { return free_async(p, s, 1); }

/* ---- stream capture (shim/api_graph.c) ---- */

static cudaError_t is_capturing(cudaStream_t s, int *status, int ptsz) {
    if (!status) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptsz, &h);
    if (e) return gs_ret(e);
    *status = gs_capture_status(h); /* cudaStreamCaptureStatusNone, Active or Invalidated */
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaStreamIsCapturing(cudaStream_t s, int *status) { return is_capturing(s, status, 0); }
GS_IMPL cudaError_t gs_cudaStreamIsCapturing_ptsz(cudaStream_t s, int *status) { return is_capturing(s, status, 1); }

/* ---- peers ---- */

static cudaError_t memcpy_peer(void *dst, int dst_dev, const void *src, int src_dev, size_t n, cudaStream_t s,
                               int async) {
    GS_ENTER();
    cudaError_t e = gs_check_device(dst_dev);
    if (!e) e = gs_check_device(src_dev);
    if (e) return gs_ret(e);
    return gs_memcpy(dst, src, n, cudaMemcpyDeviceToDevice, s, 0, async);
}

/* cudaMemcpyPeer: "asynchronous with respect to the host, but serialized with respect to all pending and
 * future asynchronous work in to the current device, srcDevice, and dstDevice": posted; the server fences
 * the three devices (docs/semantics.md). */
GS_IMPL cudaError_t gs_cudaMemcpyPeer(void *d, int dd, const void *s, int sd, size_t n) {
    GS_ENTER();
    cudaError_t e = gs_check_device(dd);
    if (!e) e = gs_check_device(sd);
    if (e) return gs_ret(e);
    if (n == 0) return cudaSuccess;
    if (!d || !s) return gs_ret(cudaErrorInvalidValue);
    e = gs_check_device_range(d, n);
    if (!e) e = gs_check_device_range(s, n);
    if (e) return gs_ret(e);
    gs_call c;
    gs_call_begin(&c, GS_OP_MEMCPY_PEER, 6);
    gs_w_uint(c.w, (uintptr_t)d);
    gs_w_int(c.w, dd);
    gs_w_uint(c.w, (uintptr_t)s);
    gs_w_int(c.w, sd);
    gs_w_uint(c.w, n);
    gs_w_int(c.w, gs_thread()->device);
    return gs_ret(gs_call_post(&c));
}
GS_IMPL cudaError_t gs_cudaMemcpyPeerAsync(void *d, int dd, const void *s, int sd, size_t n, cudaStream_t st) {
    return memcpy_peer(d, dd, s, sd, n, st, 1);
}

static unsigned char peer_enabled[GS_MAX_DEVICES][GS_MAX_DEVICES];
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;

static cudaError_t peer_access(int peer, unsigned flags, int enable) {
    GS_ENTER();
    int dev = gs_thread()->device;
    if (flags) return gs_ret(cudaErrorInvalidValue);
    cudaError_t e = gs_check_device(peer);
    if (e || peer == dev) return gs_ret(e ? e : cudaErrorInvalidDevice);
    int can = 0;
    e = gs_cudaDeviceCanAccessPeer(&can, dev, peer);
    if (e) return e;
    if (!can) return gs_ret(217); /* cudaErrorPeerAccessUnsupported */
    pthread_mutex_lock(&peer_lock);
    if (enable && peer_enabled[dev][peer]) e = cudaErrorPeerAccessAlreadyEnabled;
    else if (!enable && !peer_enabled[dev][peer]) e = cudaErrorPeerAccessNotEnabled;
    if (!e) { /* the server's kernels on dev reach peer's memory from now on (or no longer) */
        gs_call c;
        gs_call_begin(&c, GS_OP_PEER_ACCESS, 3);
        gs_w_int(c.w, dev);
        gs_w_int(c.w, peer);
        gs_w_uint(c.w, (unsigned)enable);
        e = gs_call_run(&c);
        gs_call_end(&c);
        if (!e) peer_enabled[dev][peer] = (unsigned char)enable;
    }
    pthread_mutex_unlock(&peer_lock);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaDeviceEnablePeerAccess(int peer, unsigned flags) { return peer_access(peer, flags, 1); }
GS_IMPL cudaError_t gs_cudaDeviceDisablePeerAccess(int peer) { return peer_access(peer, 0, 0); }

/* ---- small things ---- */

GS_IMPL cudaError_t gs_cudaInitDevice(int device, unsigned device_flags, unsigned flags) {
    GS_ENTER();
    if (flags & ~1u) return gs_ret(cudaErrorInvalidValue);
    (void)device_flags;
    return gs_ret(gs_check_device(device));
}

GS_IMPL cudaError_t gs_cudaSetValidDevices(int *devices, int len) {
    GS_ENTER();
    if (len < 0 || (len && !devices)) return gs_ret(cudaErrorInvalidValue);
    for (int i = 0; i < len; i++) {
        cudaError_t e = gs_check_device(devices[i]);
        if (e) return gs_ret(e);
    }
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaFuncGetName(const char **name, const void *func) {
    if (!name) return gs_ret(cudaErrorInvalidValue);
    gs_entry *k = gs_registry_find(func);
    if (!k || k->is_var) return gs_ret(98); /* cudaErrorInvalidDeviceFunction */
    *name = k->name;
    return cudaSuccess;
}
