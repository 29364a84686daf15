/* Managed memory hints of the driver face (the static CUDA runtime's cudaMemPrefetchAsync/cudaMemAdvise come
 * here): the runtime face's checks and semantics, on one host there is nothing to migrate. CUmemLocation has
 * cudaMemLocation's layout. */
#include "drv_api.h"

#define DPTR(p) ((const void *)(uintptr_t)(p))

GS_DRV CUresult gs_cuMemPrefetchAsync(CUdeviceptr p, size_t n, CUdevice dev, CUstream s) {
    return GS_DRV_CALL(gs_cudaMemPrefetchAsync(DPTR(p), n, dev, s));
}
GS_DRV CUresult gs_cuMemPrefetchAsync_ptsz(CUdeviceptr p, size_t n, CUdevice dev, CUstream s) {
    return GS_DRV_CALL(gs_cudaMemPrefetchAsync_ptsz(DPTR(p), n, dev, s));
}
GS_DRV CUresult gs_cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, mem_location l, unsigned flags, CUstream s) {
    return GS_DRV_CALL(gs_cudaMemPrefetchAsync_v2(DPTR(p), n, l, flags, s));
}
GS_DRV CUresult gs_cuMemPrefetchAsync_v2_ptsz(CUdeviceptr p, size_t n, mem_location l, unsigned flags, CUstream s) {
    return GS_DRV_CALL(gs_cudaMemPrefetchAsync_v2_ptsz(DPTR(p), n, l, flags, s));
}
GS_DRV CUresult gs_cuMemAdvise(CUdeviceptr p, size_t n, int advice, CUdevice dev) {
    return GS_DRV_CALL(gs_cudaMemAdvise(DPTR(p), n, advice, dev));
}
GS_DRV CUresult gs_cuMemAdvise_v2(CUdeviceptr p, size_t n, int advice, mem_location l) {
    return GS_DRV_CALL(gs_cudaMemAdvise_v2(DPTR(p), n, advice, l));
}
