// Instructions the compiling engine compiles since round 6 (tests/ptx/test_jit_cover6.py): directed f64
// mul/fma/div/rcp/sqrt and f32 sqrt (ops_hwround.py), set.ftz, cvt.sat between integers, fns, cvt to f16.
#define B(op, k) asm(op " %0, %1, %2;" : "=d"(r) : "d"(x), "d"(y)); q[k] = r;
#define F(op, k) asm(op " %0, %1, %2, %3;" : "=d"(r) : "d"(x), "d"(y), "d"(z)); q[k] = r;
#define U(op, k) asm(op " %0, %1;" : "=d"(r) : "d"(x)); q[k] = r;
extern "C" __global__ void hw64(const double *in, double *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = in[3 * i], y = in[3 * i + 1], z = in[3 * i + 2], r, *q = out + 15 * i;
    B("mul.rz.f64", 0) B("mul.rm.f64", 1) B("mul.rp.f64", 2)
    F("fma.rz.f64", 3) F("fma.rm.f64", 4) F("fma.rp.f64", 5)
    B("div.rz.f64", 6) B("div.rm.f64", 7) B("div.rp.f64", 8)
    U("rcp.rz.f64", 9) U("rcp.rm.f64", 10) U("rcp.rp.f64", 11)
    U("sqrt.rz.f64", 12) U("sqrt.rm.f64", 13) U("sqrt.rp.f64", 14)
}

#define S(op, k) asm(op " %0, %1;" : "=f"(r) : "f"(x)); q[k] = r;
extern "C" __global__ void hw32(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i], r, *q = out + 4 * i;
    S("sqrt.rz.f32", 0) S("sqrt.rm.f32", 1) S("sqrt.rp.f32", 2) S("sqrt.rp.ftz.f32", 3)
}

#define H(op, k, c, v) asm("{.reg .b16 h; " op " h, %1; cvt.u32.u16 %0, h;}" : "=r"(u) : c(v)); o[k] = u;
#define T(op, k, c, v) asm(op " %0, %1;" : "=r"(u) : c(v)); o[k] = u;
extern "C" __global__ void bits6(const unsigned *in, const double *d, unsigned *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned a = in[4 * i], b = in[4 * i + 1], c = in[4 * i + 2], u, *o = out + 32 * i;
    float fa = __uint_as_float(a), fb = __uint_as_float(b);
    double e = d[i];
    asm("fns.b32 %0, %1, %2, %3;" : "=r"(u) : "r"(a), "r"(b), "r"(c)); o[0] = u;
    asm("fns.b32 %0, %1, %2, %3;" : "=r"(u) : "r"(a), "r"(b), "r"((int)(c % 67) - 33)); o[1] = u;
    asm("{.reg .s8 t; cvt.sat.s8.s32 t, %1; cvt.s32.s8 %0, t;}" : "=r"(u) : "r"(a)); o[2] = u;
    asm("{.reg .u8 t; cvt.sat.u8.s32 t, %1; cvt.u32.u8 %0, t;}" : "=r"(u) : "r"(a)); o[3] = u;
    asm("{.reg .s16 t; cvt.sat.s16.u32 t, %1; cvt.s32.s16 %0, t;}" : "=r"(u) : "r"(a)); o[4] = u;
    T("cvt.sat.u32.s32", 5, "r", a) T("cvt.sat.s32.u32", 6, "r", a)
    asm("{.reg .u8 t; cvt.sat.u8.s64 t, %1; cvt.u32.u8 %0, t;}" : "=r"(u) : "l"((long long)(int)a * 3)); o[7] = u;
    asm("set.lt.ftz.u32.f32 %0, %1, %2;" : "=r"(u) : "f"(fa), "f"(fb)); o[8] = u;
    asm("set.equ.ftz.f32.f32 %0, %1, %2;" : "=r"(u) : "f"(fa), "f"(fb)); o[9] = u;
    asm("set.ge.ftz.s32.f32 %0, %1, %2;" : "=r"(u) : "f"(fa), "f"(fb)); o[10] = u;
    H("cvt.rn.f16.f32", 11, "f", fa) H("cvt.rz.f16.f32", 12, "f", fa) H("cvt.rm.f16.f32", 13, "f", fa)
    H("cvt.rp.f16.f32", 14, "f", fa) H("cvt.rz.ftz.f16.f32", 15, "f", fa)
    H("cvt.rn.f16.f64", 16, "d", e) H("cvt.rz.f16.f64", 17, "d", e) H("cvt.rm.f16.f64", 18, "d", e)
    H("cvt.rp.f16.f64", 19, "d", e)
    H("cvt.rn.f16.s32", 20, "r", a) H("cvt.rz.f16.u32", 21, "r", a) H("cvt.rm.f16.s32", 22, "r", a)
    H("cvt.rp.f16.s64", 23, "l", (long long)(int)a * 65536)
#define P(op, k, c, v) asm("{.reg .pred p; " op " p, %1; selp.u32 %0, 1, 0, p;}" : "=r"(u) : c(v)); o[k] = u;
    P("testp.finite.f32", 24, "f", fa) P("testp.infinite.f32", 25, "f", fa) P("testp.number.f64", 26, "d", e)
    P("testp.notanumber.f32", 27, "f", fa) P("testp.normal.f64", 28, "d", e) P("testp.subnormal.f32", 29, "f", fa)
    __shared__ unsigned sh[2];
    unsigned loc[2] = {a, b};
    void *ptrs[4] = {(void *)in, (void *)&sh[1], (void *)&loc[c & 1], (void *)&c};
    void *ptr = ptrs[b & 3];
    u = 0;
    asm volatile("{.reg .pred p; isspacep.global p, %1; selp.u32 %0, 1, 0, p;}" : "=r"(u) : "l"(ptr));
    o[30] = u;
    asm volatile("{.reg .pred p, q, r; isspacep.shared p, %1; isspacep.local q, %1; isspacep.param r, %1;"
                 " selp.u32 %0, 2, 0, p; @q or.b32 %0, %0, 4; @r or.b32 %0, %0, 8;}" : "=r"(u) : "l"(ptr));
    o[31] = u + loc[0] - a;
}

// cp.async (ops_async.py): 16 bytes, 8 bytes of which src-size (a register) are copied, 4 bytes of which 2.
extern "C" __global__ void cpAsync6(const unsigned *in, unsigned *out, int n, int srcsz, long long off) {
    __shared__ __align__(16) unsigned sh[128 * 8];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    const unsigned *g = in + 8 * i + off;
    unsigned s = (unsigned)__cvta_generic_to_shared(&sh[8 * t]);
    for (int k = 0; k < 8; k++) sh[8 * t + k] = 0xdeadbeef;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(s + 16), "l"(g + 4), "r"((srcsz + t) % 9));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, 2;" ::"r"(s + 24), "l"(g + 6));
    asm volatile("cp.async.commit_group;");
    asm volatile("cp.async.wait_group 0;");
    __syncthreads();
    if (i < n)
        for (int k = 0; k < 8; k++) out[8 * i + k] = sh[8 * ((t + 1) % blockDim.x) + k];
}

// %smid, %nsmid, %gridid, %nwarpid (the interpreter's values: state.py)
extern "C" __global__ void specials6(unsigned *out) {
    unsigned b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x, v;
    unsigned *o = out + 4 * (b * blockDim.x + threadIdx.x);
    asm volatile("mov.u32 %0, %%smid;" : "=r"(v)); o[0] = v;
    asm volatile("mov.u32 %0, %%nsmid;" : "=r"(v)); o[1] = v;
    asm volatile("mov.u32 %0, %%gridid;" : "=r"(v)); o[2] = v;
    asm volatile("mov.u32 %0, %%nwarpid;" : "=r"(v)); o[3] = v;
}
