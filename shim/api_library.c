/* The runtime face's libraries (CUDA 12.x/13.x): cudaLibraryLoadData, cudaLibraryLoadFromFile,
 * cudaLibraryGetKernel, cudaLibraryGetGlobal, cudaLibraryUnload and cudaKernelSetAttributeForDevice, on the
 * driver face's cuLibrary* (drv_module.c). A cudaLibrary_t is a CUlibrary and a cudaKernel_t a CUkernel,
 * as in CUDA; cudaLaunchKernel takes a cudaKernel_t in place of a host stub (api_kernel.c's find_kernel).
 * cuRAND's host API loads its kernels this way. */
#include "drv_api.h"

/* The driver's codes for what these calls return have the runtime's values (1, 2, 200, 209, 218, 301, 400,
 * 500, ...); the runtime face has no context of its own, so the current device's primary context is made
 * current, as the runtime does on its first call. */
static cudaError_t rt_enter(void) {
    cudaError_t e = gs_sticky();
    if (!e) e = gs_ensure_connected();
    if (e) return e;
    gs_drv_mark_initialised();
    gs_thread()->device_set = 1;
    return cudaSuccess;
}

static cudaError_t rt_err(CUresult r) { return gs_ret((cudaError_t)r); }

GS_IMPL cudaError_t gs_cudaLibraryLoadData(void **lib, const void *code, int *jit_opts, void **jit_values,
                                           unsigned njit, int *lib_opts, void **lib_values, unsigned nlib) {
    cudaError_t e = rt_enter();
    if (e) return gs_ret(e);
    return rt_err(gs_cuLibraryLoadData((struct drv_library **)lib, code, jit_opts, jit_values, njit, lib_opts,
                                       lib_values, nlib));
}

GS_IMPL cudaError_t gs_cudaLibraryLoadFromFile(void **lib, const char *path, int *jit_opts, void **jit_values,
                                               unsigned njit, int *lib_opts, void **lib_values, unsigned nlib) {
    cudaError_t e = rt_enter();
    if (e) return gs_ret(e);
    return rt_err(gs_cuLibraryLoadFromFile((struct drv_library **)lib, path, jit_opts, jit_values, njit, lib_opts,
                                           lib_values, nlib));
}

GS_IMPL cudaError_t gs_cudaLibraryUnload(void *lib) {
    cudaError_t e = rt_enter();
    if (e) return gs_ret(e);
    return rt_err(gs_cuLibraryUnload(lib));
}

GS_IMPL cudaError_t gs_cudaLibraryGetKernel(void **kernel, void *lib, const char *name) {
    cudaError_t e = rt_enter();
    if (e) return gs_ret(e);
    return rt_err(gs_cuLibraryGetKernel((struct drv_function **)kernel, lib, name));
}

GS_IMPL cudaError_t gs_cudaLibraryGetGlobal(void **dptr, size_t *bytes, void *lib, const char *name) {
    cudaError_t e = rt_enter();
    if (e) return gs_ret(e);
    CUdeviceptr p = 0;
    CUresult r = gs_cuLibraryGetGlobal(dptr ? &p : NULL, bytes, lib, name);
    if (!r && dptr) *dptr = (void *)(uintptr_t)p;
    return rt_err(r);
}

/* cudaFuncAttribute and CUfunction_attribute agree on the settable attributes (8: maximum dynamic shared
 * memory, 9: carveout, 10-15: clusters). */
GS_IMPL cudaError_t gs_cudaKernelSetAttributeForDevice(void *kernel, int attr, int value, int dev) {
    cudaError_t e = rt_enter();
    if (!e) e = gs_check_device(dev);
    if (e) return gs_ret(e);
    return rt_err(gs_cuKernelSetAttribute(attr, value, kernel, dev));
}
