// Kernels of tests/ptx/test_jit_tiers.py: the JIT's tier 2 (check pass, fast code, barrier regions as thread
// loops) against the interpreter.

// A 256-point ring smoothed `iters` times per block: two barriers per iteration (uniform barrier regions).
extern "C" __global__ void ring(float *data, int iters) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = data[blockIdx.x * 256 + t];
    for (int it = 0; it < iters; it++) {
        __syncthreads();
        float v = s[(t + 1) & 255] * 0.5f + s[t] * 0.25f + s[(t + 255) & 255] * 0.25f;
        __syncthreads();
        s[t] = v;
    }
    data[blockIdx.x * 256 + t] = s[t];
}

// Threads past n exit before the barrier: the others' rounds are not uniform (exited threads).
extern "C" __global__ void partial(float *out, int n) {
    __shared__ float s[256];
    int t = threadIdx.x;
    if (t >= n) return;
    s[t] = t * 1.5f + blockIdx.x;
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = s[(t + 1) % n];
}

// One load instruction reads from a or b by block: its addresses span two allocations, which the check pass
// cannot vouch for as one range (tier 1 runs the launch).
extern "C" __global__ void eitherArray(const int *a, const int *b, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int *p = (blockIdx.x & 1) ? a : b;
    if (i < n) out[i] = p[i] * 3 + 1;
}

// A gather: the address comes from memory, so there is no check pass (tier 2 is tier 1's code optimised).
extern "C" __global__ void gatherIdx(const int *idx, const float *x, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[idx[i]];
}

// Never ends: a barrier in an endless loop (n >= 0). The watchdog must stop it between barrier rounds.
extern "C" __global__ void barrierSpin(int *out, int n) {
    __shared__ int s[128];
    int k = 0;
    for (;;) {
        s[threadIdx.x] = k++;
        __syncthreads();
        if (n < 0) break;
    }
    out[threadIdx.x] = s[threadIdx.x];
}

// Stores past the end from thread 100 on: the check pass sees it, tier 1 reports the fault.
extern "C" __global__ void tailOob(float *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    p[i] = i * 2.0f;
}

// Saturating add/sub and bfind (inline PTX) on random and edge operands: compared with the interpreter.
extern "C" __global__ void satFind(const int *x, const long long *y, unsigned *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int a = x[i], b = x[(i + 3) % n];
    long long c = y[i];
    unsigned r;
    int s;
    asm("add.sat.s32 %0, %1, %2;" : "=r"(s) : "r"(a), "r"(b));
    out[8 * i] = s;
    asm("sub.sat.s32 %0, %1, %2;" : "=r"(s) : "r"(a), "r"(b));
    out[8 * i + 1] = s;
    asm("bfind.u32 %0, %1;" : "=r"(r) : "r"(a));
    out[8 * i + 2] = r;
    asm("bfind.s32 %0, %1;" : "=r"(r) : "r"(a));
    out[8 * i + 3] = r;
    asm("bfind.shiftamt.u32 %0, %1;" : "=r"(r) : "r"(a));
    out[8 * i + 4] = r;
    asm("bfind.u64 %0, %1;" : "=r"(r) : "l"(c));
    out[8 * i + 5] = r;
    asm("bfind.s64 %0, %1;" : "=r"(r) : "l"(c));
    out[8 * i + 6] = r;
    asm("bfind.shiftamt.s64 %0, %1;" : "=r"(r) : "l"(c));
    out[8 * i + 7] = r;
}

// mul24/mad24 (.lo/.hi, signed and unsigned) on random and edge operands.
extern "C" __global__ void mul24Ops(const int *x, unsigned *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int a = x[i], b = x[(i + 5) % n], c = x[(i + 11) % n];
    unsigned r;
    asm("mul24.lo.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    out[6 * i] = r;
    asm("mul24.hi.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    out[6 * i + 1] = r;
    asm("mul24.lo.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    out[6 * i + 2] = r;
    asm("mul24.hi.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    out[6 * i + 3] = r;
    asm("mad24.lo.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    out[6 * i + 4] = r;
    asm("mad24.hi.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    out[6 * i + 5] = r;
}

// Shifts by constant amounts at and past the width (PTX clamps them) and inside it.
extern "C" __global__ void constShifts(const int *x, unsigned *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int a = x[i];
    unsigned r;
    asm("shl.b32 %0, %1, 33;" : "=r"(r) : "r"(a));
    out[6 * i] = r;
    asm("shr.s32 %0, %1, 40;" : "=r"(r) : "r"(a));
    out[6 * i + 1] = r;
    asm("shr.u32 %0, %1, 32;" : "=r"(r) : "r"(a));
    out[6 * i + 2] = r;
    asm("shl.b32 %0, %1, 31;" : "=r"(r) : "r"(a));
    out[6 * i + 3] = r;
    asm("shr.s32 %0, %1, 7;" : "=r"(r) : "r"(a));
    out[6 * i + 4] = r;
    asm("shr.u32 %0, %1, 0;" : "=r"(r) : "r"(a));
    out[6 * i + 5] = r;
}

// prmt with random selectors, and in each mode.
extern "C" __global__ void prmtOps(const unsigned *x, unsigned *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned a = x[i], b = x[(i + 1) % n], c = x[(i + 2) % n], r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    out[8 * i] = r;
    asm("prmt.b32 %0, %1, %2, 0x3210;" : "=r"(r) : "r"(a), "r"(b));
    out[8 * i + 1] = r;
    asm("prmt.b32.f4e %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    out[8 * i + 2] = r;
    asm("prmt.b32.b4e %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    out[8 * i + 3] = r;
    asm("prmt.b32.rc8 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    out[8 * i + 4] = r;
    asm("prmt.b32.ecl %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    out[8 * i + 5] = r;
    asm("prmt.b32.ecr %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    out[8 * i + 6] = r;
    asm("prmt.b32.rc16 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    out[8 * i + 7] = r;
}
