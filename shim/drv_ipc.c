/* The driver face of CUDA IPC (cuIpc*): the runtime face's implementation (api_ipc.c) with driver error codes.
 * CuPy's static runtime makes cudaIpcGetMemHandle and the rest with these calls. CUipcMemHandle and
 * CUipcEventHandle are the runtime's 64-byte handles; CUdeviceptr and CUevent are its pointers and events. */
#include "drv_api.h"

GS_DRV CUresult gs_cuIpcGetMemHandle(ipc_handle *handle, CUdeviceptr ptr) {
    CUresult r = gs_drv_enter(NULL);
    return r ? r : GS_DRV_CALL(gs_cudaIpcGetMemHandle(handle, (void *)(uintptr_t)ptr));
}

GS_DRV CUresult gs_cuIpcOpenMemHandle_v2(CUdeviceptr *ptr, ipc_handle handle, unsigned flags) {
    if (!ptr) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = gs_drv_enter(NULL);
    if (r) return r;
    void *p = NULL;
    r = GS_DRV_CALL(gs_cudaIpcOpenMemHandle(&p, handle, flags));
    if (!r) *ptr = (CUdeviceptr)(uintptr_t)p;
    return r;
}

GS_DRV CUresult gs_cuIpcOpenMemHandle(CUdeviceptr *ptr, ipc_handle handle, unsigned flags) {
    return gs_cuIpcOpenMemHandle_v2(ptr, handle, flags);
}

GS_DRV CUresult gs_cuIpcCloseMemHandle(CUdeviceptr ptr) {
    CUresult r = gs_drv_enter(NULL);
    return r ? r : GS_DRV_CALL(gs_cudaIpcCloseMemHandle((void *)(uintptr_t)ptr));
}

GS_DRV CUresult gs_cuIpcGetEventHandle(ipc_handle *handle, CUevent ev) {
    CUresult r = gs_drv_enter(NULL);
    return r ? r : GS_DRV_CALL(gs_cudaIpcGetEventHandle(handle, ev));
}

GS_DRV CUresult gs_cuIpcOpenEventHandle(CUevent *ev, ipc_handle handle) {
    CUresult r = gs_drv_enter(NULL);
    return r ? r : GS_DRV_CALL(gs_cudaIpcOpenEventHandle(ev, handle));
}
