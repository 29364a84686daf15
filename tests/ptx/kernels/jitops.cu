// Bit-field and select instructions with random operands: tests/ptx/test_jit.py runs them on both engines.
extern "C" __global__ void bitOps(const unsigned *x, const unsigned long long *y, const unsigned *pl,
                                  unsigned *o32, unsigned long long *o64, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned a = x[i], b = x[(i + 1) % n], p = pl[i] & 0xff, l = (pl[i] >> 8) & 0xff;
    unsigned long long c = y[i], d = y[(i + 7) % n];
    unsigned r;
    int s;
    unsigned long long r64;
    long long s64;
    asm("bfe.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(p), "r"(l));
    o32[8 * i] = r;
    asm("bfe.s32 %0, %1, %2, %3;" : "=r"(s) : "r"(a), "r"(p), "r"(l));
    o32[8 * i + 1] = s;
    asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(r) : "r"(a), "r"(b), "r"(p), "r"(l));
    o32[8 * i + 2] = r;
    asm("lop3.b32 %0, %1, %2, %3, 0x6a;" : "=r"(r) : "r"(a), "r"(b), "r"(p));
    o32[8 * i + 3] = r;
    asm("sad.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(p));
    o32[8 * i + 4] = r;
    asm("slct.u32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"((int)(a ^ b)));
    o32[8 * i + 5] = r;
    asm("slct.u32.f32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "f"(__uint_as_float(b)));
    o32[8 * i + 6] = r;
    asm("copysign.f32 %0, %1, %2;" : "=r"(r) : "f"(__uint_as_float(a)), "f"(__uint_as_float(b)));
    o32[8 * i + 7] = r;
    asm("bfe.u64 %0, %1, %2, %3;" : "=l"(r64) : "l"(c), "r"(p), "r"(l));
    o64[4 * i] = r64;
    asm("bfe.s64 %0, %1, %2, %3;" : "=l"(s64) : "l"(c), "r"(p), "r"(l));
    o64[4 * i + 1] = s64;
    asm("bfi.b64 %0, %1, %2, %3, %4;" : "=l"(r64) : "l"(c), "l"(d), "r"(p), "r"(l));
    o64[4 * i + 2] = r64;
    asm("sad.u64 %0, %1, %2, %3;" : "=l"(r64) : "l"(c), "l"(d), "l"(d));
    o64[4 * i + 3] = r64;
}
