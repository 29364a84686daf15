// Directed rounding (.rz/.rm/.rp, with .ftz and .sat) of f32 add/sub/mul/fma/div and f64 add/sub, for
// tests/ptx/test_jit_round.py: the compiling engine against the interpreter on random and special operands.
#define F1(op, i) asm(op " %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); o[i] = r;
#define F3(op, i) asm(op " %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c)); o[i] = r;
#define D1(op, i) asm(op " %0, %1, %2;" : "=d"(s) : "d"(x), "d"(y)); q[i] = s;
#define MODES(M, base) M(base ".rz.f32", k) M(base ".rm.f32", k + 1) M(base ".rp.f32", k + 2) \
    M(base ".rz.ftz.f32", k + 3) M(base ".rm.sat.f32", k + 4) M(base ".rp.ftz.sat.f32", k + 5) k += 6;
extern "C" __global__ void directed32(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = in[3 * i], b = in[3 * i + 1], c = in[3 * i + 2], r, *o = out + 30 * i;
    int k = 0;
    MODES(F1, "add") MODES(F1, "sub") MODES(F1, "mul") MODES(F1, "div") MODES(F3, "fma")
}
extern "C" __global__ void directed64(const double *in, double *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = in[2 * i], y = in[2 * i + 1], s, *q = out + 6 * i;
    D1("add.rz.f64", 0) D1("add.rm.f64", 1) D1("add.rp.f64", 2) D1("sub.rz.f64", 3) D1("sub.rm.f64", 4)
    D1("sub.rp.f64", 5)
}
