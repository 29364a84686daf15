// f64 div, rcp and sqrt and f32 sqrt in the directed rounding modes, and set.ftz on f32, for tests/ptx/test_interp_directed_div.py.
#define D2(op, i) asm(op " %0, %1, %2;" : "=d"(s) : "d"(x), "d"(y)); q[i] = s;
#define D1(op, i) asm(op " %0, %1;" : "=d"(s) : "d"(x)); q[i] = s;
extern "C" __global__ void divsqrt64(const double *in, double *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = in[2 * i], y = in[2 * i + 1], s, *q = out + 9 * i;
    D2("div.rz.f64", 0) D2("div.rm.f64", 1) D2("div.rp.f64", 2)
    D1("sqrt.rz.f64", 3) D1("sqrt.rm.f64", 4) D1("sqrt.rp.f64", 5)
    D1("rcp.rz.f64", 6) D1("rcp.rm.f64", 7) D1("rcp.rp.f64", 8)
}

#define S1(op, i) asm(op " %0, %1;" : "=f"(r) : "f"(a)); o[i] = r;
extern "C" __global__ void sqrt32(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = in[i], r, *o = out + 3 * i;
    S1("sqrt.rz.f32", 0) S1("sqrt.rm.f32", 1) S1("sqrt.rp.f32", 2)
}

// set with and without .ftz: u32 / s32 / f32 destinations
extern "C" __global__ void setftz(const float *in, unsigned *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = in[2 * i], b = in[2 * i + 1], f;
    unsigned u, *o = out + 6 * i;
    int s;
    asm("set.eq.ftz.u32.f32 %0, %1, %2;" : "=r"(u) : "f"(a), "f"(b)); o[0] = u;
    asm("set.lt.ftz.s32.f32 %0, %1, %2;" : "=r"(s) : "f"(a), "f"(b)); o[1] = (unsigned)s;
    asm("set.gt.ftz.f32.f32 %0, %1, %2;" : "=f"(f) : "f"(a), "f"(b)); o[2] = __float_as_uint(f);
    asm("set.eq.u32.f32 %0, %1, %2;" : "=r"(u) : "f"(a), "f"(b)); o[3] = u;
    asm("set.lt.s32.f32 %0, %1, %2;" : "=r"(s) : "f"(a), "f"(b)); o[4] = (unsigned)s;
    asm("set.gt.f32.f32 %0, %1, %2;" : "=f"(f) : "f"(a), "f"(b)); o[5] = __float_as_uint(f);
}
