#if CASE == 1
// formatted surface stores (sust.p) are not supported (textures and unformatted surfaces are)
extern "C" __global__ void texKernel(cudaSurfaceObject_t s, float *out) {
    asm volatile("sust.p.1d.v4.b32.trap [%0, {%1}], {%2, %2, %2, %2};" :: "l"(s), "r"((int)threadIdx.x), "r"(1));
    out[threadIdx.x] = 0;
}
#elif CASE == 2
__device__ __noinline__ int walk(const int *t, int n) { return n <= 0 ? 0 : t[n] + walk(t, t[n] % n) + walk(t, n / 2); }
extern "C" __global__ void recursive(const int *t, int *out) { out[threadIdx.x] = walk(t, threadIdx.x); }
#elif CASE == 3
__device__ int twice(int x) { return 2 * x; }
__device__ int thrice(int x) { return 3 * x; }
typedef int (*fn_t)(int);
__device__ fn_t table[2] = {twice, thrice};
extern "C" __global__ void indirect(int *out, int k) { out[threadIdx.x] = table[k & 1](threadIdx.x); }
#elif CASE == 4
#include <mma.h>
using namespace nvcuda;
// .satfinite on a floating-point wmma (deprecated; CUDA 13's mma.h no longer emits it): its clamping is not
// implemented, so the kernel is refused at load
extern "C" __global__ void tensor(const unsigned *a, unsigned *c) {
    unsigned r[8], d[4];
    for (int i = 0; i < 8; i++) r[i] = a[i];
    asm volatile("wmma.mma.sync.aligned.row.col.m16n16k16.f16.f16.satfinite {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7,%8,%9,%10,%11}, {%4,%5,%6,%7,%8,%9,%10,%11}, {%4,%5,%6,%7};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "r"(r[4]), "r"(r[5]), "r"(r[6]), "r"(r[7]));
    for (int i = 0; i < 4; i++) c[i] = d[i];
}
#endif
