#include <cuda_fp16.h>
#include <cuda_bf16.h>
// Half-precision arithmetic through cuda_fp16 / cuda_bf16 intrinsics.
extern "C" __global__ void halfOps(const __half *a, const __half *b, const __half *c, __half *out, int *cmp) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    __half x = a[i], y = b[i], z = c[i];
    __half *o = out + 8 * i;
    o[0] = __hadd(x, y); o[1] = __hsub(x, y); o[2] = __hmul(x, y); o[3] = __hfma(x, y, z);
    o[4] = __hneg(x); o[5] = __habs(y); o[6] = __hmin(x, y); o[7] = __hfma_sat(x, y, z);
    cmp[2 * i] = __hlt(x, y) + 2 * __hge(x, z) + 4 * __hne(y, z);
    __half2 p = __halves2half2(x, y), q = __halves2half2(z, x);
    __half2 r = __hfma2(p, q, p);
    cmp[2 * i + 1] = *(int *)&r;
}
extern "C" __global__ void bf16Ops(const __nv_bfloat16 *a, const __nv_bfloat16 *b, __nv_bfloat16 *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    __nv_bfloat16 x = a[i], y = b[i];
    __nv_bfloat16 *o = out + 4 * i;
    o[0] = __hadd(x, y); o[1] = __hmul(x, y); o[2] = __hfma(x, y, x); o[3] = __hmax(x, y);
}
