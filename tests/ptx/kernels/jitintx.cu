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
