/* cuTensorMapEncodeTiled: a TMA descriptor is 128 bytes whose layout is the driver's own, so the driver of the
 * device that reads it encodes it: the server (TENSOR_MAP_ENCODE, gpushim/backends/tensormap.py). cuBLASLt
 * asks for them for its sm_90 kernels; cuTensorMapReplaceAddress likewise. The emulator refuses both
 * (NOT_SUPPORTED, with the reason). */
#include <string.h>

#include "drv_api.h"

enum { TENSOR_MAP_BYTES = 128, MAX_RANK = 5 };

/* Runs a tensor-map call and copies the descriptor the server's driver made into map. */
static CUresult run_into_map(gs_call *c, void *map) {
    cudaError_t e = gs_call_run(c);
    if (!e) {
        const uint8_t *bytes;
        uint32_t n;
        if (!gs_r_bin(&c->r, &bytes, &n) || n != TENSOR_MAP_BYTES) e = cudaErrorUnknown;
        else memcpy(map, bytes, TENSOR_MAP_BYTES);
    }
    gs_call_end(c);
    return gs_drv_err(e);
}

GS_DRV CUresult gs_cuTensorMapEncodeTiled(void *map, int dtype, unsigned rank, void *addr, const uint64_t *dims,
                                          const uint64_t *strides, const unsigned *box, const unsigned *elem,
                                          int interleave, int swizzle, int l2, int oob) {
    /* cuda.h: tensorMap, globalDim, boxDim, elementStrides are required; rank is 1 to 5; globalStrides has
     * rank - 1 entries */
    if (!map || !dims || !box || !elem || !rank || rank > MAX_RANK || (rank > 1 && !strides) || dtype < 0 ||
        interleave < 0 || swizzle < 0 || l2 < 0 || oob < 0)
        return CUDA_ERROR_INVALID_VALUE;
    int dev;
    CUresult r = gs_drv_enter(&dev);
    if (r) return r;
    gs_call c;
    gs_call_begin(&c, GS_OP_TENSOR_MAP_ENCODE, 2);
    gs_w_int(c.w, dev);
    gs_w_array(c.w, 4 * rank + 6);
    gs_w_uint(c.w, (unsigned)dtype);
    gs_w_uint(c.w, rank);
    gs_w_uint(c.w, (uint64_t)(uintptr_t)addr);
    for (unsigned i = 0; i < rank; i++) gs_w_uint(c.w, dims[i]);
    for (unsigned i = 0; i + 1 < rank; i++) gs_w_uint(c.w, strides[i]);
    for (unsigned i = 0; i < rank; i++) gs_w_uint(c.w, box[i]);
    for (unsigned i = 0; i < rank; i++) gs_w_uint(c.w, elem[i]);
    gs_w_uint(c.w, (unsigned)interleave);
    gs_w_uint(c.w, (unsigned)swizzle);
    gs_w_uint(c.w, (unsigned)l2);
    gs_w_uint(c.w, (unsigned)oob);
    return run_into_map(&c, map);
}

/* cuTensorMapReplaceAddress: the same driver changes the address inside the descriptor. */
GS_DRV CUresult gs_cuTensorMapReplaceAddress(void *map, void *addr) {
    if (!map) return CUDA_ERROR_INVALID_VALUE;
    int dev;
    CUresult r = gs_drv_enter(&dev);
    if (r) return r;
    gs_call c;
    gs_call_begin(&c, GS_OP_TENSOR_MAP_REPLACE_ADDRESS, 3);
    gs_w_int(c.w, dev);
    gs_w_uint(c.w, (uint64_t)(uintptr_t)addr);
    c.bulk = map;
    c.bulk_len = TENSOR_MAP_BYTES;
    return run_into_map(&c, map);
}
