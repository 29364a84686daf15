#include <cuda_fp16.h>
#include <cuda_bf16.h>
// Integer and float edge cases; results follow PTX semantics (shift clamping, division by zero, saturation).
extern "C" __global__ void intEdges(const int *a, const int *b, const unsigned *s, int *out, long long *out64,
                                    const long long *A, const long long *B) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int x = a[i], y = b[i];
    unsigned ux = x, uy = y, sh = s[i];
    int *o = out + 20 * i;
    o[0] = x << sh;
    o[1] = x >> sh;
    o[2] = ux >> sh;
    o[3] = __mulhi(x, y);
    o[4] = __umulhi(ux, uy);
    o[5] = x / y;
    o[6] = x % y;
    o[7] = ux / uy;
    o[8] = ux % uy;
    o[9] = __popc(ux);
    o[10] = __clz(x);
    o[11] = __brev(ux);
    o[12] = __ffs(x);
    o[13] = __byte_perm(ux, uy, sh);
    o[14] = __funnelshift_l(ux, uy, sh);
    o[15] = __funnelshift_r(ux, uy, sh);
    o[16] = __sad(x, y, 7u);
    o[17] = abs(x) + min(x, y) * 3 + max(ux, uy);
    int bf;
    asm("bfe.s32 %0, %1, %2, %3;" : "=r"(bf) : "r"(x), "r"(sh & 63), "r"((sh >> 3) & 63));
    o[18] = bf;
    asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(bf) : "r"(x), "r"(y), "r"(sh & 31), "r"((sh >> 2) & 31));
    o[19] = bf;
    long long X = A[i], Y = B[i];
    long long *q = out64 + 8 * i;
    q[0] = __mul64hi(X, Y);
    q[1] = (long long)__umul64hi((unsigned long long)X, (unsigned long long)Y);
    q[2] = X / Y;
    q[3] = X % Y;
    q[4] = (long long)((unsigned long long)X / (unsigned long long)Y);
    q[5] = X << (sh & 127);
    q[6] = X >> (sh & 127);
    q[7] = __clzll(X) + __popcll(X) * 100 + (long long)x * y;
}
extern "C" __global__ void floatEdges(const float *a, const float *b, int *out, float *fout) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = a[i], y = b[i];
    int *o = out + 12 * i;
    o[0] = x < y;
    o[1] = x <= y;
    o[2] = x > y;
    o[3] = x >= y;
    o[4] = x == y;
    o[5] = x != y;
    o[6] = (int)x;
    o[7] = (int)(unsigned)x;
    o[8] = __float2int_rn(x);
    o[9] = (int)(long long)x;
    o[10] = __float2int_rd(x) ^ __float2int_ru(y);
    o[11] = isnan(x) + 2 * isinf(y) + 4 * (!(x < y));
    float *f = fout + 8 * i;
    f[0] = __saturatef(x);
    f[1] = fminf(x, y);
    f[2] = fmaxf(x, y);
    f[3] = copysignf(x, y);
    f[4] = x / y;
    f[5] = sqrtf(fabsf(x));
    f[6] = (float)(double)x * 3.0f - y;
    f[7] = __int2float_rz(__float_as_int(x));
}
extern "C" __global__ void fmaExact(const float *a, const float *b, const float *c, float *d, const double *A,
                                    const double *B, const double *C, double *D, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        d[i] = fmaf(a[i], b[i], c[i]);
        D[i] = fma(A[i], B[i], C[i]);
    }
}
extern "C" __global__ void approxMath(const float *a, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i];
    float *o = out + 8 * i;
    o[0] = __sinf(x);
    o[1] = __cosf(x);
    o[2] = exp2f(x);
    o[3] = __log2f(fabsf(x) + 1.0f);
    o[4] = rsqrtf(fabsf(x) + 1.0f);
    o[5] = __fdividef(1.0f, x);
    o[6] = __expf(x);
    o[7] = __half2float(__float2half(x)) + __bfloat162float(__float2bfloat16(x)) * 0.0f;
}
