/* Managed memory on one host: the allocation lives in the emulated device's memory, which the server
 * keeps in a memfd; the shim maps those pages at the very same address in the application, over its
 * reservation, so host code and kernels touch the same bytes. (Across hosts, or on a real GPU in another
 * process, there is no such sharing: cudaMallocManaged then returns cudaErrorNotSupported with the reason.) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gs_api.h"

typedef struct {
    long pid;
    int server_fd, fd;
} device_file_t;
static device_file_t device_files[GS_MAX_DEVICES];
static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;

/* The server's device-memory file, opened through /proc once per device. */
static int device_file(int dev, long pid, int server_fd) {
    pthread_mutex_lock(&files_lock);
    if (device_files[dev].fd <= 0 || device_files[dev].pid != pid || device_files[dev].server_fd != server_fd) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/fd/%d", pid, server_fd);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd >= 0) device_files[dev] = (device_file_t){pid, server_fd, fd};
        else gs_log(1, "cannot open the server's device memory %s: %s", path, strerror(errno));
    }
    int fd = device_files[dev].fd > 0 && device_files[dev].pid == pid ? device_files[dev].fd : -1;
    pthread_mutex_unlock(&files_lock);
    return fd;
}

static size_t page_round(size_t n) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) / pg * pg;
}

static void free_on_server(uintptr_t ptr) {
    gs_call c;
    gs_call_begin(&c, GS_OP_FREE, 1);
    gs_w_uint(c.w, ptr);
    gs_call_run(&c);
    gs_call_end(&c);
}

/* Allocates size bytes (whole pages) of device dev's memory on the server: returns its device address, with
 * *fd the server's device-memory file opened here and *offset where the pages are in it. On failure returns 0
 * with *err the server's error (*why NULL), or cudaErrorNotSupported with *why saying why the pages cannot be
 * reached from this process (the allocation is freed again). */
uint64_t gs_device_pages(int dev, size_t size, int *fd, off_t *offset, cudaError_t *err, const char **why) {
    gs_call c;
    gs_call_begin(&c, GS_OP_MALLOC_MANAGED, 2);
    gs_w_int(c.w, dev);
    gs_w_uint(c.w, size);
    cudaError_t e = gs_call_run(&c);
    uint64_t p = 0, pid = 0, sfd = 0, base = 0;
    if (!e) {
        p = gs_u64(&c);
        pid = gs_u64(&c);
        sfd = gs_u64(&c);
        base = gs_u64(&c);
    }
    gs_call_end(&c);
    *why = NULL;
    if (e) {
        *err = e;
        return 0;
    }
    *fd = device_file(dev, (long)pid, (int)sfd);
    *offset = (off_t)(p - base);
    if (*fd < 0) {
        *why = "no access to it";
        free_on_server(p);
        *err = cudaErrorNotSupported;
        return 0;
    }
    return p;
}

/* Allocates size bytes of device dev's memory on the server and maps those pages at their own address in this
 * process (managed memory, and mapped pinned memory in api_memory.c). On failure returns NULL with *err the
 * server's error (*why NULL), or cudaErrorNotSupported with *why saying why the pages cannot be mapped (the
 * allocation is freed again). */
void *gs_map_device_memory(int dev, size_t size, cudaError_t *err, const char **why) {
    int fd;
    off_t off;
    uint64_t p = gs_device_pages(dev, size, &fd, &off, err, why);
    if (!p) return NULL;
    void *m = mmap((void *)(uintptr_t)p, page_round(size), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE,
                   fd, off);
    if (m != (void *)(uintptr_t)p) {
        *why = strerror(errno);
        if (m != MAP_FAILED) munmap(m, page_round(size));
        free_on_server(p);
        *err = cudaErrorNotSupported;
        return NULL;
    }
    return m;
}

GS_IMPL cudaError_t gs_cudaMallocManaged(void **ptr, size_t size, unsigned flags) {
    if (!ptr || size == 0 || (flags != 1 && flags != 2)) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    int dev = gs_thread()->device;
    cudaError_t e = cudaSuccess;
    const char *why;
    void *m = gs_map_device_memory(dev, size, &e, &why);
    if (!m) {
        if (why)
            gs_warn_once("managed", "cudaMallocManaged: the server's memory cannot be mapped into this process (%s); "
                         "managed memory needs the emulator on this host", why);
        return gs_ret(e);
    }
    gs_ranges_add((gs_range){(uintptr_t)m, size, dev, cudaMemoryTypeManaged, flags, 0, 0, 0});
    *ptr = m;
    return cudaSuccess;
}

/* Called by cudaFree for a managed range, after the server freed it. The pages are unmapped, not kept as a
 * PROT_NONE reservation: nothing would own that reservation, and the server may hand the same address out
 * again (a later cudaMallocManaged there failed with EEXIST). */
void gs_unmap_managed(const gs_range *r) {
    munmap((void *)r->base, page_round(r->size));
}

/* ---- prefetch and advice: on one host the data is already where every processor sees it ---- */

typedef struct { int type, id; } mem_location; /* cudaMemLocation, 8 bytes in 12.x and 13.x */

static cudaError_t check_managed(const void *p, size_t n, cudaStream_t s, int ptsz) {
    GS_ENTER();
    gs_range r;
    if (!gs_ranges_find((uintptr_t)p, &r) || (uintptr_t)p + n > r.base + r.size ||
        (r.kind != cudaMemoryTypeManaged && r.kind != cudaMemoryTypeDevice))
        return gs_ret(cudaErrorInvalidValue);
    uint64_t h;
    return gs_ret(gs_stream_handle(s, ptsz, &h));
}

GS_IMPL cudaError_t gs_cudaMemPrefetchAsync(const void *p, size_t n, int dev, cudaStream_t s) {
    (void)dev;
    return check_managed(p, n, s, 0);
}
GS_IMPL cudaError_t gs_cudaMemPrefetchAsync_ptsz(const void *p, size_t n, int dev, cudaStream_t s) {
    (void)dev;
    return check_managed(p, n, s, 1);
}
GS_IMPL cudaError_t gs_cudaMemPrefetchAsync_v2(const void *p, size_t n, mem_location l, unsigned f, cudaStream_t s) {
    (void)l;
    (void)f;
    return check_managed(p, n, s, 0);
}
GS_IMPL cudaError_t gs_cudaMemPrefetchAsync_v2_ptsz(const void *p, size_t n, mem_location l, unsigned f,
                                                    cudaStream_t s) {
    (void)l;
    (void)f;
    return check_managed(p, n, s, 1);
}
GS_IMPL cudaError_t gs_cudaMemPrefetchAsync__13(const void *p, size_t n, mem_location l, unsigned f, cudaStream_t s) {
    return gs_cudaMemPrefetchAsync_v2(p, n, l, f, s);
}
GS_IMPL cudaError_t gs_cudaMemPrefetchAsync_ptsz__13(const void *p, size_t n, mem_location l, unsigned f,
                                                     cudaStream_t s) {
    return gs_cudaMemPrefetchAsync_v2_ptsz(p, n, l, f, s);
}
GS_IMPL cudaError_t gs_cudaMemAdvise(const void *p, size_t n, int advice, int dev) {
    (void)dev;
    if (advice < 1 || advice > 6) return gs_ret(cudaErrorInvalidValue);
    return check_managed(p, n, NULL, 0);
}
GS_IMPL cudaError_t gs_cudaMemAdvise_v2(const void *p, size_t n, int advice, mem_location l) {
    (void)l;
    if (advice < 1 || advice > 6) return gs_ret(cudaErrorInvalidValue);
    return check_managed(p, n, NULL, 0);
}
GS_IMPL cudaError_t gs_cudaMemAdvise__13(const void *p, size_t n, int advice, mem_location l) {
    return gs_cudaMemAdvise_v2(p, n, advice, l);
}
