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
// sub-byte (s4) tensor-core matrices: the engine runs wmma on f16/bf16/tf32/f64/s8/u8 only
extern "C" __global__ void tensor(const int *a, const int *b, int *c) {
    wmma::fragment<wmma::matrix_a, 8, 8, 32, wmma::experimental::precision::s4, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 8, 8, 32, wmma::experimental::precision::s4, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 8, 8, 32, int> fc;
    wmma::fill_fragment(fc, 0);
    wmma::load_matrix_sync(fa, a, 32);
    wmma::load_matrix_sync(fb, b, 32);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 8, wmma::mem_row_major);
}
#endif
