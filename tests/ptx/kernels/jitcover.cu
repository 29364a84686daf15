// Kernels of tests/ptx/test_jit_cover.py: instruction families the compiling engine gained in round 5 (timers,
// set/szext, SIMD video instructions), each run on both engines.

// Every timer register, twice a clock64 around a barrier (so tier 2's barrier regions and tier 1's resume
// points both read timers). 8 values per thread.
extern "C" __global__ void timers(unsigned long long *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long *o = out + 8 * i, c0, c1, g0, g1;
    unsigned lo, hi, glo, ghi;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c0));
    asm volatile("mov.u32 %0, %%clock;" : "=r"(lo));
    asm volatile("mov.u32 %0, %%clock_hi;" : "=r"(hi));
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
    __syncthreads();
    asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(glo));
    asm volatile("mov.u32 %0, %%globaltimer_hi;" : "=r"(ghi));
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c1));
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
    o[0] = c0; o[1] = lo; o[2] = hi; o[3] = g0; o[4] = glo; o[5] = ghi; o[6] = c1; o[7] = g1;
}

// set (every comparison of integers, f32 and f64; the boolean forms) and szext on random operands. in: 4 words
// per thread (a, b, c, e); out: 48 words per thread.
#define SET(op, i) asm("set." op " %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[i] = r;
#define SETF(op, i) asm("set." op ".f32.f32 %0, %1, %2;" : "=f"(f) : "f"(fa), "f"(fb)); o[i] = __float_as_uint(f);
#define SETD(op, i) asm("set." op ".u32.f64 %0, %1, %2;" : "=r"(r) : "d"(da), "d"(db)); o[i] = r;
#define SETB(op, i) \
    asm("{.reg .pred p; setp.ne.u32 p, %3, 0; set.lt." op ".u32.s32 %0, %1, %2, p;}" \
        : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[i] = r;
#define SZEXT(op, i) asm("szext." op " %0, %1, %2;" : "=r"(r) : "r"(a), "r"(n)); o[i] = r;
extern "C" __global__ void setSzext(const unsigned *in, unsigned *out, int cnt) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= cnt) return;
    unsigned a = in[4 * i], b = in[4 * i + 1], c = in[4 * i + 2] & 1, e = in[4 * i + 3], r, *o = out + 48 * i;
    float fa = __uint_as_float(a), fb = __uint_as_float(b), f;
    double da = (double)fa * 3.0, db = (double)fb * 3.0;
    unsigned long long la = (unsigned long long)a << 32 | e, lb = (unsigned long long)b << 32 | e;
    unsigned short ha = a >> 7, hb = b >> 7;
    SET("eq.u32.s32", 0) SET("ne.u32.s32", 1) SET("lt.u32.s32", 2) SET("le.u32.s32", 3) SET("gt.u32.s32", 4)
    SET("ge.u32.s32", 5) SET("eq.s32.u32", 6) SET("ne.s32.u32", 7) SET("lo.s32.u32", 8) SET("ls.s32.u32", 9)
    SET("hi.s32.u32", 10) SET("hs.s32.u32", 11) SET("eq.u32.b32", 12) SET("ne.f32.b32", 13)
    asm("set.lt.u32.u16 %0, %1, %2;" : "=r"(r) : "h"(ha), "h"(hb)); o[14] = r;
    asm("set.lt.u32.s64 %0, %1, %2;" : "=r"(r) : "l"(la), "l"(lb)); o[15] = r;
    asm("set.hs.s32.u64 %0, %1, %2;" : "=r"(r) : "l"(la), "l"(lb)); o[16] = r;
    SETF("eq", 17) SETF("ne", 18) SETF("lt", 19) SETF("le", 20) SETF("gt", 21) SETF("ge", 22) SETF("equ", 23)
    SETF("neu", 24) SETF("ltu", 25) SETF("leu", 26) SETF("gtu", 27) SETF("geu", 28) SETF("num", 29) SETF("nan", 30)
    SETD("lt", 31) SETD("equ", 32) SETD("nan", 33) SETD("neu", 34)
    SETB("and", 35) SETB("or", 36) SETB("xor", 37)
    unsigned n = e & 63;  // widths around 32
    SZEXT("clamp.s32", 38) SZEXT("clamp.u32", 39) SZEXT("wrap.s32", 40) SZEXT("wrap.u32", 41)
}

// SIMD video instructions: each operation, 4 and 2 lanes, plain / .sat / .add, the four combinations of types
// rotating over the operations (each form meets each combination). in: 3 words per thread (a, b, c); out: 36.
#define V(op, t, i) asm(op "." t " %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[i] = r;
#define T0 "u32.u32.u32"
#define T1 "s32.s32.s32"
#define T2 "s32.u32.s32"
#define T3 "u32.s32.u32"
#define VO(op, i, ta, tb, tc) V(op, ta, i) V(op, tb ".sat", i + 1) V(op, tc ".add", i + 2)
extern "C" __global__ void video(const unsigned *in, unsigned *out, int cnt) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= cnt) return;
    unsigned a = in[3 * i], b = in[3 * i + 1], c = in[3 * i + 2], r, *o = out + 36 * i;
    VO("vadd4", 0, T0, T1, T2) VO("vsub4", 3, T1, T2, T3) VO("vabsdiff4", 6, T2, T3, T0)
    VO("vmin4", 9, T3, T0, T1) VO("vmax4", 12, T0, T1, T2) VO("vavrg4", 15, T1, T2, T3)
    VO("vadd2", 18, T2, T3, T0) VO("vsub2", 21, T3, T0, T1) VO("vabsdiff2", 24, T0, T1, T2)
    VO("vmin2", 27, T1, T2, T3) VO("vmax2", 30, T2, T3, T0) VO("vavrg2", 33, T3, T0, T1)
}

// rcp.f32 in every rounding mode, with and without .ftz. in: 1 float per thread; out: 8 floats per thread.
#define RCP(op, i) asm("rcp." op ".f32 %0, %1;" : "=f"(r) : "f"(a)); o[i] = r;
extern "C" __global__ void rcpModes(const float *in, float *out, int cnt) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= cnt) return;
    float a = in[i], r, *o = out + 8 * i;
    RCP("rn", 0) RCP("rz", 1) RCP("rm", 2) RCP("rp", 3) RCP("rn.ftz", 4) RCP("rz.ftz", 5) RCP("rm.ftz", 6)
    RCP("rp.ftz", 7)
}
