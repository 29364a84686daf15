/* Memory: device allocations on the server, pinned host memory in the client, copies and memsets. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gs_transport.h"

#include "gs_api.h"
#include "gs_capture.h"

/* ---- allocation ---- */

GS_IMPL cudaError_t gs_cudaMalloc(void **ptr, size_t size) {
    if (!ptr) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    if (size == 0) { *ptr = NULL; return cudaSuccess; }
    int dev = gs_thread()->device;
    gs_call c;
    gs_call_begin(&c, GS_OP_MALLOC, 2);
    gs_w_int(c.w, dev);
    gs_w_uint(c.w, size);
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        *ptr = (void *)(uintptr_t)gs_u64(&c);
        gs_ranges_add((gs_range){(uintptr_t)*ptr, size, dev, cudaMemoryTypeDevice, 0, 0, 0, 0});
    }
    gs_call_end(&c);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height) {
    if (!ptr || !pitch) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    int dev = gs_thread()->device;
    gs_call c;
    gs_call_begin(&c, GS_OP_MALLOC_PITCH, 3);
    gs_w_int(c.w, dev);
    gs_w_uint(c.w, width);
    gs_w_uint(c.w, height);
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        *ptr = (void *)(uintptr_t)gs_u64(&c);
        *pitch = gs_u64(&c);
        if (*ptr) gs_ranges_add((gs_range){(uintptr_t)*ptr, *pitch * height, dev, cudaMemoryTypeDevice, 0, 0, 0, 0});
    }
    gs_call_end(&c);
    return gs_ret(e);
}

int gs_array_layout(const void *a, void **base, size_t *pitch, size_t *rows, size_t *elem); /* api_texture.c */

GS_IMPL cudaError_t gs_cudaFree(void *ptr) {
    GS_ENTER();
    if (!ptr) return cudaSuccess;
    void *ab;
    size_t ap, ar, ae;
    if (gs_array_layout(ptr, &ab, &ap, &ar, &ae)) return gs_ret(cudaErrorInvalidValue); /* cudaFreeArray's */
    gs_call c;
    gs_call_begin(&c, GS_OP_FREE, 1);
    gs_w_uint(c.w, (uintptr_t)ptr);
    cudaError_t e = gs_call_run(&c);
    gs_call_end(&c);
    gs_range r;
    if (!e && gs_ranges_remove((uintptr_t)ptr, cudaMemoryTypeManaged, &r)) gs_unmap_managed(&r);
    else if (!e) gs_ranges_remove((uintptr_t)ptr, cudaMemoryTypeDevice, NULL);
    if (!e) gs_pool_forget(ptr); /* stream-ordered memory may be freed by cudaFree too */
    return gs_ret(e);
}

/* Pinned host memory lives in a memfd shared with the server's worker when both are on one host: copies
 * to and from it cross no socket, and the server reads and writes it in place (GPUSHIM_SHM=0 turns this
 * off). Over TCP it is plain page-aligned memory. Either way it is recorded so copies and
 * cudaPointerGetAttributes know it. */
static uint64_t share_with_server(void *p, int fd, size_t size) {
    static _Atomic uint64_t next_id = 1;
    uint64_t id = atomic_fetch_add(&next_id, 1);
    gs_call c;
    gs_call_begin(&c, GS_OP_HOST_MAP, 2);
    gs_w_uint(c.w, id);
    gs_w_uint(c.w, size);
    c.pass_fd = fd;
    cudaError_t e = gs_call_run(&c);
    gs_call_end(&c);
    (void)p;
    return e ? 0 : id;
}

static int shm_wanted(void) {
    const char *e = getenv("GPUSHIM_SHM");
    return gs_transport_is_unix() && !(e && strcmp(e, "0") == 0);
}

#define HOST_ALLOC_MAPPED 2u /* cudaHostAllocMapped */
#define ARENA_BACKED GS_ARENA_BACKED /* gs_range.owned of mapped pinned memory in the emulator's memory */

/* Mapped pinned memory with the client on the server's host: device memory of the emulator, mapped at its own
 * address in this process as managed memory is (api_managed.c), so the host pointer is the device pointer, as
 * under CUDA's unified addressing, and kernels read and write the very bytes the host does. Whole pages, so no
 * device allocation's reservation shares one. NULL when that cannot be done (*why says why). */
static void *arena_host_alloc(size_t size, const char **why) {
    cudaError_t e;
    const char *reason;
    void *m = gs_map_device_memory(gs_thread()->device, page_round(size), &e, &reason);
    if (!m) *why = reason ? "the server's memory cannot be mapped into this process"
                          : "the server refused device memory for it";
    return m;
}

static cudaError_t host_alloc(void **ptr, size_t size, unsigned flags) {
    if (!ptr) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    if (size == 0) { *ptr = NULL; return cudaSuccess; }
    if (flags & HOST_ALLOC_MAPPED) {
        const char *why = "the client is not on the server's host (TCP)";
        void *m = gs_transport_is_unix() ? arena_host_alloc(size, &why) : NULL;
        if (m) {
            gs_ranges_add((gs_range){(uintptr_t)m, size, gs_thread()->device, cudaMemoryTypeHost, flags, ARENA_BACKED,
                                     0, 0});
            *ptr = m;
            return cudaSuccess;
        }
        gs_warn_once("mapped", "cudaHostAllocMapped: %s; the memory is pinned but kernels cannot reach it", why);
    }
    void *p = MAP_FAILED;
    uint64_t shm = 0;
    if (shm_wanted()) {
        int fd = memfd_create("gpushim-pinned", MFD_CLOEXEC);
        if (fd >= 0 && ftruncate(fd, (off_t)size) == 0) {
            p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p != MAP_FAILED && !(shm = share_with_server(p, fd, size))) {
                munmap(p, size);
                p = MAP_FAILED;
            }
        }
        if (fd >= 0) close(fd);
    }
    if (p == MAP_FAILED) p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { *ptr = NULL; return gs_ret(cudaErrorMemoryAllocation); }
    gs_ranges_add((gs_range){(uintptr_t)p, size, gs_thread()->device, cudaMemoryTypeHost, flags, 1, shm, 0});
    *ptr = p;
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaMallocHost(void **ptr, size_t size) { return host_alloc(ptr, size, 0); }
GS_IMPL cudaError_t gs_cudaHostAlloc(void **ptr, size_t size, unsigned flags) {
    if (flags & ~0x0fu) return gs_ret(cudaErrorInvalidValue);
    return host_alloc(ptr, size, flags);
}

GS_IMPL cudaError_t gs_cudaFreeHost(void *ptr) {
    GS_ENTER();
    if (!ptr) return cudaSuccess;
    gs_range r;
    if (!gs_ranges_find((uintptr_t)ptr, &r) || r.kind != cudaMemoryTypeHost || !r.owned ||
        r.owned == GS_REGISTERED_ALIAS || r.base != (uintptr_t)ptr)
        return gs_ret(cudaErrorInvalidValue);
    gs_ranges_remove(r.base, cudaMemoryTypeHost, NULL);
    if (r.owned == ARENA_BACKED) {
        /* device memory: cudaFree's rules (the server waits for the device before freeing it) */
        free_on_server(r.base);
        munmap(ptr, page_round(r.size));
        return cudaSuccess;
    }
    if (r.shm) {
        /* Like cudaFreeHost, wait for the device first: queued copies may still use the memory. */
        gs_call c;
        gs_call_begin(&c, GS_OP_DEVICE_SYNC, 1);
        gs_w_int(c.w, r.device);
        gs_call_run(&c);
        gs_call_end(&c);
        gs_call_begin(&c, GS_OP_HOST_UNMAP, 1);
        gs_w_uint(c.w, r.shm);
        gs_call_post(&c);
    }
    munmap(ptr, r.size);
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaHostGetFlags(unsigned *flags, void *hptr) {
    if (!flags) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_range r;
    if (!gs_ranges_find((uintptr_t)hptr, &r) || r.kind != cudaMemoryTypeHost) return gs_ret(cudaErrorInvalidValue);
    *flags = r.flags;
    return cudaSuccess;
}

/* ---- copies ---- */

static int is_device(const void *p) {
    gs_range r;
    return gs_ranges_find((uintptr_t)p, &r) && (r.kind == cudaMemoryTypeDevice || r.kind == cudaMemoryTypeManaged);
}

/* Resolves cudaMemcpyDefault by looking the pointers up (unified addressing). */
static int resolve_kind(int kind, const void *dst, const void *src) {
    if (kind != cudaMemcpyDefault) return kind;
    int d = is_device(dst), s = is_device(src);
    return d ? (s ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
             : (s ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
}

/* ---- the fire-and-forget rules (docs/semantics.md, "What may be posted") ----
 * A copy or memset is sent without waiting for a reply only where nothing the application can observe when
 * the call returns depends on its completion. A synchronous call that CUDA completes (or orders) before it
 * returns is posted work plus one STREAM_SYNC call on the same stream: a single round trip, since queued
 * frames leave with the next call that waits, and the server runs frames in order. */

cudaError_t gs_stream_sync(uint64_t stream) {
    gs_call c;
    gs_call_begin(&c, GS_OP_STREAM_SYNC, 1);
    gs_w_uint(c.w, stream);
    cudaError_t e = gs_call_run(&c);
    gs_call_end(&c);
    return e;
}

static int range_kind(const void *p) {
    gs_range r;
    return gs_ranges_find((uintptr_t)p, &r) ? r.kind : -1;
}

/* Host memory known to the shim (pinned, registered, managed): memory that stream work may write while the
 * application looks at it, unlike pageable memory, which only synchronous calls touch. */
static int host_visible(const void *p) {
    int k = range_kind(p);
    return k == cudaMemoryTypeHost || k == cudaMemoryTypeManaged;
}

/* The host side of a copy must not be device memory (the pages are inaccessible here): CUDA calls such a
 * copy undefined; gpushim refuses it. */
static cudaError_t check_direction(int kind, const void *dst, const void *src) {
    int hsrc = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost;
    int hdst = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost;
    if ((hsrc && range_kind(src) == cudaMemoryTypeDevice) || (hdst && range_kind(dst) == cudaMemoryTypeDevice))
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

/* The bytes a pitched region of height rows spans, or 0 when that overflows (no allocation is so large). */
static size_t span2d(size_t pitch, size_t width, size_t height) {
    size_t r;
    if (__builtin_mul_overflow(pitch, height - 1, &r) || __builtin_add_overflow(r, width, &r)) return 0;
    return r;
}

/* Host to device from pageable memory: the data leaves the caller's buffer before the call returns (large
 * chunks are written straight from it). The destination is checked here, so the errors CUDA reports at once
 * are still reported at once. */
static cudaError_t h2d(uintptr_t dst, const void *src, size_t n, uint64_t stream) {
    cudaError_t e = gs_check_device_range((const void *)dst, n);
    for (size_t off = 0; !e && off < n;) {
        size_t chunk = n - off < GS_BULK_CHUNK ? n - off : GS_BULK_CHUNK;
        gs_call c;
        gs_call_begin(&c, GS_OP_MEMCPY_H2D, 3);
        gs_w_uint(c.w, dst + off);
        gs_w_uint(c.w, stream);
        c.bulk = (const char *)src + off;
        c.bulk_len = chunk;
        e = gs_call_post(&c);
        off += chunk;
    }
    return e;
}

/* Device to host over the socket: up to D2H_WINDOW chunk requests are in flight, so the server streams
 * the next chunk while the client copies the previous one out (what keeps TCP busy across hosts). */
#define D2H_WINDOW 4
static cudaError_t d2h(void *dst, uintptr_t src, size_t n, uint64_t stream) {
    cudaError_t e = gs_check_device_range((const void *)src, n);
    if (e) return e;
    gs_call calls[D2H_WINDOW];
    gs_wbuf args[D2H_WINDOW];
    size_t offs[D2H_WINDOW];
    size_t nchunks = (n + GS_BULK_CHUNK - 1) / GS_BULK_CHUNK, sent = 0, done = 0;
    for (int i = 0; i < D2H_WINDOW; i++) gs_w_init(&args[i]);
    while (done < nchunks) {
        while (!e && sent < nchunks && sent - done < D2H_WINDOW) {
            int k = (int)(sent % D2H_WINDOW);
            size_t off = sent * (size_t)GS_BULK_CHUNK, chunk = n - off < GS_BULK_CHUNK ? n - off : GS_BULK_CHUNK;
            gs_call_begin(&calls[k], GS_OP_MEMCPY_D2H, 3);
            gs_w_reset(&args[k]);
            calls[k].w = &args[k];
            gs_w_array(calls[k].w, 3);
            gs_w_uint(calls[k].w, src + off);
            gs_w_uint(calls[k].w, chunk);
            gs_w_uint(calls[k].w, stream);
            offs[k] = off;
            e = gs_call_send(&calls[k]);
            if (!e) sent++;
        }
        if (done == sent) break; /* a send failed and nothing is in flight */
        int k = (int)(done % D2H_WINDOW);
        size_t chunk = n - offs[k] < GS_BULK_CHUNK ? n - offs[k] : GS_BULK_CHUNK;
        cudaError_t we = gs_call_wait(&calls[k]);
        if (!we) {
            const uint8_t *p;
            uint32_t got;
            if (!gs_r_bin(&calls[k].r, &p, &got) || got != chunk) we = cudaErrorUnknown;
            else memcpy((char *)dst + offs[k], p, chunk);
        }
        if (we && !e) e = we;
        gs_call_end(&calls[k]);
        done++;
    }
    for (int i = 0; i < D2H_WINDOW; i++) gs_w_free(&args[i]);
    return e;
}

/* ---- the staging ring: pageable copies on one host ----
 * Two 8 MiB slots of a memfd shared with the server. Host to device: the client fills one slot while the
 * server takes the other (its reply frees the slot). Device to host: the server fills one slot while the
 * client empties the other. One thread stages at a time; others use the socket meanwhile. */
#define STAGE_SLOT (8u << 20)
#define STAGE_MIN (256u << 10) /* below this one inline frame is cheaper */

static pthread_mutex_t stage_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *stage;
static uint64_t stage_shm;
static int stage_state; /* 0 not tried, 1 ready, -1 unavailable */

static int stage_acquire(size_t n) {
    if (n < STAGE_MIN || !shm_wanted() || pthread_mutex_trylock(&stage_lock) != 0) return 0;
    if (stage_state == 0) {
        stage_state = -1;
        int fd = memfd_create("gpushim-staging", MFD_CLOEXEC);
        if (fd >= 0 && ftruncate(fd, 2 * STAGE_SLOT) == 0) {
            void *p = mmap(NULL, 2 * STAGE_SLOT, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p != MAP_FAILED && (stage_shm = share_with_server(p, fd, 2 * STAGE_SLOT))) {
                stage = p;
                stage_state = 1;
            } else if (p != MAP_FAILED) {
                munmap(p, 2 * STAGE_SLOT);
            }
        }
        if (fd >= 0) close(fd);
    }
    if (stage_state == 1) return 1;
    pthread_mutex_unlock(&stage_lock);
    return 0;
}

static void stage_call(gs_call *c, gs_wbuf *args, int op, uintptr_t dev, uint64_t stream, int slot, size_t n) {
    gs_call_begin(c, op, 5);
    gs_w_reset(args);
    c->w = args;
    gs_w_array(args, 5);
    gs_w_uint(args, dev);
    gs_w_uint(args, stream);
    gs_w_uint(args, stage_shm);
    gs_w_uint(args, (uint64_t)slot * STAGE_SLOT);
    gs_w_uint(args, n);
}

static cudaError_t staged_h2d(uintptr_t dst, const void *src, size_t n, uint64_t stream) {
    cudaError_t e = gs_check_device_range((const void *)dst, n);
    gs_call calls[2];
    gs_wbuf args[2];
    int inflight[2] = {0, 0};
    gs_w_init(&args[0]);
    gs_w_init(&args[1]);
    for (size_t off = 0, i = 0; !e && off < n; i++) {
        int k = (int)(i & 1);
        if (inflight[k]) {
            e = gs_call_wait(&calls[k]);
            gs_call_end(&calls[k]);
            inflight[k] = 0;
            if (e) break;
        }
        size_t chunk = n - off < STAGE_SLOT ? n - off : STAGE_SLOT;
        memcpy(stage + (size_t)k * STAGE_SLOT, (const char *)src + off, chunk);
        stage_call(&calls[k], &args[k], GS_OP_MEMCPY_H2D_STAGED, dst + off, stream, k, chunk);
        e = gs_call_send(&calls[k]);
        inflight[k] = !e;
        off += chunk;
    }
    for (int k = 0; k < 2; k++) {
        if (!inflight[k]) continue;
        cudaError_t we = gs_call_wait(&calls[k]);
        gs_call_end(&calls[k]);
        if (we && !e) e = we;
    }
    gs_w_free(&args[0]);
    gs_w_free(&args[1]);
    return e;
}

static cudaError_t staged_d2h(void *dst, uintptr_t src, size_t n, uint64_t stream) {
    cudaError_t e = gs_check_device_range((const void *)src, n);
    if (e) return e;
    gs_call calls[2];
    gs_wbuf args[2];
    gs_w_init(&args[0]);
    gs_w_init(&args[1]);
    size_t nchunks = (n + STAGE_SLOT - 1) / STAGE_SLOT, sent = 0, done = 0;
    while (done < nchunks) {
        while (!e && sent < nchunks && sent - done < 2) {
            size_t off = sent * (size_t)STAGE_SLOT;
            stage_call(&calls[sent & 1], &args[sent & 1], GS_OP_MEMCPY_D2H_SHM, src + off, stream, (int)(sent & 1),
                       n - off < STAGE_SLOT ? n - off : STAGE_SLOT);
            e = gs_call_send(&calls[sent & 1]);
            if (!e) sent++;
        }
        if (done == sent) break;
        int k = (int)(done & 1);
        size_t off = done * (size_t)STAGE_SLOT;
        cudaError_t we = gs_call_wait(&calls[k]);
        gs_call_end(&calls[k]);
        if (!we) memcpy((char *)dst + off, stage + (size_t)k * STAGE_SLOT, n - off < STAGE_SLOT ? n - off : STAGE_SLOT);
        if (we && !e) e = we;
        done++;
    }
    gs_w_free(&args[0]);
    gs_w_free(&args[1]);
    return e;
}

/* A forked child starts a session of its own: its parent's staging ring is not registered there. */
static void stage_after_fork(void) {
    pthread_mutex_init(&stage_lock, NULL);
    stage_state = 0;
    stage = NULL;
}

__attribute__((constructor)) static void stage_init(void) { pthread_atfork(NULL, NULL, stage_after_fork); }

/* True when [p, p+n) lies in pinned memory shared with the server. */
static int shared_host(const void *p, size_t n, gs_range *r) {
    return gs_ranges_find((uintptr_t)p, r) && r->kind == cudaMemoryTypeHost && r->shm &&
           (uintptr_t)p + n <= r->base + r->size;
}

/* A copy between device memory and shared pinned memory: only the offsets cross the socket. The server
 * reads or writes the memory when the stream reaches the copy, as a GPU's DMA engine would. async: posted;
 * else the call waits for the copy (host to device callers post, then synchronise the stream). */
static cudaError_t shm_copy(int op, uintptr_t dev_ptr, const gs_range *r, const void *host, size_t n,
                            uint64_t stream, int async) {
    cudaError_t e = gs_check_device_range((const void *)dev_ptr, n);
    if (e) return e;
    gs_call c;
    gs_call_begin(&c, op, 5);
    gs_w_uint(c.w, dev_ptr);
    gs_w_uint(c.w, stream);
    gs_w_uint(c.w, r->shm);
    gs_w_uint(c.w, (uintptr_t)host - r->base);
    gs_w_uint(c.w, n);
    if (async) return gs_call_post(&c);
    e = gs_call_run(&c);
    gs_call_end(&c);
    return e;
}

cudaError_t gs_memcpy(void *dst, const void *src, size_t n, int kind, cudaStream_t s, int ptds, int async) {
    if (n == 0) return cudaSuccess;
    if (!dst || !src) return gs_ret(cudaErrorInvalidValue);
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return gs_ret(cudaErrorInvalidMemcpyDirection);
    GS_ENTER();
    uint64_t stream;
    cudaError_t e = gs_stream_handle(s, ptds, &stream);
    if (e) return gs_ret(e);
    gs_range hr;
    kind = resolve_kind(kind, dst, src);
    e = check_direction(kind, dst, src);
    if (e) return gs_ret(e);
    if (gs_capture_copy(stream, dst, src, n, kind, async, &e)) return gs_ret(e);
    switch (kind) {
    case cudaMemcpyHostToHost:
        /* CUDA leaves the stream ordering of host-to-host copies open; the safe choice: when either side is
         * memory stream work may write (pinned, registered, managed), that work completes first. */
        if (host_visible(dst) || host_visible(src)) {
            e = gs_stream_sync(stream);
            if (e) return gs_ret(e);
        }
        memmove(dst, src, n);
        return cudaSuccess;
    case cudaMemcpyHostToDevice:
        if (shared_host(src, n, &hr)) {
            /* pinned: the worker copies from the shared mapping in stream order; a synchronous copy waits */
            e = shm_copy(GS_OP_MEMCPY_H2D_SHM, (uintptr_t)dst, &hr, src, n, stream, 1);
            if (!e && !async) e = gs_stream_sync(stream);
            return gs_ret(e);
        }
        /* pageable (or registered): "a stream sync is performed before the copy is initiated" (APISYNC), so
         * earlier work that writes the source (a host function, a kernel into managed memory) is done. Only
         * those can write it: without any, synchronising after the copy is the same to the application and
         * costs one round trip instead of two. */
        int sync_before = !async && (gs_callbacks_outstanding() || range_kind(src) == cudaMemoryTypeManaged);
        if (sync_before) {
            e = gs_stream_sync(stream);
            if (e) return gs_ret(e);
        }
        if (stage_acquire(n)) {
            e = staged_h2d((uintptr_t)dst, src, n, stream);
            pthread_mutex_unlock(&stage_lock);
        } else {
            e = h2d((uintptr_t)dst, src, n, stream);
        }
        /* otherwise the copy completes before the call returns (and managed memory, which the host reads
         * directly, always holds the data then) */
        if (!e && !async && (!sync_before || range_kind(dst) == cudaMemoryTypeManaged)) e = gs_stream_sync(stream);
        return gs_ret(e);
    case cudaMemcpyDeviceToHost:
        /* waits for the copy (queued in stream order) unless asynchronous into pinned memory */
        if (shared_host(dst, n, &hr)) return gs_ret(shm_copy(GS_OP_MEMCPY_D2H_SHM, (uintptr_t)src, &hr, dst, n, stream, async));
        if (stage_acquire(n)) {
            e = staged_d2h(dst, (uintptr_t)src, n, stream);
            pthread_mutex_unlock(&stage_lock);
            return gs_ret(e);
        }
        return gs_ret(d2h(dst, (uintptr_t)src, n, stream));
    default: {
        e = gs_check_device_range(dst, n);
        if (!e) e = gs_check_device_range(src, n);
        if (e) return gs_ret(e);
        gs_call c;
        gs_call_begin(&c, GS_OP_MEMCPY_D2D, 4);
        gs_w_uint(c.w, (uintptr_t)dst);
        gs_w_uint(c.w, (uintptr_t)src);
        gs_w_uint(c.w, n);
        gs_w_uint(c.w, stream);
        e = gs_call_post(&c); /* APISYNC: device to device, "no host-side synchronization is performed" */
        /* ... except that the host reads managed memory directly: the safe choice is to complete first */
        if (!e && !async && range_kind(dst) == cudaMemoryTypeManaged) e = gs_stream_sync(stream);
        return gs_ret(e);
    }
    }
}

GS_IMPL cudaError_t gs_cudaMemcpy(void *d, const void *s, size_t n, int kind) {
    return gs_memcpy(d, s, n, kind, NULL, 0, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpy_ptds(void *d, const void *s, size_t n, int kind) {
    return gs_memcpy(d, s, n, kind, NULL, 1, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpyAsync(void *d, const void *s, size_t n, int kind, cudaStream_t st) {
    return gs_memcpy(d, s, n, kind, st, 0, 1);
}
GS_IMPL cudaError_t gs_cudaMemcpyAsync_ptsz(void *d, const void *s, size_t n, int kind, cudaStream_t st) {
    return gs_memcpy(d, s, n, kind, st, 1, 1);
}

/* 2D copies move packed rows on the wire: at most one chunk of rows per frame. Synchronisation as in
 * gs_memcpy: a synchronous host-to-device copy synchronises its stream first; device to host waits for the
 * copy, queued in stream order. */
static cudaError_t memcpy2d_any(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                size_t height, int kind, cudaStream_t s, int ptds, int async) {
    if (width == 0 || height == 0) return cudaSuccess;
    if (!dst || !src) return gs_ret(cudaErrorInvalidValue);
    if (width > dpitch || width > spitch) return gs_ret(cudaErrorInvalidPitchValue);
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return gs_ret(cudaErrorInvalidMemcpyDirection);
    size_t dspan = span2d(dpitch, width, height), sspan = span2d(spitch, width, height);
    if (!dspan || !sspan) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    uint64_t stream;
    cudaError_t e = gs_stream_handle(s, ptds, &stream);
    if (e) return gs_ret(e);
    kind = resolve_kind(kind, dst, src);
    e = check_direction(kind, dst, src);
    if (e) return gs_ret(e);
    if (gs_capture_copy2d(stream, dst, dpitch, src, spitch, width, height, kind, &e)) return gs_ret(e);
    if (kind == cudaMemcpyHostToHost) {
        if (host_visible(dst) || host_visible(src)) {
            e = gs_stream_sync(stream);
            if (e) return gs_ret(e);
        }
        for (size_t y = 0; y < height; y++) memmove((char *)dst + y * dpitch, (const char *)src + y * spitch, width);
        return cudaSuccess;
    }
    int managed_dst = !async && range_kind(dst) == cudaMemoryTypeManaged;
    if (kind == cudaMemcpyDeviceToDevice) {
        e = gs_check_device_range(dst, dspan);
        if (!e) e = gs_check_device_range(src, sspan);
        if (e) return gs_ret(e);
        gs_call c;
        gs_call_begin(&c, GS_OP_MEMCPY2D_D2D, 7);
        gs_w_uint(c.w, (uintptr_t)dst);
        gs_w_uint(c.w, dpitch);
        gs_w_uint(c.w, (uintptr_t)src);
        gs_w_uint(c.w, spitch);
        gs_w_uint(c.w, width);
        gs_w_uint(c.w, height);
        gs_w_uint(c.w, stream);
        e = gs_call_post(&c);
        if (!e && managed_dst) e = gs_stream_sync(stream);
        return gs_ret(e);
    }
    e = kind == cudaMemcpyHostToDevice ? gs_check_device_range(dst, dspan) : gs_check_device_range(src, sspan);
    if (!e && kind == cudaMemcpyHostToDevice && !async) e = gs_stream_sync(stream);
    if (e) return gs_ret(e);
    size_t rows_per = GS_BULK_CHUNK / width ? GS_BULK_CHUNK / width : 1;
    char *packed = NULL;
    if ((kind == cudaMemcpyHostToDevice && spitch != width) || kind == cudaMemcpyDeviceToHost) {
        packed = malloc(width * (rows_per < height ? rows_per : height));
        if (!packed) return gs_ret(cudaErrorMemoryAllocation);
    }
    for (size_t y0 = 0; y0 < height && !e; y0 += rows_per) {
        size_t rows = height - y0 < rows_per ? height - y0 : rows_per;
        gs_call c;
        if (kind == cudaMemcpyHostToDevice) {
            const char *rowsrc = (const char *)src + y0 * spitch;
            if (packed)
                for (size_t y = 0; y < rows; y++) memcpy(packed + y * width, rowsrc + y * spitch, width);
            gs_call_begin(&c, GS_OP_MEMCPY2D_H2D, 6);
            gs_w_uint(c.w, (uintptr_t)dst + y0 * dpitch);
            gs_w_uint(c.w, dpitch);
            gs_w_uint(c.w, width);
            gs_w_uint(c.w, rows);
            gs_w_uint(c.w, stream);
            c.bulk = packed ? packed : rowsrc;
            c.bulk_len = width * rows;
            e = gs_call_post(&c);
        } else {
            gs_call_begin(&c, GS_OP_MEMCPY2D_D2H, 5);
            gs_w_uint(c.w, (uintptr_t)src + y0 * spitch);
            gs_w_uint(c.w, spitch);
            gs_w_uint(c.w, width);
            gs_w_uint(c.w, rows);
            gs_w_uint(c.w, stream);
            e = gs_call_run(&c);
            const uint8_t *p;
            uint32_t got;
            if (!e && (!gs_r_bin(&c.r, &p, &got) || got != width * rows)) e = cudaErrorUnknown;
            for (size_t y = 0; !e && y < rows; y++) memcpy((char *)dst + (y0 + y) * dpitch, p + y * width, width);
        }
        gs_call_end(&c);
    }
    free(packed);
    if (!e && managed_dst && kind == cudaMemcpyHostToDevice) e = gs_stream_sync(stream);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaMemcpy2D(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, int k) {
    return memcpy2d_any(d, dp, s, sp, w, h, k, NULL, 0, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpy2D_ptds(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, int k) {
    return memcpy2d_any(d, dp, s, sp, w, h, k, NULL, 1, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, int k,
                                         cudaStream_t st) {
    return memcpy2d_any(d, dp, s, sp, w, h, k, st, 0, 1);
}
GS_IMPL cudaError_t gs_cudaMemcpy2DAsync_ptsz(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,
                                              int k, cudaStream_t st) {
    return memcpy2d_any(d, dp, s, sp, w, h, k, st, 1, 1);
}

/* ---- memset ----
 * On device memory memsets are asynchronous with respect to the host (posted). APISYNC: "except when the
 * target is pinned host memory or a Unified Memory region, in which case they are fully synchronous": on
 * pinned (or registered) host memory the shim fills the bytes itself once the stream's earlier work has
 * completed; on managed memory it posts the memset and synchronises the stream. The asynchronous forms
 * ("always asynchronous") on pinned host memory queue a host function that fills the bytes in the client
 * when the stream reaches it. */

/* Host memory known to the shim that holds [p, p + span): pinned or registered. */
static int pinned_target(const void *p, size_t span) {
    gs_range r;
    return gs_ranges_find((uintptr_t)p, &r) && r.kind == cudaMemoryTypeHost && span <= r.base + r.size - (uintptr_t)p;
}

typedef struct {
    char *dst;
    size_t pitch, w, h;
    int value;
} host_fill;

static void fill_rows(const host_fill *f) {
    for (size_t y = 0; y < f->h; y++) memset(f->dst + y * f->pitch, f->value, f->w);
}

static void queued_fill(void *p) { /* a host function: runs in the client when its stream reaches it */
    fill_rows(p);
    free(p);
}

static cudaError_t memset_host(uint64_t stream, cudaStream_t s, int async, void *dst, size_t pitch, int value,
                               size_t w, size_t h) {
    if (gs_capture_status(stream)) return cudaErrorStreamCaptureUnsupported;
    host_fill f = {dst, pitch, w, h, value};
    if (!async) {
        cudaError_t e = gs_stream_sync(stream);
        if (!e) fill_rows(&f);
        return e;
    }
    host_fill *q = malloc(sizeof *q);
    if (!q) return cudaErrorMemoryAllocation;
    *q = f;
    uint64_t id = gs_callback_register(0, (void *)queued_fill, q, s);
    if (!id) { free(q); return cudaErrorMemoryAllocation; }
    gs_call c;
    gs_call_begin(&c, GS_OP_STREAM_HOST_FUNC, 2);
    gs_w_uint(c.w, stream);
    gs_w_uint(c.w, id);
    return gs_call_post(&c);
}

static cudaError_t memset_any(void *dst, int value, size_t n, cudaStream_t s, int ptds, int async) {
    GS_ENTER();
    if (n == 0) return cudaSuccess;
    uint64_t stream;
    cudaError_t e = gs_stream_handle(s, ptds, &stream);
    if (e) return gs_ret(e);
    if (pinned_target(dst, n)) return gs_ret(memset_host(stream, s, async, dst, n, value, n, 1));
    e = gs_check_device_range(dst, n);
    if (e) return gs_ret(e);
    gs_call c;
    gs_call_begin(&c, GS_OP_MEMSET, 4);
    gs_w_uint(c.w, (uintptr_t)dst);
    gs_w_int(c.w, value);
    gs_w_uint(c.w, n);
    gs_w_uint(c.w, stream);
    if (gs_capture_record(stream, &c, &e)) return gs_ret(e);
    e = gs_call_post(&c);
    if (!e && !async && range_kind(dst) == cudaMemoryTypeManaged) e = gs_stream_sync(stream);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaMemset(void *d, int v, size_t n) { return memset_any(d, v, n, NULL, 0, 0); }
GS_IMPL cudaError_t gs_cudaMemset_ptds(void *d, int v, size_t n) { return memset_any(d, v, n, NULL, 1, 0); }
GS_IMPL cudaError_t gs_cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t s) { return memset_any(d, v, n, s, 0, 1); }
GS_IMPL cudaError_t gs_cudaMemsetAsync_ptsz(void *d, int v, size_t n, cudaStream_t s) {
    return memset_any(d, v, n, s, 1, 1);
}

static cudaError_t memset2d_any(void *dst, size_t pitch, int value, size_t w, size_t h, cudaStream_t s, int ptds,
                                int async) {
    GS_ENTER();
    if (w == 0 || h == 0) return cudaSuccess;
    if (w > pitch) return gs_ret(cudaErrorInvalidValue);
    size_t span = span2d(pitch, w, h);
    if (!span) return gs_ret(cudaErrorInvalidValue); /* the arithmetic wraps: no allocation spans that */
    uint64_t stream;
    cudaError_t e = gs_stream_handle(s, ptds, &stream);
    if (e) return gs_ret(e);
    if (pinned_target(dst, span)) return gs_ret(memset_host(stream, s, async, dst, pitch, value, w, h));
    e = gs_check_device_range(dst, span);
    if (e) return gs_ret(e);
    gs_call c;
    gs_call_begin(&c, GS_OP_MEMSET2D, 6);
    gs_w_uint(c.w, (uintptr_t)dst);
    gs_w_uint(c.w, pitch);
    gs_w_int(c.w, value);
    gs_w_uint(c.w, w);
    gs_w_uint(c.w, h);
    gs_w_uint(c.w, stream);
    if (gs_capture_record(stream, &c, &e)) return gs_ret(e);
    e = gs_call_post(&c);
    if (!e && !async && range_kind(dst) == cudaMemoryTypeManaged) e = gs_stream_sync(stream);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaMemset2D(void *d, size_t p, int v, size_t w, size_t h) {
    return memset2d_any(d, p, v, w, h, NULL, 0, 0);
}
GS_IMPL cudaError_t gs_cudaMemset2D_ptds(void *d, size_t p, int v, size_t w, size_t h) {
    return memset2d_any(d, p, v, w, h, NULL, 1, 0);
}
GS_IMPL cudaError_t gs_cudaMemset2DAsync(void *d, size_t p, int v, size_t w, size_t h, cudaStream_t s) {
    return memset2d_any(d, p, v, w, h, s, 0, 1);
}
GS_IMPL cudaError_t gs_cudaMemset2DAsync_ptsz(void *d, size_t p, int v, size_t w, size_t h, cudaStream_t s) {
    return memset2d_any(d, p, v, w, h, s, 1, 1);
}

/* ---- pointer attributes ---- */

static cudaError_t pointer_attributes(void *attr, const void *ptr, int major) {
    if (!attr) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    const gs_layout *l = gs_layout_for("cudaPointerAttributes", major);
    if (!l) return gs_ret(cudaErrorNotSupported);
    memset(attr, 0, l->size);
    gs_range r;
    if (gs_ranges_find((uintptr_t)ptr, &r)) {
        gs_set_field(attr, l, "type", (uint64_t)r.kind);
        gs_set_field(attr, l, "device", (uint64_t)(int64_t)r.device);
        gs_set_field(attr, l, "devicePointer", (uintptr_t)ptr);
        gs_set_field(attr, l, "hostPointer", r.kind != cudaMemoryTypeDevice ? (uintptr_t)ptr : 0);
        return cudaSuccess;
    }
    /* Not the client's: the server may still know it (e.g. a module variable's address). */
    gs_call c;
    gs_call_begin(&c, GS_OP_POINTER_INFO, 1);
    gs_w_uint(c.w, (uintptr_t)ptr);
    cudaError_t e = gs_call_run(&c);
    int64_t kind = 0, dev = -2;
    if (!e) { kind = gs_i64(&c); dev = gs_i64(&c); }
    gs_call_end(&c);
    if (e) return gs_ret(e);
    if (kind == cudaMemoryTypeDevice) {
        gs_set_field(attr, l, "type", cudaMemoryTypeDevice);
        gs_set_field(attr, l, "device", (uint64_t)dev);
        gs_set_field(attr, l, "devicePointer", (uintptr_t)ptr);
    } else {
        /* CUDA 11+: plain host memory is reported as unregistered, successfully, with device -2. */
        gs_set_field(attr, l, "type", cudaMemoryTypeUnregistered);
        gs_set_field(attr, l, "device", (uint64_t)(int64_t)-2);
    }
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaPointerGetAttributes__11(void *a, const void *p) { return pointer_attributes(a, p, 11); }
GS_IMPL cudaError_t gs_cudaPointerGetAttributes__12(void *a, const void *p) { return pointer_attributes(a, p, 12); }
GS_IMPL cudaError_t gs_cudaPointerGetAttributes__13(void *a, const void *p) { return pointer_attributes(a, p, 13); }

/* ---- 3D: pitched memory and CUDA arrays (api_texture.c); one 2D copy or memset per slice ---- */

typedef struct { void *ptr; size_t pitch, xsize, ysize; } pitched_ptr;
typedef struct { size_t width, height, depth; } extent3d;
typedef struct { size_t x, y, z; } pos3d;
typedef struct { /* cudaMemcpy3DParms: 160 bytes in every version */
    void *src_array;
    pos3d src_pos;
    pitched_ptr src;
    void *dst_array;
    pos3d dst_pos;
    pitched_ptr dst;
    extent3d extent;
    int kind;
} memcpy3d_parms;

GS_IMPL cudaError_t gs_cudaMalloc3D(pitched_ptr *p, extent3d e) {
    if (!p) return gs_ret(cudaErrorInvalidValue);
    size_t pitch = 0;
    void *ptr = NULL;
    cudaError_t e2 = gs_cudaMallocPitch(&ptr, &pitch, e.width, e.height * e.depth);
    if (!e2) *p = (pitched_ptr){ptr, pitch, e.width, e.height};
    return e2;
}

static char *slice_addr(const pitched_ptr *p, pos3d pos, size_t z) {
    return (char *)p->ptr + (pos.z + z) * p->pitch * p->ysize + pos.y * p->pitch + pos.x;
}

/* A CUDA array side of a 3D copy as pitched memory; positions and the extent's width count its elements. */
static int array_side(void *arr, pitched_ptr *p, pos3d *pos, size_t *elem) {
    size_t rows;
    if (!gs_array_layout(arr, &p->ptr, &p->pitch, &rows, elem)) return 0;
    p->xsize = p->pitch;
    p->ysize = rows;
    pos->x *= *elem;
    return 1;
}

static cudaError_t memcpy3d(const memcpy3d_parms *m, cudaStream_t s, int ptds, int async) {
    if (!m) return gs_ret(cudaErrorInvalidValue);
    memcpy3d_parms c = *m;
    size_t elem = 1;
    if (m->src_array && !array_side(m->src_array, &c.src, &c.src_pos, &elem)) return gs_ret(cudaErrorInvalidValue);
    if (m->dst_array && !array_side(m->dst_array, &c.dst, &c.dst_pos, &elem)) return gs_ret(cudaErrorInvalidValue);
    if (m->src_array || m->dst_array) {
        /* CUDA: the extent is in elements of the array when one is given (a zero height or depth is 1) */
        c.extent.width *= elem;
        if (!c.extent.height) c.extent.height = 1;
        if (!c.extent.depth) c.extent.depth = 1;
        if (m->src_array && (c.src_pos.x + c.extent.width > c.src.pitch || c.src_pos.y + c.extent.height > c.src.ysize))
            return gs_ret(cudaErrorInvalidValue);
        if (m->dst_array && (c.dst_pos.x + c.extent.width > c.dst.pitch || c.dst_pos.y + c.extent.height > c.dst.ysize))
            return gs_ret(cudaErrorInvalidValue);
    }
    for (size_t z = 0; z < c.extent.depth; z++) {
        cudaError_t e = memcpy2d_any(slice_addr(&c.dst, c.dst_pos, z), c.dst.pitch,
                                     slice_addr(&c.src, c.src_pos, z), c.src.pitch, c.extent.width,
                                     c.extent.height, c.kind, s, ptds, async);
        if (e) return e;
    }
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaMemcpy3D(const memcpy3d_parms *m) { return memcpy3d(m, NULL, 0, 0); }
GS_IMPL cudaError_t gs_cudaMemcpy3D_ptds(const memcpy3d_parms *m) { return memcpy3d(m, NULL, 1, 0); }
GS_IMPL cudaError_t gs_cudaMemcpy3DAsync(const memcpy3d_parms *m, cudaStream_t s) { return memcpy3d(m, s, 0, 1); }
GS_IMPL cudaError_t gs_cudaMemcpy3DAsync_ptsz(const memcpy3d_parms *m, cudaStream_t s) {
    return memcpy3d(m, s, 1, 1);
}

static cudaError_t memset3d(pitched_ptr p, int value, extent3d e, cudaStream_t s, int ptds, int async) {
    for (size_t z = 0; z < e.depth; z++) {
        cudaError_t err = memset2d_any(slice_addr(&p, (pos3d){0, 0, 0}, z), p.pitch, value, e.width, e.height, s,
                                       ptds, async);
        if (err) return err;
    }
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaMemset3D(pitched_ptr p, int v, extent3d e) { return memset3d(p, v, e, NULL, 0, 0); }
GS_IMPL cudaError_t gs_cudaMemset3D_ptds(pitched_ptr p, int v, extent3d e) { return memset3d(p, v, e, NULL, 1, 0); }
GS_IMPL cudaError_t gs_cudaMemset3DAsync(pitched_ptr p, int v, extent3d e, cudaStream_t s) {
    return memset3d(p, v, e, s, 0, 1);
}
GS_IMPL cudaError_t gs_cudaMemset3DAsync_ptsz(pitched_ptr p, int v, extent3d e, cudaStream_t s) {
    return memset3d(p, v, e, s, 1, 1);
}
