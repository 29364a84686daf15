// mma.sync / ldmatrix / stmatrix / movmatrix through inline asm, for tests/ptx/test_mma_sync.py. Each warp's
// lanes load their fragment registers as raw words from global memory (the test packs them per the PTX ISA's
// fragment layouts), run one instruction, and write the destination registers back as raw words.
#include <cstdint>

#define LANE (threadIdx.x & 31)
#define TH (blockIdx.x * blockDim.x + threadIdx.x)

template <int N, typename T>
struct R { T v[N]; };

template <int N, typename T>
__device__ R<N, T> get(const T* p) {
  R<N, T> r;
  for (int i = 0; i < N; i++) r.v[i] = p[TH * N + i];
  return r;
}
template <int N, typename T>
__device__ void put(T* p, const R<N, T>& r) {
  for (int i = 0; i < N; i++) p[TH * N + i] = r.v[i];
}

#define MMA_4_2_4_4(NAME, OP)                                                                                     \
  extern "C" __global__ void NAME(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* d) {         \
    auto A = get<4>(a); auto B = get<2>(b); auto C = get<4>(c); R<4, uint32_t> D;                                  \
    asm volatile(OP " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"                                   \
                 : "=r"(D.v[0]), "=r"(D.v[1]), "=r"(D.v[2]), "=r"(D.v[3])                                         \
                 : "r"(A.v[0]), "r"(A.v[1]), "r"(A.v[2]), "r"(A.v[3]), "r"(B.v[0]), "r"(B.v[1]),                  \
                   "r"(C.v[0]), "r"(C.v[1]), "r"(C.v[2]), "r"(C.v[3]));                                            \
    put(d, D);                                                                                                    \
  }
#define MMA_2_1_4_4(NAME, OP)                                                                                     \
  extern "C" __global__ void NAME(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* d) {         \
    auto A = get<2>(a); auto B = get<1>(b); auto C = get<4>(c); R<4, uint32_t> D;                                  \
    asm volatile(OP " {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};"                                               \
                 : "=r"(D.v[0]), "=r"(D.v[1]), "=r"(D.v[2]), "=r"(D.v[3])                                         \
                 : "r"(A.v[0]), "r"(A.v[1]), "r"(B.v[0]), "r"(C.v[0]), "r"(C.v[1]), "r"(C.v[2]), "r"(C.v[3]));    \
    put(d, D);                                                                                                    \
  }

// f16/bf16 m16n8k16 -> f32 (A 4 regs, B 2, C/D 4 f32 as raw words)
MMA_4_2_4_4(m16n8k16_f32_f16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
MMA_4_2_4_4(m16n8k16_f32_bf16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
MMA_4_2_4_4(m16n8k8_f32_tf32, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")
MMA_4_2_4_4(m16n8k32_s32_s8, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32")
MMA_4_2_4_4(m16n8k32_s32_u8s8_sat, "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.s8.s32")
MMA_2_1_4_4(m16n8k8_f32_f16, "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32")
MMA_2_1_4_4(m16n8k8_f32_bf16, "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32")
MMA_2_1_4_4(m16n8k4_f32_tf32, "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32")
MMA_2_1_4_4(m16n8k16_s32_s8, "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32")

// f16 accumulate m16n8k16: C/D 2 f16x2 registers
extern "C" __global__ void m16n8k16_f16_f16(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* d) {
  auto A = get<4>(a); auto B = get<2>(b); auto C = get<2>(c); R<2, uint32_t> D;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%8,%9};"
               : "=r"(D.v[0]), "=r"(D.v[1])
               : "r"(A.v[0]), "r"(A.v[1]), "r"(A.v[2]), "r"(A.v[3]), "r"(B.v[0]), "r"(B.v[1]), "r"(C.v[0]), "r"(C.v[1]));
  put(d, D);
}
// m8n8k16 u8: A 1, B 1, C/D 2
extern "C" __global__ void m8n8k16_s32_u8(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* d) {
  auto A = get<1>(a); auto B = get<1>(b); auto C = get<2>(c); R<2, uint32_t> D;
  asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.u8.u8.s32 {%0,%1}, {%2}, {%3}, {%4,%5};"
               : "=r"(D.v[0]), "=r"(D.v[1]) : "r"(A.v[0]), "r"(B.v[0]), "r"(C.v[0]), "r"(C.v[1]));
  put(d, D);
}
// f64 m8n8k4: A 1, B 1, C/D 2 doubles; every rounding modifier
#define MMA_F64(NAME, RND)                                                                                      \
  extern "C" __global__ void NAME(const double* a, const double* b, const double* c, double* d) {             \
    auto A = get<1>(a); auto B = get<1>(b); auto C = get<2>(c); R<2, double> D;                                \
    asm volatile("mma.sync.aligned.m8n8k4.row.col" RND ".f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%4,%5};"         \
                 : "=d"(D.v[0]), "=d"(D.v[1]) : "d"(A.v[0]), "d"(B.v[0]), "d"(C.v[0]), "d"(C.v[1]));          \
    put(d, D);                                                                                                  \
  }
MMA_F64(m8n8k4_f64, "")
MMA_F64(m8n8k4_f64_rz, ".rz")
MMA_F64(m8n8k4_f64_rm, ".rm")
MMA_F64(m8n8k4_f64_rp, ".rp")

// Volta's mma.m8n8k4 with f16 sources: four independent 8x8x4 products per warp (quad pairs)
extern "C" __global__ void v884_rc_f32(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* d) {
  auto A = get<2>(a); auto B = get<2>(b); auto C = get<8>(c); R<8, uint32_t> D;
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9}, {%10,%11}, "
               "{%12,%13,%14,%15,%16,%17,%18,%19};"
               : "=r"(D.v[0]), "=r"(D.v[1]), "=r"(D.v[2]), "=r"(D.v[3]), "=r"(D.v[4]), "=r"(D.v[5]), "=r"(D.v[6]),
                 "=r"(D.v[7])
               : "r"(A.v[0]), "r"(A.v[1]), "r"(B.v[0]), "r"(B.v[1]), "r"(C.v[0]), "r"(C.v[1]), "r"(C.v[2]),
                 "r"(C.v[3]), "r"(C.v[4]), "r"(C.v[5]), "r"(C.v[6]), "r"(C.v[7]));
  put(d, D);
}
extern "C" __global__ void v884_cr_f16(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* d) {
  auto A = get<2>(a); auto B = get<2>(b); auto C = get<4>(c); R<4, uint32_t> D;
  asm volatile("mma.sync.aligned.m8n8k4.col.row.f16.f16.f16.f16 {%0,%1,%2,%3}, {%4,%5}, {%6,%7}, {%8,%9,%10,%11};"
               : "=r"(D.v[0]), "=r"(D.v[1]), "=r"(D.v[2]), "=r"(D.v[3])
               : "r"(A.v[0]), "r"(A.v[1]), "r"(B.v[0]), "r"(B.v[1]), "r"(C.v[0]), "r"(C.v[1]), "r"(C.v[2]), "r"(C.v[3]));
  put(d, D);
}
extern "C" __global__ void v884_rr_f32_f16c(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* d) {
  auto A = get<2>(a); auto B = get<2>(b); auto C = get<4>(c); R<8, uint32_t> D;
  asm volatile("mma.sync.aligned.m8n8k4.row.row.f32.f16.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9}, {%10,%11}, "
               "{%12,%13,%14,%15};"
               : "=r"(D.v[0]), "=r"(D.v[1]), "=r"(D.v[2]), "=r"(D.v[3]), "=r"(D.v[4]), "=r"(D.v[5]), "=r"(D.v[6]),
                 "=r"(D.v[7])
               : "r"(A.v[0]), "r"(A.v[1]), "r"(B.v[0]), "r"(B.v[1]), "r"(C.v[0]), "r"(C.v[1]), "r"(C.v[2]), "r"(C.v[3]));
  put(d, D);
}

#if __CUDA_ARCH__ >= 900
// sm_90's f64 shapes m16n8k4 / m16n8k8 / m16n8k16 (C and D: 4 doubles)
extern "C" __global__ void m16n8k4_f64(const double* a, const double* b, const double* c, double* d) {
  auto A = get<2>(a); auto B = get<1>(b); auto C = get<4>(c); R<4, double> D;
  asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};"
               : "=d"(D.v[0]), "=d"(D.v[1]), "=d"(D.v[2]), "=d"(D.v[3])
               : "d"(A.v[0]), "d"(A.v[1]), "d"(B.v[0]), "d"(C.v[0]), "d"(C.v[1]), "d"(C.v[2]), "d"(C.v[3]));
  put(d, D);
}
extern "C" __global__ void m16n8k8_f64(const double* a, const double* b, const double* c, double* d) {
  auto A = get<4>(a); auto B = get<2>(b); auto C = get<4>(c); R<4, double> D;
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%10,%11,%12,%13};"
               : "=d"(D.v[0]), "=d"(D.v[1]), "=d"(D.v[2]), "=d"(D.v[3])
               : "d"(A.v[0]), "d"(A.v[1]), "d"(A.v[2]), "d"(A.v[3]), "d"(B.v[0]), "d"(B.v[1]), "d"(C.v[0]),
                 "d"(C.v[1]), "d"(C.v[2]), "d"(C.v[3]));
  put(d, D);
}
extern "C" __global__ void m16n8k16_f64(const double* a, const double* b, const double* c, double* d) {
  auto A = get<8>(a); auto B = get<4>(b); auto C = get<4>(c); R<4, double> D;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, "
               "{%12,%13,%14,%15}, {%16,%17,%18,%19};"
               : "=d"(D.v[0]), "=d"(D.v[1]), "=d"(D.v[2]), "=d"(D.v[3])
               : "d"(A.v[0]), "d"(A.v[1]), "d"(A.v[2]), "d"(A.v[3]), "d"(A.v[4]), "d"(A.v[5]), "d"(A.v[6]),
                 "d"(A.v[7]), "d"(B.v[0]), "d"(B.v[1]), "d"(B.v[2]), "d"(B.v[3]), "d"(C.v[0]), "d"(C.v[1]),
                 "d"(C.v[2]), "d"(C.v[3]));
  put(d, D);
}
#endif

#if __CUDA_ARCH__ >= 890
// fp8 (sm_89): e4m3/e5m2 sources, the 8-bit layouts of mma.m16n8k32 / m16n8k16
MMA_4_2_4_4(m16n8k32_f32_e4m3e5m2, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32")
extern "C" __global__ void m16n8k16_f16_e5m2(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* d) {
  auto A = get<2>(a); auto B = get<1>(b); auto C = get<2>(c); R<2, uint32_t> D;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.e5m2.e5m2.f16 {%0,%1}, {%2,%3}, {%4}, {%5,%6};"
               : "=r"(D.v[0]), "=r"(D.v[1]) : "r"(A.v[0]), "r"(A.v[1]), "r"(B.v[0]), "r"(C.v[0]), "r"(C.v[1]));
  put(d, D);
}
#endif

// sub-byte integers: s4/u4 (m8n8k32, m16n8k32, m16n8k64) and b1 (m8n8k128, m16n8k128, m16n8k256)
#define MMA_1_1_2_2(NAME, OP)                                                                                     \
  extern "C" __global__ void NAME(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* d) {         \
    auto A = get<1>(a); auto B = get<1>(b); auto C = get<2>(c); R<2, uint32_t> D;                                  \
    asm volatile(OP " {%0,%1}, {%2}, {%3}, {%4,%5};"                                                               \
                 : "=r"(D.v[0]), "=r"(D.v[1]) : "r"(A.v[0]), "r"(B.v[0]), "r"(C.v[0]), "r"(C.v[1]));               \
    put(d, D);                                                                                                    \
  }
MMA_1_1_2_2(m8n8k32_s4, "mma.sync.aligned.m8n8k32.row.col.s32.s4.s4.s32")
MMA_2_1_4_4(m16n8k32_u4s4_sat, "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u4.s4.s32")
MMA_4_2_4_4(m16n8k64_s4, "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32")
MMA_1_1_2_2(m8n8k128_b1_xor, "mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor.popc")
MMA_2_1_4_4(m16n8k128_b1_and, "mma.sync.aligned.m16n8k128.row.col.s32.b1.b1.s32.and.popc")
MMA_4_2_4_4(m16n8k256_b1_xor, "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc")

// ldmatrix: each warp stages nmat 8x8 b16 matrices (rows padded to `pitch` halves) in shared memory; lane l
// gives the address of row l%8 of matrix l/8.
template <int X, bool T>
__device__ void ldm(const uint16_t* src, uint32_t* out, int pitch) {
  __shared__ uint16_t s[4][4 * 8 * 24];
  int w = threadIdx.x / 32;
  for (int i = LANE; i < X * 8 * pitch; i += 32) s[w][i] = src[(blockIdx.x * 4 + w) * X * 8 * pitch + i];
  __syncwarp();
  int l = X == 1 ? LANE % 8 : X == 2 ? LANE % 16 : LANE;
  uint32_t p = (uint32_t)__cvta_generic_to_shared(&s[w][l * pitch]);
  R<X, uint32_t> r;
  if constexpr (X == 1) {
    if (T) asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];" : "=r"(r.v[0]) : "r"(p));
    else asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r.v[0]) : "r"(p));
  } else if constexpr (X == 2) {
    if (T) asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(r.v[0]), "=r"(r.v[1]) : "r"(p));
    else asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r.v[0]), "=r"(r.v[1]) : "r"(p));
  } else {
    if (T) asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                        : "=r"(r.v[0]), "=r"(r.v[1]), "=r"(r.v[2]), "=r"(r.v[3]) : "r"(p));
    else asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                      : "=r"(r.v[0]), "=r"(r.v[1]), "=r"(r.v[2]), "=r"(r.v[3]) : "r"(p));
  }
  put(out, r);
}
extern "C" __global__ void ldm_x1(const uint16_t* s, uint32_t* o, int p) { ldm<1, false>(s, o, p); }
extern "C" __global__ void ldm_x2(const uint16_t* s, uint32_t* o, int p) { ldm<2, false>(s, o, p); }
extern "C" __global__ void ldm_x4(const uint16_t* s, uint32_t* o, int p) { ldm<4, false>(s, o, p); }
extern "C" __global__ void ldm_x1_t(const uint16_t* s, uint32_t* o, int p) { ldm<1, true>(s, o, p); }
extern "C" __global__ void ldm_x2_t(const uint16_t* s, uint32_t* o, int p) { ldm<2, true>(s, o, p); }
extern "C" __global__ void ldm_x4_t(const uint16_t* s, uint32_t* o, int p) { ldm<4, true>(s, o, p); }

// ldmatrix from a generic address (no state space), out of bounds of shared memory: must fault
extern "C" __global__ void ldm_oob(uint32_t* o) {
  __shared__ uint16_t s[64];
  s[LANE] = LANE;
  __syncwarp();
  uint32_t p = (uint32_t)__cvta_generic_to_shared(&s[LANE * 64]);
  uint32_t r;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%0,%0,%0}, [%1];" : "=r"(r) : "r"(p));
  o[LANE] = r;
}

// movmatrix: transpose of an 8x8 b16 matrix in mma's fragment layout
extern "C" __global__ void movm(const uint32_t* a, uint32_t* d) {
  uint32_t r, x = a[TH];
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(r) : "r"(x));
  d[TH] = r;
}

#if __CUDA_ARCH__ >= 900
// stmatrix (sm_90): inverse of ldmatrix; lane l gives the address of row l%8 of matrix l/8
template <bool T>
__device__ void stm(const uint32_t* in, uint16_t* dst) {
  __shared__ uint16_t s[4 * 8 * 8];
  auto r = get<4>(in);
  uint32_t p = (uint32_t)__cvta_generic_to_shared(&s[LANE * 8]);
  if (T) asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};"
                      :: "r"(p), "r"(r.v[0]), "r"(r.v[1]), "r"(r.v[2]), "r"(r.v[3]));
  else asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};"
                    :: "r"(p), "r"(r.v[0]), "r"(r.v[1]), "r"(r.v[2]), "r"(r.v[3]));
  __syncwarp();
  for (int i = LANE; i < 256; i += 32) dst[i] = s[i];
}
extern "C" __global__ void stm_x4(const uint32_t* in, uint16_t* d) { stm<false>(in, d); }
extern "C" __global__ void stm_x4_t(const uint32_t* in, uint16_t* d) { stm<true>(in, d); }
#endif
