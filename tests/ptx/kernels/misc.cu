#include <cstdio>
#include <cassert>
__constant__ float c_coef[16];
__constant__ int c_init[4] = {3, 1, 4, 1};
__device__ int g_counter;
__device__ float g_table[8] = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f};
extern "C" __global__ void constPoly(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.f, p = 1.f;
    for (int k = 0; k < 16; ++k) { acc += c_coef[k] * p; p *= x[i]; }
    y[i] = acc + c_init[i & 3] + g_table[i & 7];
    atomicAdd(&g_counter, 1);
}
extern "C" __global__ void dynShared(const int *in, int *out, int n) {
    extern __shared__ int buf[];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    buf[t] = i < n ? in[i] : 0;
    __syncthreads();
    if (i < n) out[i] = buf[blockDim.x - 1 - t];
}
__device__ __noinline__ float helperSq(float a, int k) { float r = a; for (int j = 1; j < k; ++j) r *= a; return r; }
struct Pair { float a; int b; double c; };
__device__ __noinline__ Pair makePair(float x, int i) { Pair p; p.a = x * 2; p.b = i; p.c = x + 0.5; return p; }
__device__ __noinline__ double usePair(Pair p) { return p.a + p.b + p.c; }
extern "C" __global__ void devCalls(const float *x, double *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = helperSq(x[i], (i & 3) + 1) + usePair(makePair(x[i], i));
}
extern "C" __global__ void localArr(const int *in, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int a[24];
    for (int k = 0; k < 24; ++k) a[k] = in[i] * k + (k ^ i);
    int s = 0;
    for (int k = 0; k < 24; ++k) s += a[(k * 7 + in[i]) % 24] * (k + 1);
    out[i] = s;
}
extern "C" __global__ void printer(int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) printf("t%d b%d v=%d u=%u x=%x f=%.3f e=%e s=%s c=%c l=%lld %5d|%-4d|\n", threadIdx.x, blockIdx.x, i * 3 - 7,
                      (unsigned)(i - 2), i * 255, i * 0.25f, i * 1e10, "hey", 'A' + i, (long long)i << 40, i, i);
}
extern "C" __global__ void asserter(const int *in) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    assert(in[i] < 100);
}
extern "C" __global__ void trapper(const int *in) {
    if (in[threadIdx.x] == 7) __trap();
}
extern "C" __global__ void oob(int *p, int k) { p[threadIdx.x * k] = 1; }
extern "C" __global__ void misaligned(char *p) { *(int *)(p + 1 + threadIdx.x * 4) = 5; }
extern "C" __global__ void spin(volatile int *flag) { while (*flag == 0) {} }
extern "C" __global__ void divergent(const int *in, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int x = in[i], steps = 0;
    while (x != 1 && steps < 1000) { x = (x & 1) ? 3 * x + 1 : x >> 1; ++steps; }
    if (steps & 1) { for (int k = 0; k < (i & 7); ++k) steps += k * x; } else { steps = -steps; }
    out[i] = steps;
}
extern "C" __global__ void __launch_bounds__(128) bounded(int *p) { p[threadIdx.x] = threadIdx.x; }
