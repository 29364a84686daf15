/* The runtime face's way into the driver face: cudaGetDriverEntryPoint (the caller's runtime version)
 * and cudaGetDriverEntryPointByVersion return gpushim's own driver functions, chosen as cuGetProcAddress
 * chooses them (drv_procaddr.c). */
#include "gs_api.h"

int gs_drv_entry_point(const char *symbol, void **pfn, int cuda_version, int per_thread);
void gs_drv_mark_initialised(void);

enum { ENABLE_DEFAULT = 0, ENABLE_LEGACY_STREAM = 1, ENABLE_PER_THREAD = 2 };

static cudaError_t entry_point(const char *symbol, void **fn, int version, unsigned long long flags, int *status,
                               int ptsz) {
    if (!symbol || !fn || flags > ENABLE_PER_THREAD) return gs_ret(cudaErrorInvalidValue);
    /* cudaEnableDefault follows how the caller was compiled: the _ptsz export is what per-thread
     * default stream builds call. */
    int per_thread = flags == ENABLE_PER_THREAD || (flags == ENABLE_DEFAULT && ptsz);
    int s = gs_drv_entry_point(symbol, fn, version, per_thread);
    gs_drv_mark_initialised(); /* the runtime has initialised the driver whose functions it hands out */
    if (status) *status = s;
    /* CUDA: success with *funcPtr NULL and the query result naming why when the symbol is missing */
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaGetDriverEntryPoint__11(const char *symbol, void **fn, unsigned long long flags) {
    return entry_point(symbol, fn, gs_runtime_version(), flags, NULL, 0);
}
GS_IMPL cudaError_t gs_cudaGetDriverEntryPoint_ptsz__11(const char *symbol, void **fn, unsigned long long flags) {
    return entry_point(symbol, fn, gs_runtime_version(), flags, NULL, 1);
}
GS_IMPL cudaError_t gs_cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags, int *status) {
    return entry_point(symbol, fn, gs_runtime_version(), flags, status, 0);
}
GS_IMPL cudaError_t gs_cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fn, unsigned long long flags,
                                                    int *status) {
    return entry_point(symbol, fn, gs_runtime_version(), flags, status, 1);
}
GS_IMPL cudaError_t gs_cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned version,
                                                        unsigned long long flags, int *status) {
    return entry_point(symbol, fn, (int)version, flags, status, 0);
}
GS_IMPL cudaError_t gs_cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **fn, unsigned version,
                                                             unsigned long long flags, int *status) {
    return entry_point(symbol, fn, (int)version, flags, status, 1);
}
