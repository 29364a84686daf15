// Tensor cores: wmma GEMMs for f16 (f32 and f16 accumulate), bf16, tf32, f64 and s8, and a CUTLASS-style
// mma.sync + ldmatrix kernel (inline PTX). Built with -arch=sm_80 (the Makefile) because mma.m16n8k16, tf32,
// bf16 and f64 tensor-core instructions need sm_80. Each result is compared bit for bit with a host reference of
// the arithmetic gpushim documents (gpushim/ptx/ops_mma.py: exact products summed in double in order of k, one
// rounding to float per mma, then to half for a half accumulator; f64: one fma per k; integers exact).
// Prints "name=ok" per check (or "name=MISMATCH" and the first difference); usage: tensor_cores [part].
#include <cstdint>
#include <cmath>
#include <cstring>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <random>
#include <string>
#include <vector>

#include "common.h"

using namespace nvcuda;

static const int M = 64, N = 64, K = 64;
static std::mt19937 rng(1234);
static int bad = 0;

static void report(const char *name, size_t errors, double got, double want) {
    std::printf("%s=%s\n", name, errors ? "MISMATCH" : "ok");
    if (errors) {
        std::printf("%s_errors=%zu first: got %.17g want %.17g\n", name, errors, got, want);
        bad = 1;
    }
}

// ---- wmma: one warp per output tile, K walked in steps of the shape's k --------------------------------------
template <int TM, int TN, int TK, typename TA, typename FA, typename TC, bool TF32CVT>
__global__ void wmma_gemm(const TA *a, const TA *b, TC *c) {  // A row-major MxK, B col-major KxN, C row-major
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int tm = warp / (N / TN), tn = warp % (N / TN);
    wmma::fragment<wmma::matrix_a, TM, TN, TK, FA, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, TM, TN, TK, FA, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, TM, TN, TK, TC> fc;
    TC *cp = c + tm * TM * N + tn * TN;
    wmma::load_matrix_sync(fc, cp, N, wmma::mem_row_major);
    for (int k = 0; k < K; k += TK) {
        wmma::load_matrix_sync(fa, a + tm * TM * K + k, K);
        wmma::load_matrix_sync(fb, b + tn * TN * K + k, K);
        if (TF32CVT) {
            for (int i = 0; i < fa.num_elements; i++) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
            for (int i = 0; i < fb.num_elements; i++) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
        }
        wmma::mma_sync(fc, fa, fb, fc);
    }
    wmma::store_matrix_sync(cp, fc, N, wmma::mem_row_major);
}

template <typename T> static double val(T x) { return (double)x; }
template <> double val(__half x) { return (double)__half2float(x); }
template <> double val(__nv_bfloat16 x) { return (double)__bfloat162float(x); }

static float tf32_rna(float x) {  // cvt.rna.tf32.f32 (finite inputs)
    uint32_t u;
    std::memcpy(&u, &x, 4);
    u = (u + 0x1000u) & 0xFFFFE000u;
    std::memcpy(&x, &u, 4);
    return x;
}

// reference: per mma step of tk, d = round(c + sum_k a*b) with the sum in double in order of k
template <typename TA, typename TC>
static std::vector<TC> ref_gemm(const std::vector<TA> &a, const std::vector<TA> &b, std::vector<TC> c, int tk,
                                bool tf32) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            TC acc = c[i * N + j];
            for (int k0 = 0; k0 < K; k0 += tk) {
                if constexpr (std::is_same<TC, double>::value) {
                    double d = acc;
                    for (int k = k0; k < k0 + tk; k++) d = std::fma(a[i * K + k], b[j * K + k], d);
                    acc = d;
                } else if constexpr (std::is_same<TC, int>::value) {
                    long long s = acc;
                    for (int k = k0; k < k0 + tk; k++) s += (long long)a[i * K + k] * b[j * K + k];
                    acc = (int)(uint32_t)(unsigned long long)s;
                } else {
                    double s = val(acc);
                    for (int k = k0; k < k0 + tk; k++) {
                        double x = val(a[i * K + k]), y = val(b[j * K + k]);
                        if (tf32) { x = tf32_rna((float)x); y = tf32_rna((float)y); }
                        s += x * y;
                    }
                    if constexpr (std::is_same<TC, __half>::value) acc = __float2half_rn((float)s);
                    else acc = (float)s;
                }
            }
            c[i * N + j] = acc;
        }
    return c;
}

template <typename T> static T rnd_elem() {
    std::normal_distribution<float> nd(0.f, 1.f);
    if constexpr (std::is_same<T, __half>::value) return __float2half(nd(rng));
    else if constexpr (std::is_same<T, __nv_bfloat16>::value) return __float2bfloat16(nd(rng));
    else if constexpr (std::is_same<T, signed char>::value) return (signed char)(int)(rng() % 256 - 128);
    else if constexpr (std::is_same<T, int>::value) return (int)rng();
    else return (T)nd(rng);
}

template <typename T> static std::vector<T> rnd_vec(size_t n) {
    std::vector<T> v(n);
    for (auto &x : v) x = rnd_elem<T>();
    return v;
}

template <int TM, int TN, int TK, typename TA, typename FA, typename TC, bool TF32CVT = false>
static void run_wmma(const char *name) {
    auto a = rnd_vec<TA>(M * K), b = rnd_vec<TA>(N * K);
    auto c = rnd_vec<TC>(M * N);
    TA *da, *db;
    TC *dc;
    CHECK(cudaMalloc(&da, a.size() * sizeof(TA)));
    CHECK(cudaMalloc(&db, b.size() * sizeof(TA)));
    CHECK(cudaMalloc(&dc, c.size() * sizeof(TC)));
    CHECK(cudaMemcpy(da, a.data(), a.size() * sizeof(TA), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b.data(), b.size() * sizeof(TA), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dc, c.data(), c.size() * sizeof(TC), cudaMemcpyHostToDevice));
    int warps = (M / TM) * (N / TN);
    wmma_gemm<TM, TN, TK, TA, FA, TC, TF32CVT><<<warps / 4, 128>>>(da, db, dc);
    CHECK(cudaGetLastError());
    std::vector<TC> got(c.size());
    CHECK(cudaMemcpy(got.data(), dc, got.size() * sizeof(TC), cudaMemcpyDeviceToHost));
    auto want = ref_gemm(a, b, c, TK, TF32CVT);
    size_t errors = 0, first = 0;
    for (size_t i = 0; i < got.size(); i++)
        if (std::memcmp(&got[i], &want[i], sizeof(TC)) != 0 && !errors++) first = i;
    report(name, errors, val(got[first]), val(want[first]));
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
}

// ---- mma.sync + ldmatrix: each warp computes a 16x8 tile of C = A B (f16 in, f32 accumulate) ------------------
__global__ void mma_ldmatrix_gemm(const __half *a, const __half *b, float *c) {  // A MxK, B KxN row-major
    __shared__ __align__(16) __half sa[4][16 * 16];
    __shared__ __align__(16) __half sb[4][16 * 8];
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    int warp = blockIdx.x * 4 + w;
    int tm = warp / (N / 8), tn = warp % (N / 8);
    float d[4] = {0, 0, 0, 0};
    for (int k = 0; k < K; k += 16) {
        for (int i = lane; i < 256; i += 32) sa[w][i] = a[(tm * 16 + i / 16) * K + k + i % 16];
        for (int i = lane; i < 128; i += 32) sb[w][i] = b[(k + i / 8) * N + tn * 8 + i % 8];
        __syncwarp();
        uint32_t ra[4], rb[2];
        // A: four 8x8 matrices (rows 0-7/8-15 x cols 0-7/8-15); lane l gives row l%16 at column 8*(l/16)
        uint32_t pa = (uint32_t)__cvta_generic_to_shared(&sa[w][(lane % 16) * 16 + (lane / 16) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(ra[0]), "=r"(ra[1]), "=r"(ra[2]), "=r"(ra[3]) : "r"(pa));
        // B (k-major rows): two 8x8 matrices transposed into the column fragment; lanes 0-15 give rows k=0..15
        uint32_t pb = (uint32_t)__cvta_generic_to_shared(&sb[w][(lane % 16) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                     : "=r"(rb[0]), "=r"(rb[1]) : "r"(pb));
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
        __syncwarp();
    }
    int g = lane / 4, t = lane % 4;  // PTX ISA, "Matrix Fragments for mma.m16n8k16": C/D rows g and g+8
    float *cp = c + (tm * 16) * N + tn * 8;
    cp[g * N + 2 * t] = d[0];
    cp[g * N + 2 * t + 1] = d[1];
    cp[(g + 8) * N + 2 * t] = d[2];
    cp[(g + 8) * N + 2 * t + 1] = d[3];
}

static void run_mma_ldmatrix() {
    auto a = rnd_vec<__half>(M * K), b = rnd_vec<__half>(K * N);
    __half *da, *db;
    float *dc;
    CHECK(cudaMalloc(&da, M * K * 2));
    CHECK(cudaMalloc(&db, K * N * 2));
    CHECK(cudaMalloc(&dc, M * N * 4));
    CHECK(cudaMemcpy(da, a.data(), M * K * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b.data(), K * N * 2, cudaMemcpyHostToDevice));
    mma_ldmatrix_gemm<<<(M / 16) * (N / 8) / 4, 128>>>(da, db, dc);
    CHECK(cudaGetLastError());
    std::vector<float> got(M * N);
    CHECK(cudaMemcpy(got.data(), dc, M * N * 4, cudaMemcpyDeviceToHost));
    std::vector<__half> bt(N * K);  // the reference takes B column-major
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++) bt[j * K + k] = b[k * N + j];
    auto want = ref_gemm(a, bt, std::vector<float>(M * N, 0.f), 16, false);
    size_t errors = 0, first = 0;
    for (size_t i = 0; i < got.size(); i++)
        if (std::memcmp(&got[i], &want[i], 4) != 0 && !errors++) first = i;
    report("mma_ldmatrix", errors, got[first], want[first]);
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
}

// A wmma in a partial warp (16 threads): undefined in CUDA ("all threads in the warp must execute the same
// wmma"); the emulator fails the launch with cudaErrorIllegalInstruction, a sticky error. Run it alone.
__global__ void wmma_partial_warp(const __half *a, float *c) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, a, 16);
    wmma::fill_fragment(fc, 0.0f);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

static void run_partial_warp() {
    __half *da;
    float *dc;
    CHECK(cudaMalloc(&da, 256 * 2));
    CHECK(cudaMalloc(&dc, 256 * 4));
    CHECK(cudaMemset(da, 0, 256 * 2));
    wmma_partial_warp<<<1, 16>>>(da, dc);
    cudaError_t e = cudaDeviceSynchronize();
    std::printf("partial_warp_error=%s\n", cudaGetErrorName(e));
    std::printf("partial_warp=%s\n", e == cudaErrorIllegalInstruction ? "ok" : "MISMATCH");
    if (e != cudaErrorIllegalInstruction) bad = 1;
}

int main(int argc, char **argv) {
    std::string part = argc > 1 ? argv[1] : "all";
    bool all = part == "all";
    if (all || part == "f16") {
        run_wmma<16, 16, 16, __half, __half, float>("wmma_f16_f32");
        run_wmma<32, 8, 16, __half, __half, __half>("wmma_f16_f16");
    }
    if (all || part == "bf16") run_wmma<8, 32, 16, __nv_bfloat16, __nv_bfloat16, float>("wmma_bf16");
    if (all || part == "tf32") run_wmma<16, 16, 8, float, wmma::precision::tf32, float, true>("wmma_tf32");
    if (all || part == "f64") run_wmma<8, 8, 4, double, double, double>("wmma_f64");
    if (all || part == "s8") run_wmma<16, 16, 16, signed char, signed char, int>("wmma_s8");
    if (all || part == "mma") run_mma_ldmatrix();
    if (part == "partial") {
        run_partial_warp();
        return bad;
    }
    CHECK(cudaDeviceSynchronize());
    return bad;
}
