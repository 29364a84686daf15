#define _GNU_SOURCE
#include "gs_state.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gen/ops.h"

static _Thread_local gs_thread_state tls;
static _Atomic int sticky;

gs_thread_state *gs_thread(void) { return &tls; }

int gs_is_sticky_code(cudaError_t e) {
    switch (e) {
    case 700: case 702: case 714: case 715: case 716: case 717: case 718: case 719: case 710:
        return 1;
    default:
        return 0;
    }
}

cudaError_t gs_sticky(void) { return atomic_load(&sticky); }

void gs_clear_sticky(void) { atomic_store(&sticky, 0); }

cudaStream_t gs_stream_of_handle(uint64_t h) { return gs_is_legacy_handle(h) ? GS_STREAM_LEGACY : (cudaStream_t)(uintptr_t)h; }

cudaError_t gs_ret(cudaError_t e) {
    if (e && gs_is_sticky_code(e)) {
        int zero = 0;
        atomic_compare_exchange_strong(&sticky, &zero, e);
    }
    if (e) tls.last_error = e;
    return e;
}

cudaError_t gs_check_device_range(const void *p, size_t n) {
    gs_range r;
    if (!gs_ranges_find((uintptr_t)p, &r) || !gs_range_device_reachable(&r)) return cudaErrorInvalidValue;
    return n <= r.base + r.size - (uintptr_t)p ? cudaSuccess : cudaErrorInvalidValue; /* p + n may wrap */
}

cudaError_t gs_stream_handle(cudaStream_t s, int per_thread_default, uint64_t *out) {
    if (s == GS_STREAM_LEGACY || (s == NULL && !per_thread_default)) {
        /* each device has its own legacy stream: its wire handle is the device ordinal */
        if (tls.device < 0 || tls.device >= GS_MAX_DEVICES) return cudaErrorInvalidDevice;
        *out = (uint64_t)tls.device;
        return cudaSuccess;
    }
    if (s != NULL && s != GS_STREAM_PER_THREAD) {
        *out = (uint64_t)(uintptr_t)s;
        return gs_handle_known(GS_HANDLE_STREAM, *out) ? cudaSuccess : cudaErrorInvalidResourceHandle;
    }
    int dev = tls.device;
    if (dev < 0 || dev >= GS_MAX_DEVICES) return cudaErrorInvalidDevice;
    if (!tls.per_thread_stream[dev]) {
        gs_call c;
        gs_call_begin(&c, GS_OP_STREAM_CREATE, 3);
        gs_w_int(c.w, dev);
        gs_w_uint(c.w, 0);
        gs_w_int(c.w, 0);
        cudaError_t e = gs_call_run(&c);
        if (!e) {
            gs_r_uint(&c.r, &tls.per_thread_stream[dev]);
            gs_handle_add(GS_HANDLE_STREAM, tls.per_thread_stream[dev]);
        }
        gs_call_end(&c);
        if (e) return e;
    }
    *out = tls.per_thread_stream[dev];
    return cudaSuccess;
}

cudaError_t gs_device_count(int *n) {
    static _Atomic int cached = -1;
    int v = atomic_load(&cached);
    if (v >= 0) { *n = v; return cudaSuccess; }
    gs_call c;
    gs_call_begin(&c, GS_OP_DEVICE_COUNT, 0);
    cudaError_t e = gs_call_run(&c);
    int64_t count = 0;
    if (!e) gs_r_int(&c.r, &count);
    gs_call_end(&c);
    if (e) return e;
    atomic_store(&cached, (int)count);
    *n = (int)count;
    return cudaSuccess;
}

/* ---- pointer tables: a sorted array under a read-write lock (lookups far outnumber changes) ---- */

static pthread_rwlock_t ranges_lock = PTHREAD_RWLOCK_INITIALIZER;
static gs_range *ranges;
static size_t nranges, cap;

static size_t lower_bound(uintptr_t p) {
    size_t lo = 0, hi = nranges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ranges[mid].base < p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* ---- reserving device ranges in the application's address space (DESIGN decision 9) ----
 * Device pointers are the server's numbers. So that no host allocation of this process ever gets an
 * address inside a device allocation (which would make cudaMemcpyDefault and cudaPointerGetAttributes
 * misjudge it), the pages of every device range are reserved with an inaccessible mapping, at no memory
 * cost. Neighbouring ranges may share a page: each range owns the pages no other device range touches. */

static int reserve_wanted(void) {
    static int wanted = -1;
    if (wanted < 0) {
        const char *e = getenv("GPUSHIM_RESERVE");
        wanted = !(e && strcmp(e, "0") == 0);
    }
    return wanted;
}

static void own_pages_locked(size_t i, uintptr_t *lo, uintptr_t *hi) {
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    const gs_range *r = &ranges[i];
    *lo = r->base & ~(pg - 1);
    *hi = (r->base + (r->size ? r->size : 1) + pg - 1) & ~(pg - 1);
    /* Only a neighbour that holds its reservation keeps a shared page: one whose reservation failed (it
     * overlapped host memory) never will unmap it, so the page would stay reserved after both are freed,
     * and a managed allocation the server later places there fails with EEXIST. Ranges do not overlap:
     * the scan ends at the first device range clear of the page. */
    for (size_t j = i; j-- > 0;) {
        if (ranges[j].kind != cudaMemoryTypeDevice) continue;
        if (ranges[j].base + ranges[j].size <= *lo) break;
        if (ranges[j].reserved) { *lo += pg; break; }
    }
    for (size_t j = i + 1; j < nranges; j++) {
        if (ranges[j].kind != cudaMemoryTypeDevice) continue;
        if (ranges[j].base >= *hi) break;
        if (ranges[j].reserved) { *hi -= pg; break; }
    }
}

static void reserve_locked(size_t i) {
    gs_range *r = &ranges[i];
    if (r->kind != cudaMemoryTypeDevice || !reserve_wanted()) return;
    uintptr_t lo, hi;
    own_pages_locked(i, &lo, &hi);
    r->reserved = 1;
    if (hi <= lo) return;
    void *p = mmap((void *)lo, hi - lo, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
                   -1, 0);
    if (p == (void *)lo) return;
    if (p != MAP_FAILED) munmap(p, hi - lo); /* a kernel without MAP_FIXED_NOREPLACE put it elsewhere */
    r->reserved = 0;
    gs_warn_once("alias", "device memory at %p-%p overlaps host memory of this process: cudaMemcpyDefault and "
                 "cudaPointerGetAttributes cannot tell them apart there", (void *)r->base, (void *)(r->base + r->size));
}

static void unreserve_locked(size_t i) {
    if (!ranges[i].reserved) return;
    uintptr_t lo, hi;
    own_pages_locked(i, &lo, &hi);
    if (hi > lo) munmap((void *)lo, hi - lo);
}

void gs_ranges_add(gs_range r) {
    pthread_rwlock_wrlock(&ranges_lock);
    if (nranges == cap) {
        size_t ncap = cap ? cap * 2 : 64;
        gs_range *n = realloc(ranges, ncap * sizeof *n);
        if (!n) { pthread_rwlock_unlock(&ranges_lock); return; }
        ranges = n;
        cap = ncap;
    }
    size_t i = lower_bound(r.base);
    memmove(ranges + i + 1, ranges + i, (nranges - i) * sizeof *ranges);
    ranges[i] = r;
    nranges++;
    reserve_locked(i);
    pthread_rwlock_unlock(&ranges_lock);
    gs_drv_range_added(&r);
}

int gs_ranges_remove(uintptr_t base, int kind, gs_range *removed) {
    pthread_rwlock_wrlock(&ranges_lock);
    size_t i = lower_bound(base);
    int found = i < nranges && ranges[i].base == base && ranges[i].kind == kind;
    if (found) {
        if (removed) *removed = ranges[i];
        unreserve_locked(i);
        memmove(ranges + i, ranges + i + 1, (nranges - i - 1) * sizeof *ranges);
        nranges--;
    }
    pthread_rwlock_unlock(&ranges_lock);
    if (found) gs_drv_range_removed(base);
    return found;
}

int gs_ranges_find(uintptr_t p, gs_range *out) {
    pthread_rwlock_rdlock(&ranges_lock);
    size_t i = lower_bound(p + 1); /* first range starting after p */
    int found = 0;
    if (i > 0) {
        gs_range *r = &ranges[i - 1];
        if (p >= r->base && p < r->base + (r->size ? r->size : 1)) { *out = *r; found = 1; }
    }
    pthread_rwlock_unlock(&ranges_lock);
    return found;
}

size_t gs_ranges_count(int kind) {
    pthread_rwlock_rdlock(&ranges_lock);
    size_t n = 0;
    for (size_t i = 0; i < nranges; i++) n += ranges[i].kind == kind;
    pthread_rwlock_unlock(&ranges_lock);
    return n;
}

void gs_ranges_drop_device(int dev) {
    pthread_rwlock_wrlock(&ranges_lock);
    for (size_t i = nranges; i-- > 0;) {
        if (ranges[i].kind == cudaMemoryTypeDevice && ranges[i].device == dev) {
            unreserve_locked(i);
            memmove(ranges + i, ranges + i + 1, (nranges - i - 1) * sizeof *ranges);
            nranges--;
        }
    }
    pthread_rwlock_unlock(&ranges_lock);
}

/* A forked child has a new session: the parent's device allocations are not its own. Host memory
 * the parent pinned stays valid in the child (plain host memory), so only device ranges go. */
static void ranges_after_fork(void) {
    pthread_rwlock_init(&ranges_lock, NULL);
    size_t j = 0;
    for (size_t i = 0; i < nranges; i++)
        if (ranges[i].kind == cudaMemoryTypeDevice) {
            unreserve_locked(i); /* the child's session hands out its own addresses */
        } else if (ranges[i].kind == cudaMemoryTypeManaged) {
            /* the parent's managed pages stay mapped here, but the child's session does not know them */
        } else if (ranges[i].kind == cudaMemoryTypeHost && ranges[i].owned == GS_REGISTERED_ALIAS) {
            /* registered memory's device alias: the child has private copies of the pages (api_registered.c) */
        } else {
            ranges[i].shm = 0; /* the parent's server mapping is not the child's session's */
            ranges[j++] = ranges[i];
        }
    nranges = j;
    memset(tls.per_thread_stream, 0, sizeof tls.per_thread_stream);
    gs_handles_after_fork();
    atomic_store(&sticky, 0);
}

__attribute__((constructor)) static void state_init(void) { pthread_atfork(NULL, NULL, ranges_after_fork); }
