/* CUDA IPC between processes using one gpushim server (gpushim/server/ops_ipc.py): the server owns the
 * memory, so a handle names (server, session, allocation) and another session opens it by asking the
 * server to map that allocation into its own device memory.
 *
 * Event handles are not supported yet (cudaErrorNotSupported, named once). */
#include <string.h>

#include "gs_api.h"

typedef struct {
    char reserved[64];
} ipc_handle; /* cudaIpcMemHandle_t, cudaIpcEventHandle_t */

GS_IMPL cudaError_t gs_cudaIpcGetMemHandle(ipc_handle *handle, void *ptr) {
    if (!handle || !ptr) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_call c;
    gs_call_begin(&c, GS_OP_IPC_GET_MEM_HANDLE, 1);
    gs_w_uint(c.w, (uintptr_t)ptr);
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        const uint8_t *p = NULL;
        uint32_t n = 0;
        gs_r_bin(&c.r, &p, &n);
        if (n != sizeof handle->reserved || c.r.err) e = cudaErrorUnknown;
        else memcpy(handle->reserved, p, n);
    }
    gs_call_end(&c);
    return gs_ret(e);
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
