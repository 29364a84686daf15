// wmma GEMMs for the tensor-core tests (tests/ptx/test_mma_wmma.py): C[MxN] = A[MxK] * B[KxN] (+ C), one warp
// per 16x16 (or shape) output tile, K walked in steps of the shape's k. A is row-major (lda = K) or
// column-major (lda = M); B row- or column-major likewise; C/D row- or column-major with ldc.
#include <mma.h>
#include <cuda_bf16.h>
using namespace nvcuda;

template <typename TA, bool TF32> struct FragT { using type = TA; };
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
template <typename TA> struct FragT<TA, true> { using type = wmma::precision::tf32; };
#define TF32_CVT(x) wmma::__float_to_tf32(x)
#else
#define TF32_CVT(x) (x)
#endif

template <int TM, int TN, int TK, typename TA, typename TC, typename LA, typename LB, bool TF32 = false, bool CVT = false>
__device__ void gemm(const TA* a, const TA* b, TC* c, int M, int N, int K, int loadc, int colc, int sat) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int tilesN = N / TN;
  int tm = warp / tilesN, tn = warp % tilesN;
  if (tm * TM >= M) return;
  const bool arow = std::is_same<LA, wmma::row_major>::value, brow = std::is_same<LB, wmma::row_major>::value;
  using FA = typename FragT<TA, TF32>::type;
  wmma::fragment<wmma::matrix_a, TM, TN, TK, FA, LA> fa;
  wmma::fragment<wmma::matrix_b, TM, TN, TK, FA, LB> fb;
  wmma::fragment<wmma::accumulator, TM, TN, TK, TC> fc;
  wmma::layout_t lc = colc ? wmma::mem_col_major : wmma::mem_row_major;
  int ldc = colc ? M : N;
  TC* cp = c + (colc ? (tn * TN) * M + tm * TM : (tm * TM) * N + tn * TN);
  if (loadc) wmma::load_matrix_sync(fc, cp, ldc, lc);
  else wmma::fill_fragment(fc, (TC)0);
  for (int k = 0; k < K; k += TK) {
    const TA* ap = arow ? a + (tm * TM) * K + k : a + k * M + tm * TM;
    const TA* bp = brow ? b + k * N + tn * TN : b + (tn * TN) * K + k;
    wmma::load_matrix_sync(fa, ap, arow ? K : M);
    wmma::load_matrix_sync(fb, bp, brow ? N : K);
    if constexpr (CVT) {
      for (int i = 0; i < fa.num_elements; i++) fa.x[i] = TF32_CVT(fa.x[i]);
      for (int i = 0; i < fb.num_elements; i++) fb.x[i] = TF32_CVT(fb.x[i]);
    }
    if constexpr (std::is_same<TC, int>::value) {
      if (sat) wmma::mma_sync(fc, fa, fb, fc, true);
      else wmma::mma_sync(fc, fa, fb, fc, false);
    } else {
      wmma::mma_sync(fc, fa, fb, fc);
    }
  }
  wmma::store_matrix_sync(cp, fc, ldc, lc);
}

#define RR wmma::row_major, wmma::row_major
#define RC wmma::row_major, wmma::col_major
#define CR wmma::col_major, wmma::row_major
#define ARGS(TA, TC) const TA* a, const TA* b, TC* c, int M, int N, int K, int loadc, int colc, int sat
#define CALL a, b, c, M, N, K, loadc, colc, sat
extern "C" {
__global__ void h16_rc_f32(ARGS(half, float)) { gemm<16, 16, 16, half, float, RC>(CALL); }
__global__ void h16_rr_f16(ARGS(half, half)) { gemm<16, 16, 16, half, half, RR>(CALL); }
__global__ void h32x8_cr_f32(ARGS(half, float)) { gemm<32, 8, 16, half, float, CR>(CALL); }
__global__ void h8x32_rc_f16(ARGS(half, half)) { gemm<8, 32, 16, half, half, RC>(CALL); }
#if __CUDA_ARCH__ >= 800  // bf16, tf32 and f64 wmma need sm_80 (the file also builds for sm_70/sm_75)
__global__ void bf16_rc(ARGS(__nv_bfloat16, float)) { gemm<16, 16, 16, __nv_bfloat16, float, RC>(CALL); }
__global__ void bf32x8_rr(ARGS(__nv_bfloat16, float)) { gemm<32, 8, 16, __nv_bfloat16, float, RR>(CALL); }
__global__ void bf8x32_cr(ARGS(__nv_bfloat16, float)) { gemm<8, 32, 16, __nv_bfloat16, float, CR>(CALL); }
__global__ void tf32_rc(ARGS(float, float)) { gemm<16, 16, 8, float, float, RC, true, true>(CALL); }
__global__ void tf32_raw_cr(ARGS(float, float)) { gemm<16, 16, 8, float, float, CR, true, false>(CALL); }
__global__ void f64_rr(ARGS(double, double)) { gemm<8, 8, 4, double, double, RR>(CALL); }
__global__ void f64_cr(ARGS(double, double)) { gemm<8, 8, 4, double, double, CR>(CALL); }
#endif
#if __CUDA_ARCH__ >= 720  // integer wmma needs sm_72
__global__ void s8_rc(ARGS(signed char, int)) { gemm<16, 16, 16, signed char, int, RC>(CALL); }
__global__ void u8_32x8_rr(ARGS(unsigned char, int)) { gemm<32, 8, 16, unsigned char, int, RR>(CALL); }
__global__ void s8_8x32_cr(ARGS(signed char, int)) { gemm<8, 32, 16, signed char, int, CR>(CALL); }
#endif

// element-wise access to fragments: scale an accumulator by alpha, add a constant to A (f16), shared staging
__global__ void frag_elementwise(const half* a, const half* b, float* c, float alpha) {
  __shared__ half sa[16 * 16];
  for (int i = threadIdx.x; i < 256; i += 32) sa[i] = a[i];
  __syncwarp();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::load_matrix_sync(fa, sa, 16);
  wmma::load_matrix_sync(fb, b, 16);
  for (int i = 0; i < fa.num_elements; i++) fa.x[i] = __hadd(fa.x[i], __float2half(1.0f));
  wmma::fill_fragment(fc, 0.5f);
  wmma::mma_sync(fc, fa, fb, fc);
  for (int i = 0; i < fc.num_elements; i++) fc.x[i] *= alpha;
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

// a wmma in half a warp: undefined in CUDA, an error here
__global__ void partial_warp(const half* a, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  if (threadIdx.x < 16) {
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, a, 16);
    wmma::fill_fragment(fc, 0.0f);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
  }
}
}

// sub-byte wmma (sm_75: wmma::experimental): s4/u4 m8n8k32 and b1 m8n8k128 (XOR; AND needs sm_80). A row-major
// MxK and B column-major (N rows of K) packed little-endian (element 0 in the lowest bits), C row-major ints.
#if __CUDA_ARCH__ >= 750
namespace wx = nvcuda::wmma::experimental;
template <typename P, int TK, int BITS, int OP>
__device__ void gemm_sub(const char* a, const char* b, int* c, int M, int N, int K) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int tm = warp / (N / 8), tn = warp % (N / 8);
  if (tm * 8 >= M) return;
  wmma::fragment<wmma::matrix_a, 8, 8, TK, P, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 8, 8, TK, P, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 8, 8, TK, int> fc;
  wmma::load_matrix_sync(fc, c + tm * 8 * N + tn * 8, N, wmma::mem_row_major);
  for (int k = 0; k < K; k += TK) {
    wmma::load_matrix_sync(fa, a + ((size_t)tm * 8 * K + k) * BITS / 8, K);
    wmma::load_matrix_sync(fb, b + ((size_t)tn * 8 * K + k) * BITS / 8, K);
    if constexpr (OP == 0) wmma::mma_sync(fc, fa, fb, fc);
#if __CUDA_ARCH__ >= 800
    else if constexpr (OP == 2) wmma::bmma_sync(fc, fa, fb, fc, wx::bmmaBitOpAND);
#endif
    else wmma::bmma_sync(fc, fa, fb, fc, wx::bmmaBitOpXOR);
  }
  wmma::store_matrix_sync(c + tm * 8 * N + tn * 8, fc, N, wmma::mem_row_major);
}
extern "C" __global__ void s4_gemm(const char* a, const char* b, int* c, int M, int N, int K) {
  gemm_sub<wx::precision::s4, 32, 4, 0>(a, b, c, M, N, K);
}
extern "C" __global__ void u4_gemm(const char* a, const char* b, int* c, int M, int N, int K) {
  gemm_sub<wx::precision::u4, 32, 4, 0>(a, b, c, M, N, K);
}
extern "C" __global__ void b1_xor_gemm(const char* a, const char* b, int* c, int M, int N, int K) {
  gemm_sub<wx::precision::b1, 128, 1, 1>(a, b, c, M, N, K);
}
#if __CUDA_ARCH__ >= 800
extern "C" __global__ void b1_and_gemm(const char* a, const char* b, int* c, int M, int N, int K) {
  gemm_sub<wx::precision::b1, 128, 1, 2>(a, b, c, M, N, K);
}
#endif
#endif
