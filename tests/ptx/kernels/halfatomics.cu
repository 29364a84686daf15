// atomicAdd on __half, __half2, __nv_bfloat16 and __nv_bfloat162: atom/red.add.noftz.{f16,f16x2,bf16,bf16x2}
#include <cuda_bf16.h>
#include <cuda_fp16.h>

extern "C" __global__ void halfAtomics(__half *h, __half2 *h2, __nv_bfloat16 *b, __nv_bfloat162 *b2,
                                       const float *v, unsigned short *old_h, unsigned short *old_b) {
    int i = threadIdx.x;
    old_h[i] = __half_as_ushort(atomicAdd(&h[i % 4], __float2half_rn(v[i])));
    atomicAdd(h2, __floats2half2_rn(v[i], -2.0f * v[i]));
    old_b[i] = __bfloat16_as_ushort(atomicAdd(&b[i % 2], __float2bfloat16_rn(v[i])));
    atomicAdd(b2, __floats2bfloat162_rn(v[i], 0.5f * v[i]));
}
