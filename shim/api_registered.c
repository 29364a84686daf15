/* Registered host memory (cudaHostRegister / cuMemHostRegister) that kernels can reach.
 *
 * Kernels run in the server and address only the emulator's memory. So, when the client is on the server's
 * host and the registration asks for a device mapping (cudaHostRegisterMapped, CU_MEMHOSTREGISTER_DEVICEMAP),
 * the pages that hold the registered bytes move into the emulator: the shim allocates as many pages of device
 * memory, copies the application's pages into them and maps them MAP_SHARED|MAP_FIXED over the application's
 * own pages. The application's pointer and data stay valid (neighbouring bytes on the same pages too, since
 * whole pages move), and kernels read and write the same bytes through the device pointer. On unregister the
 * pages become private anonymous memory again, holding the current bytes.
 *
 * The device pointer is the emulator's address of those bytes, not the host pointer: CUDA allows that
 * ("Unified Addressing": registered memory is an exception with a distinct device address, and
 * cuMemHostRegister: the device pointer matches the host pointer only where the device attribute
 * CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM is non-zero; the emulator reports 0). The
 * device address is also mapped here, so copies, memsets and host code may use it too.
 *
 * Other threads may use the pages while they move: they are write-protected meanwhile, and a writer waits for
 * the move in a SIGSEGV handler (gs_move_guard.c), so no write is lost.
 *
 * Limits (docs/numba-suite.md): a system call writing those pages during the move (read() into them) fails with
 * EFAULT (gs_move_guard.c); only private anonymous read-write memory (heap, stack, anonymous mappings) moves;
 * registrations that share pages share the device pages, one that covers some of another's pages and more is
 * not mapped; a forked child gets private copies of the pages. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gs_api.h"
#include "gs_move_guard.h"

#define HOST_REGISTER_MAPPED 2u /* cudaHostRegisterMapped == CU_MEMHOSTREGISTER_DEVICEMAP */

/* Application pages moved into the emulator's memory, shared by the registrations they hold. */
typedef struct moved_pages {
    uintptr_t host, dev; /* page-aligned */
    size_t len;
    int refs;
    struct moved_pages *next;
} moved_pages;
static moved_pages *moved;
/* The registrations (by address) that hold moved pages: only they give a hold back when unregistered (another
 * registration may lie on moved pages without having moved them). */
typedef struct holder {
    uintptr_t base;
    struct holder *next;
} holder;
static holder *holders;
static pthread_mutex_t moved_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* Whether [lo, hi) is private anonymous read-write memory (/proc/self/maps): other memory must not move (a file
 * mapping would lose its file, read-only pages would become writable). */
static int private_anonymous(uintptr_t lo, uintptr_t hi) {
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f) return 0;
    char line[512];
    uintptr_t at = lo;
    while (at < hi && fgets(line, sizeof line, f)) {
        unsigned long a, b, inode;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s %*s %*s %lu", &a, &b, perms, &inode) != 4) continue;
        if (b <= at || a > at) continue;
        if (strncmp(perms, "rw", 2) != 0 || perms[3] != 'p' || inode != 0) break;
        at = b;
    }
    fclose(f);
    return at >= hi;
}

/* A copy of the pages [host, host+len) at to, to be mapped over them (gs_guard_move runs the two). */
typedef struct move_job {
    uintptr_t host;
    size_t len;
    void *to;
    int fd; /* move in: the device-memory file and offset of to's pages; move out: -1 (to is anonymous memory) */
    off_t off;
} move_job;

static int move_pages(void *arg) {
    move_job *j = arg;
    memcpy(j->to, (void *)j->host, j->len);
    if (j->fd >= 0)
        return mmap((void *)j->host, j->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, j->fd, j->off) ==
                       (void *)j->host
                   ? 0
                   : -1;
    /* one mremap, so no moment without pages */
    return mremap(j->to, j->len, j->len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)j->host) == (void *)j->host ? 0 : -1;
}

/* Replaces the pages [host, host+len) by a mapping of the device-memory file at off, keeping their bytes. */
static int move_in(uintptr_t host, size_t len, uintptr_t dev, int fd, off_t off) {
    void *d = mmap((void *)dev, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, off);
    if (d != (void *)dev) {
        if (d != MAP_FAILED) munmap(d, len);
        return -1;
    }
    move_job j = {host, len, d, fd, off};
    if (gs_guard_move(host, len, move_pages, &j)) {
        munmap(d, len);
        return -1;
    }
    return 0;
}

/* Makes [host, host+len) private anonymous memory again with its current bytes. */
static int move_out(uintptr_t host, size_t len) {
    void *t = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED) return -1;
    move_job j = {host, len, t, -1, 0};
    if (gs_guard_move(host, len, move_pages, &j)) {
        munmap(t, len);
        return -1;
    }
    return 0;
}

/* The device address of [ptr, ptr+size), its pages moved into device dev's memory if no registration's are
 * already; 0 with *why when it cannot be. Called with moved_lock held. */
static uintptr_t device_address(void *ptr, size_t size, int dev, const char **why) {
    size_t pg = page_size();
    uintptr_t lo = (uintptr_t)ptr / pg * pg, hi = ((uintptr_t)ptr + size + pg - 1) / pg * pg;
    for (moved_pages *m = moved; m; m = m->next) {
        if (hi <= m->host || lo >= m->host + m->len) continue;
        if (lo >= m->host && hi <= m->host + m->len) {
            m->refs++;
            return m->dev + ((uintptr_t)ptr - m->host);
        }
        *why = "its pages overlap another mapped registration's in part";
        return 0;
    }
    if (!private_anonymous(lo, hi)) {
        *why = "it is not private anonymous read-write memory (a file mapping, say)";
        return 0;
    }
    moved_pages *m = malloc(sizeof *m);
    if (!m) {
        *why = "out of host memory";
        return 0;
    }
    int fd;
    off_t off;
    cudaError_t e;
    const char *reason;
    uintptr_t d = gs_device_pages(dev, hi - lo, &fd, &off, &e, &reason);
    if (!d || move_in(lo, hi - lo, d, fd, off)) {
        if (d) free_on_server(d);
        *why = d ? "its pages could not be replaced" : reason ? "the server's memory cannot be mapped into this process"
                                                             : "the server refused device memory for it";
        free(m);
        return 0;
    }
    *m = (moved_pages){lo, d, hi - lo, 1, moved};
    moved = m;
    return d + ((uintptr_t)ptr - lo);
}

/* The device address of registered host memory [p, p+n) whose pages moved into the emulator's memory, or 0. */
static uintptr_t moved_address(uintptr_t p, size_t n) {
    uintptr_t d = 0;
    pthread_mutex_lock(&moved_lock);
    for (moved_pages *m = moved; m && !d; m = m->next)
        if (p >= m->host && p + n <= m->host + m->len) d = m->dev + (p - m->host);
    pthread_mutex_unlock(&moved_lock);
    return d;
}

/* Whether the registration at base holds moved pages; forgets it. Called with moved_lock held. */
static int take_holder(uintptr_t base) {
    for (holder **h = &holders; *h; h = &(*h)->next)
        if ((*h)->base == base) {
            holder *gone = *h;
            *h = gone->next;
            free(gone);
            return 1;
        }
    return 0;
}

/* Drops a registration's hold on its moved pages: the last one moves them back and frees the device memory. */
static void release_pages(uintptr_t ptr) {
    pthread_mutex_lock(&moved_lock);
    if (!take_holder(ptr)) {
        pthread_mutex_unlock(&moved_lock);
        return;
    }
    for (moved_pages **p = &moved; *p; p = &(*p)->next) {
        moved_pages *m = *p;
        if (ptr < m->host || ptr >= m->host + m->len) continue;
        if (--m->refs == 0) {
            if (move_out(m->host, m->len))
                gs_log(1, "cudaHostUnregister: the pages at %#lx stay shared with the server: %s", (unsigned long)m->host,
                       strerror(errno));
            munmap((void *)m->dev, m->len);
            free_on_server(m->dev);
            *p = m->next;
            free(m);
        }
        break;
    }
    pthread_mutex_unlock(&moved_lock);
}

GS_IMPL cudaError_t gs_cudaHostRegister(void *ptr, size_t size, unsigned flags) {
    if (!ptr || !size || (flags & ~0x0fu)) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_range r;
    if (gs_ranges_find((uintptr_t)ptr, &r) || gs_ranges_find((uintptr_t)ptr + size - 1, &r)) {
        return gs_ret(r.kind == cudaMemoryTypeHost ? cudaErrorHostMemoryAlreadyRegistered : cudaErrorInvalidValue);
    }
    int dev = gs_thread()->device;
    uintptr_t d = 0;
    if (flags & HOST_REGISTER_MAPPED) {
        const char *why = "the client is not on the server's host (TCP)";
        if (gs_transport_is_unix()) {
            pthread_mutex_lock(&moved_lock);
            holder *h = malloc(sizeof *h);
            d = h ? device_address(ptr, size, dev, &why) : 0;
            if (!h) why = "out of host memory";
            if (d) {
                *h = (holder){(uintptr_t)ptr, holders};
                holders = h;
            } else {
                free(h);
            }
            pthread_mutex_unlock(&moved_lock);
        }
        if (!d)
            gs_warn_once(why, "cudaHostRegister(..., cudaHostRegisterMapped): %s; the memory is pinned but "
                         "kernels cannot reach it", why);
    }
    if (d) gs_ranges_add((gs_range){d, size, dev, cudaMemoryTypeHost, flags, GS_REGISTERED_ALIAS, 0, 0});
    gs_ranges_add((gs_range){(uintptr_t)ptr, size, dev, cudaMemoryTypeHost, flags, 0, 0, 0});
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaHostUnregister(void *ptr) {
    GS_ENTER();
    gs_range r;
    if (!ptr || !gs_ranges_find((uintptr_t)ptr, &r) || r.kind != cudaMemoryTypeHost || r.owned ||
        r.base != (uintptr_t)ptr)
        return gs_ret(cudaErrorHostMemoryNotRegistered);
    uintptr_t d = r.flags & HOST_REGISTER_MAPPED ? moved_address(r.base, r.size) : 0;
    if (d) {
        /* kernels and copies still queued may use the memory: wait for the device, as cudaFreeHost does */
        gs_call c;
        gs_call_begin(&c, GS_OP_DEVICE_SYNC, 1);
        gs_w_int(c.w, r.device);
        gs_call_run(&c);
        gs_call_end(&c);
        gs_ranges_remove(d, cudaMemoryTypeHost, NULL);
        release_pages(r.base);
    }
    gs_ranges_remove(r.base, cudaMemoryTypeHost, NULL);
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaHostGetDevicePointer(void **dptr, void *hptr, unsigned flags) {
    if (!dptr || flags) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_range r;
    if (!gs_ranges_find((uintptr_t)hptr, &r) || r.kind != cudaMemoryTypeHost) return gs_ret(cudaErrorInvalidValue);
    uintptr_t d = r.owned ? 0 : moved_address(r.base, r.size);
    if (d) {
        *dptr = (void *)(d + ((uintptr_t)hptr - r.base)); /* registered memory: its distinct device address */
        return cudaSuccess;
    }
    if (!gs_range_mapped_host(&r)) {
        /* Only memory from cudaHostAlloc(cudaHostAllocMapped), or registered with cudaHostRegisterMapped, with
         * the client on the server's host lives where kernels can reach it. */
        gs_warn_once("mapped_ptr", "cudaHostGetDevicePointer: kernels can reach only memory allocated with "
                     "cudaHostAlloc(..., cudaHostAllocMapped) or registered with cudaHostRegisterMapped by a client "
                     "on the server's host (a Unix socket)");
        return gs_ret(cudaErrorNotSupported);
    }
    *dptr = hptr; /* unified addressing: the same address */
    return cudaSuccess;
}

/* A forked child gets its own private copy of moved pages, as of any private memory; its session does not know
 * the parent's device memory (gs_state.c drops the device aliases' ranges). */
static void registered_after_fork(void) {
    gs_guard_after_fork();
    pthread_mutex_init(&moved_lock, NULL);
    while (holders) {
        holder *h = holders;
        holders = h->next;
        free(h);
    }
    while (moved) {
        moved_pages *m = moved;
        moved = m->next;
        (void)move_out(m->host, m->len);
        munmap((void *)m->dev, m->len);
        free(m);
    }
}

__attribute__((constructor)) static void registered_init(void) { pthread_atfork(NULL, NULL, registered_after_fork); }
