// dp4a / dp2a (every signedness and half) and bmsk (clamp, wrap) on random operands, for
// tests/ptx/test_jit_intx.py: the compiling engine against the interpreter.
#define DP(op, i) asm(op " %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[i] = r;
extern "C" __global__ void dotBits(const unsigned *in, unsigned *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned a = in[3 * i], b = in[3 * i + 1], c = in[3 * i + 2], r, *o = out + 14 * i;
    DP("dp4a.u32.u32", 0) DP("dp4a.u32.s32", 1) DP("dp4a.s32.u32", 2) DP("dp4a.s32.s32", 3)
    DP("dp2a.lo.u32.u32", 4) DP("dp2a.lo.u32.s32", 5) DP("dp2a.lo.s32.u32", 6) DP("dp2a.lo.s32.s32", 7)
    DP("dp2a.hi.u32.u32", 8) DP("dp2a.hi.u32.s32", 9) DP("dp2a.hi.s32.u32", 10) DP("dp2a.hi.s32.s32", 11)
    unsigned pa = a & 0x3f, pb = b & 0x3f;  // positions and widths around 32
    asm("bmsk.clamp.b32 %0, %1, %2;" : "=r"(r) : "r"(pa), "r"(pb)); o[12] = r;
    asm("bmsk.wrap.b32 %0, %1, %2;" : "=r"(r) : "r"(pa), "r"(pb)); o[13] = r;
}

// Carry chains: a 96-bit add and subtract, a 32x64-bit multiply-accumulate (mad.cc/madc), 128-bit add in u64.
extern "C" __global__ void carries(const unsigned *in, unsigned *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned *x = in + 6 * i;
    unsigned *o = out + 16 * i, r0, r1, r2;
    asm("add.cc.u32 %0, %3, %6; addc.cc.u32 %1, %4, %7; addc.u32 %2, %5, %8;"
        : "=r"(r0), "=r"(r1), "=r"(r2) : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(x[4]), "r"(x[5]));
    o[0] = r0; o[1] = r1; o[2] = r2;
    asm("sub.cc.u32 %0, %3, %6; subc.cc.u32 %1, %4, %7; subc.u32 %2, %5, %8;"
        : "=r"(r0), "=r"(r1), "=r"(r2) : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(x[4]), "r"(x[5]));
    o[3] = r0; o[4] = r1; o[5] = r2;
    // x0*x2 + (x4:x3) + hi(x1*x2) << 64: mad.lo.cc, then madc.hi carrying
    asm("mad.lo.cc.u32 %0, %3, %5, %6; madc.hi.cc.u32 %1, %3, %5, %7; madc.hi.u32 %2, %4, %5, 0;"
        : "=r"(r0), "=r"(r1), "=r"(r2) : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(x[4]));
    o[6] = r0; o[7] = r1; o[8] = r2;
    unsigned long long a0 = x[0] | (unsigned long long)x[1] << 32, a1 = x[2], b0 = x[3] | (unsigned long long)x[4] << 32,
                       b1 = x[5], s0, s1;
    asm("add.cc.u64 %0, %2, %4; addc.u64 %1, %3, %5;" : "=l"(s0), "=l"(s1) : "l"(a0), "l"(a1), "l"(b0), "l"(b1));
    o[9] = (unsigned)s0; o[10] = (unsigned)(s0 >> 32); o[11] = (unsigned)s1;
    int h;
    asm("mad.hi.cc.s32 %0, %1, %2, %3; addc.u32 %0, %0, 0;" : "=r"(h) : "r"(x[0]), "r"(x[1]), "r"(x[2]));
    o[12] = h;
}

// Funnel shifts, every direction and mode, shift counts around 32.
extern "C" __global__ void funnel(const unsigned *in, unsigned *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned a = in[3 * i], b = in[3 * i + 1], c = in[3 * i + 2] & 63, r, *o = out + 4 * i;
    asm("shf.l.clamp.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[0] = r;
    asm("shf.l.wrap.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[1] = r;
    asm("shf.r.clamp.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[2] = r;
    asm("shf.r.wrap.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[3] = r;
}
