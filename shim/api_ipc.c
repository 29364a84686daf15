/* CUDA IPC between processes using one gpushim server (gpushim/server/ops_ipc.py): the server owns the
 * memory, so a handle names (server, session, allocation) and another session opens it by asking the
 * server to map that allocation into its own device memory.
 *
 * Event handles: the exported event's state is shared by the sessions holding it. The importing session's
 * server does not watch the other session, so a wait on an imported event (cudaEventSynchronize,
 * cudaStreamWaitEvent) is done here: the calling thread polls the event until it completes, then goes on
 * (a stream wait thus blocks the host thread, which CUDA's does not). */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "gs_api.h"

typedef struct {
    char reserved[64];
} ipc_handle; /* cudaIpcMemHandle_t, cudaIpcEventHandle_t */

/* Asks the server for the 64-byte handle naming an allocation or an event (op IPC_GET_*_HANDLE). */
static cudaError_t get_handle(int op, uint64_t what, ipc_handle *handle) {
    gs_call c;
    gs_call_begin(&c, op, 1);
    gs_w_uint(c.w, what);
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        const uint8_t *p = NULL;
        uint32_t n = 0;
        gs_r_bin(&c.r, &p, &n);
        if (n != sizeof handle->reserved || c.r.err) e = cudaErrorUnknown;
        else memcpy(handle->reserved, p, n);
    }
    gs_call_end(&c);
    return e;
}

GS_IMPL cudaError_t gs_cudaIpcGetMemHandle(ipc_handle *handle, void *ptr) {
    if (!handle || !ptr) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    return gs_ret(get_handle(GS_OP_IPC_GET_MEM_HANDLE, (uintptr_t)ptr, handle));
}

GS_IMPL cudaError_t gs_cudaIpcOpenMemHandle(void **ptr, ipc_handle handle, unsigned flags) {
    if (!ptr) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    int dev = gs_thread()->device;
    gs_call c;
    gs_call_begin(&c, GS_OP_IPC_OPEN_MEM_HANDLE, 3);
    gs_w_int(c.w, dev);
    gs_w_bin(c.w, handle.reserved, sizeof handle.reserved);
    gs_w_uint(c.w, flags);
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        uint64_t p = gs_u64(&c), size = gs_u64(&c);
        if (c.r.err) {
            e = cudaErrorUnknown;
        } else {
            *ptr = (void *)(uintptr_t)p;
            gs_ranges_add((gs_range){(uintptr_t)p, size, dev, cudaMemoryTypeDevice, 0, 0, 0, 0});
        }
    }
    gs_call_end(&c);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaIpcCloseMemHandle(void *ptr) {
    if (!ptr) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_call c;
    gs_call_begin(&c, GS_OP_IPC_CLOSE_MEM_HANDLE, 1);
    gs_w_uint(c.w, (uintptr_t)ptr);
    cudaError_t e = gs_call_run(&c);
    gs_call_end(&c);
    if (!e) gs_ranges_remove((uintptr_t)ptr, cudaMemoryTypeDevice, NULL);
    return gs_ret(e);
}

/* ---- event handles ---- */

static pthread_mutex_t ipc_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t imported[256];
static size_t nimported;

int gs_ipc_event_imported(uint64_t ev) {
    pthread_mutex_lock(&ipc_lock);
    int found = 0;
    for (size_t i = 0; i < nimported && !found; i++) found = imported[i] == ev;
    pthread_mutex_unlock(&ipc_lock);
    return found;
}

/* Waits until an imported event completes (EVENT_QUERY until it is no longer cudaErrorNotReady). */
cudaError_t gs_ipc_event_wait(uint64_t ev) {
    for (;;) {
        gs_call c;
        gs_call_begin(&c, GS_OP_EVENT_QUERY, 1);
        gs_w_uint(c.w, ev);
        cudaError_t e = gs_call_run(&c);
        gs_call_end(&c);
        if (e != cudaErrorNotReady) return e;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

GS_IMPL cudaError_t gs_cudaIpcGetEventHandle(ipc_handle *handle, cudaEvent_t ev) {
    if (!handle) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    return gs_ret(get_handle(GS_OP_IPC_GET_EVENT_HANDLE, (uintptr_t)ev, handle));
}

GS_IMPL cudaError_t gs_cudaIpcOpenEventHandle(cudaEvent_t *ev, ipc_handle handle) {
    if (!ev) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    pthread_mutex_lock(&ipc_lock);
    int full = nimported == sizeof imported / sizeof *imported;
    pthread_mutex_unlock(&ipc_lock);
    if (full) return gs_ret(cudaErrorMemoryAllocation);
    gs_call c;
    gs_call_begin(&c, GS_OP_IPC_OPEN_EVENT_HANDLE, 2);
    gs_w_int(c.w, gs_thread()->device);
    gs_w_bin(c.w, handle.reserved, sizeof handle.reserved);
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        uint64_t h = gs_u64(&c);
        *ev = (cudaEvent_t)(uintptr_t)h;
        gs_handle_add(GS_HANDLE_EVENT, h);
        pthread_mutex_lock(&ipc_lock);
        if (nimported < sizeof imported / sizeof *imported) imported[nimported++] = h;
        pthread_mutex_unlock(&ipc_lock);
    }
    gs_call_end(&c);
    return gs_ret(e);
}
