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

// Conversions in the directed modes: f64 -> f32, 64-bit and 32-bit integers -> f32 / f64.
#define CV(op, out, in, i) asm(op " %0, %1;" : out(r##i) : in(v##i)); o[k++] = (double)r##i;
extern "C" __global__ void cvtDirected(const double *xd, const long long *xl, double *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double v0 = xd[i];
    long long v1 = xl[2 * i];
    unsigned long long v2 = (unsigned long long)xl[2 * i + 1];
    int v3 = (int)xl[2 * i];
    float r0, r1, r2, r3;
    double r4;
    double *o = out + 15 * i;
    int k = 0;
    CV("cvt.rz.f32.f64", "=f", "d", 0) CV("cvt.rm.f32.f64", "=f", "d", 0) CV("cvt.rp.f32.f64", "=f", "d", 0)
    CV("cvt.rz.f32.s64", "=f", "l", 1) CV("cvt.rm.f32.s64", "=f", "l", 1) CV("cvt.rp.f32.s64", "=f", "l", 1)
    CV("cvt.rz.f32.u64", "=f", "l", 2) CV("cvt.rm.f32.u64", "=f", "l", 2) CV("cvt.rp.f32.u64", "=f", "l", 2)
    CV("cvt.rz.f32.s32", "=f", "r", 3) CV("cvt.rp.f32.s32", "=f", "r", 3)
    long long v4 = v1;
    asm("cvt.rz.f64.s64 %0, %1;" : "=d"(r4) : "l"(v4)); o[k++] = r4;
    asm("cvt.rm.f64.s64 %0, %1;" : "=d"(r4) : "l"(v4)); o[k++] = r4;
    asm("cvt.rp.f64.u64 %0, %1;" : "=d"(r4) : "l"(v2)); o[k++] = r4;
    asm("cvt.rm.f64.u64 %0, %1;" : "=d"(r4) : "l"(v2)); o[k++] = r4;
}
