/* The driver face of CUDA IPC: CUipcMemHandle / CUipcEventHandle are the runtime's 64-byte handles (api_ipc.c),
 * CUdeviceptr the device address, CUevent the cudaEvent_t; CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS ==
 * cudaIpcMemLazyEnablePeerAccess. numba-cuda shares device arrays between processes with these. */
#include "drv_api.h"

/* Enters a call that needs a current context. */
#define IPC_ENTER()                          \
    do {                                     \
        CUresult gs_r_ = gs_drv_enter(NULL); \
        if (gs_r_) return gs_r_;             \
    } while (0)

GS_DRV CUresult gs_cuIpcGetMemHandle(ipc_handle *handle, CUdeviceptr p) {
    IPC_ENTER();
    return GS_DRV_CALL(gs_cudaIpcGetMemHandle(handle, (void *)(uintptr_t)p));
}

GS_DRV CUresult gs_cuIpcOpenMemHandle_v2(CUdeviceptr *p, ipc_handle handle, unsigned flags) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    IPC_ENTER();
    void *d = NULL;
    CUresult r = GS_DRV_CALL(gs_cudaIpcOpenMemHandle(&d, handle, flags));
    if (!r) *p = (uintptr_t)d;
    return r;
}
GS_DRV CUresult gs_cuIpcOpenMemHandle(CUdeviceptr *p, ipc_handle handle, unsigned flags) {
    return gs_cuIpcOpenMemHandle_v2(p, handle, flags);
}

GS_DRV CUresult gs_cuIpcCloseMemHandle(CUdeviceptr p) {
    IPC_ENTER();
    return GS_DRV_CALL(gs_cudaIpcCloseMemHandle((void *)(uintptr_t)p));
}

GS_DRV CUresult gs_cuIpcGetEventHandle(ipc_handle *handle, CUevent ev) {
    IPC_ENTER();
    return GS_DRV_CALL(gs_cudaIpcGetEventHandle(handle, ev));
}

GS_DRV CUresult gs_cuIpcOpenEventHandle(CUevent *ev, ipc_handle handle) {
    IPC_ENTER();
    return GS_DRV_CALL(gs_cudaIpcOpenEventHandle((cudaEvent_t *)ev, handle));
}

#undef IPC_ENTER
