// Half precision through inline PTX on random bit patterns, for tests/ptx/test_jit_half.py: the compiling
// engine against the interpreter (sm_90: bf16 add/sub/mul need it).
#define H2(op, i) asm(op " %0, %1, %2;" : "=h"(r) : "h"(a), "h"(b)); o[i] = r;
#define H3(op, i) asm(op " %0, %1, %2, %3;" : "=h"(r) : "h"(a), "h"(b), "h"(c)); o[i] = r;
#define X2(op, i) asm(op " %0, %1, %2;" : "=r"(R) : "r"(A), "r"(B)); P[i] = R;
#define X3(op, i) asm(op " %0, %1, %2, %3;" : "=r"(R) : "r"(A), "r"(B), "r"(C)); P[i] = R;
#define SP(op, i) asm("{ .reg .pred p; " op " p, %1, %2; selp.u16 %0, 1, 0, p; }" : "=h"(r) : "h"(a), "h"(b)); o[i] = r;
extern "C" __global__ void halfOps(const unsigned short *in, unsigned short *out, unsigned *out2, float *outf, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned short a = in[3 * i], b = in[3 * i + 1], c = in[3 * i + 2], r, *o = out + 40 * i;
    unsigned A = a | (unsigned)b << 16, B = b | (unsigned)c << 16, C = c | (unsigned)a << 16, R, *P = out2 + 12 * i;
    H2("add.rn.f16", 0) H2("sub.rn.f16", 1) H2("mul.rn.f16", 2) H2("add.rn.ftz.f16", 3) H2("mul.rn.sat.f16", 4)
    H3("fma.rn.f16", 5) H3("fma.rn.ftz.f16", 6) H3("fma.rn.sat.f16", 7) H3("fma.rn.relu.f16", 8)
    H2("min.f16", 9) H2("max.f16", 10) H2("min.NaN.f16", 11) H2("max.NaN.f16", 12)
    asm("neg.f16 %0, %1;" : "=h"(r) : "h"(a)); o[13] = r;
    asm("abs.f16 %0, %1;" : "=h"(r) : "h"(a)); o[14] = r;
    SP("setp.lt.f16", 15) SP("setp.equ.f16", 16) SP("setp.nan.f16", 17) SP("setp.ge.bf16", 18)
    H2("add.rn.bf16", 19) H2("sub.rn.bf16", 20) H2("mul.rn.bf16", 21) H3("fma.rn.bf16", 22)
    H3("fma.rn.relu.bf16", 23) H2("min.bf16", 24) H2("max.NaN.bf16", 25)
    float f = outf[4 * i];  // random f32 bits, converted
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f)); o[26] = r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f)); o[27] = r;
    H2("add.rn.sat.f16", 28) H3("fma.rn.ftz.sat.f16", 29)
    X2("add.rn.f16x2", 0) X2("mul.rn.ftz.f16x2", 1) X3("fma.rn.f16x2", 2) X3("fma.rn.relu.bf16x2", 3)
    X2("min.NaN.f16x2", 4) X2("max.bf16x2", 5)
    asm("neg.f16x2 %0, %1;" : "=r"(R) : "r"(A)); P[6] = R;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(R) : "f"(f), "f"(outf[4 * i + 1])); P[7] = R;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(R) : "f"(f), "f"(outf[4 * i + 1])); P[8] = R;
    asm("{ .reg .pred p, q; setp.gtu.f16x2 p|q, %1, %2; selp.u32 %0, 1, 0, p; selp.u32 %0, 2, %0, q; }"
        : "=r"(R) : "r"(A), "r"(B)); P[9] = R;
    float g;
    asm("cvt.f32.f16 %0, %1;" : "=f"(g) : "h"(a)); outf[4 * i + 2] = g;
    asm("cvt.f32.bf16 %0, %1;" : "=f"(g) : "h"(b)); outf[4 * i + 3] = g;
}
