/* Client-side state: the per-thread current device, last error and default stream; the process's
 * sticky error; the tables that classify pointers (device allocations, pinned host memory). */
#ifndef GS_STATE_H
#define GS_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "gen/ops.h"
#include "gs_client.h"
#include "gs_handles.h"

#define GS_MAX_DEVICES 64

typedef struct {
    int device;
    int device_set; /* cudaSetDevice called on this thread */
    int runtime_ctx; /* a runtime face call ran on this thread: as CUDA's runtime initialises the device's primary
                        context and makes it current there, the driver face sees it as current */
    cudaError_t last_error;
    uint64_t per_thread_stream[GS_MAX_DEVICES]; /* server handle of this thread's default stream */
} gs_thread_state;

gs_thread_state *gs_thread(void);

/* Records the result of an API call as CUDA does: a failure becomes the thread's last error, and a
 * sticky error (a kernel fault) becomes every later call's result. Returns e. */
cudaError_t gs_ret(cudaError_t e);
/* The sticky error, if the context is broken. */
cudaError_t gs_sticky(void);
int gs_is_sticky_code(cudaError_t e);
/* cudaDeviceReset: the context is destroyed, and with it the sticky error (docs/semantics.md). */
void gs_clear_sticky(void);

/* Starts an API call: connects, and returns non-zero (already recorded) when the call must fail. */
#define GS_ENTER()                                          \
    do {                                                    \
        cudaError_t gs_e_ = gs_sticky();                    \
        gs_thread()->runtime_ctx = 1;                       \
        if (!gs_e_) gs_e_ = gs_ensure_connected();          \
        if (gs_e_) return gs_ret(gs_e_);                    \
    } while (0)

/* The wire handle of a stream argument: the legacy stream is the current device's ordinal; cudaStreamPerThread (or any stream
 * argument of a _ptsz/_ptds call when it is 0) is this thread's own stream. Returns 0 on success. */
cudaError_t gs_stream_handle(cudaStream_t s, int per_thread_default, uint64_t *out);
/* Wire handles below GS_HANDLE_BASE are legacy streams (the handle is the device ordinal). */
static inline int gs_is_legacy_handle(uint64_t h) { return h < GS_HANDLE_BASE; }
/* The cudaStream_t a wire handle stands for (cudaStreamLegacy for a legacy stream: the current device's). */
cudaStream_t gs_stream_of_handle(uint64_t h);

/* Streams and events this process created (gs_handles.h): asynchronous calls are checked against them at
 * once, as CUDA does, since their replies are not awaited. */

/* cudaErrorInvalidValue unless [p, p+n) lies inside one device allocation the client knows. */
cudaError_t gs_check_device_range(const void *p, size_t n);

/* Device count (cached after the first successful query). */
cudaError_t gs_device_count(int *n);

/* ---- pointer tables ---- */
typedef struct {
    uintptr_t base;
    size_t size;
    int device;
    int kind;       /* cudaMemoryTypeDevice or cudaMemoryTypeHost */
    unsigned flags; /* cudaHostAlloc / cudaHostRegister flags */
    int owned;      /* host memory the shim allocated (MallocHost) vs registered; GS_ARENA_BACKED: see below */
    uint64_t shm;   /* pinned memory shared with the server (memfd), or 0 */
    int reserved;   /* device range: its pages are reserved (PROT_NONE) in this process's address space */
} gs_range;

/* gs_range.owned of mapped pinned memory that lives in the emulator's memory (api_memory.c): its host pointer
 * is its device pointer, so device-side calls (copies, memsets, cuMemGetAddressRange) accept it. */
#define GS_ARENA_BACKED 2
/* gs_range.owned of the device alias of registered host memory (api_registered.c): the emulator's memory that
 * holds the registered bytes, mapped here at its own address too; cudaFreeHost and cudaHostUnregister refuse it */
#define GS_REGISTERED_ALIAS 3
/* host memory whose host pointer is also a device pointer */
static inline int gs_range_mapped_host(const gs_range *r) {
    return r->kind == cudaMemoryTypeHost && (r->owned == GS_ARENA_BACKED || r->owned == GS_REGISTERED_ALIAS);
}
static inline int gs_range_device_reachable(const gs_range *r) {
    return r->kind == cudaMemoryTypeDevice || r->kind == cudaMemoryTypeManaged || gs_range_mapped_host(r);
}

void gs_ranges_add(gs_range r);
/* Told of every range added and removed: a context made with cuCtxCreate owns what is made while it is
 * current, and frees it when destroyed (drv_context.c). */
void gs_drv_range_added(const gs_range *r);
void gs_drv_range_removed(uintptr_t base);
int gs_ranges_remove(uintptr_t base, int kind, gs_range *removed);
/* Finds the range containing p; returns 1 and fills *out. */
int gs_ranges_find(uintptr_t p, gs_range *out);
size_t gs_ranges_count(int kind);
/* Forgets every device allocation of dev (cudaDeviceReset). */
void gs_ranges_drop_device(int dev);

#endif
