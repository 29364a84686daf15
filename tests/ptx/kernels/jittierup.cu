// Kernels of tests/ptx/test_jit_tierup.py: a long tier-1 launch goes on in tier 2 once that is compiled.

// Block 0's thread 0 waits until *flag is set (by the test, once tier 2 is ready), then every thread of every
// block scales its element. The flag is read with an atomic, so no engine may hoist the read out of the loop.
extern "C" __global__ void waitThenScale(int *flag, float *data, int n) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        while (atomicAdd(flag, 0) == 0) {
        }
    }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = data[i] * 2.0f + blockIdx.x;
}

// %smid, and the performance counter %pm0, which the JIT does not compile (the background compile ends in a
// fallback).
extern "C" __global__ void stampSmid(long long *out, int n) {
    unsigned sm, pm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    asm volatile("mov.u32 %0, %%pm0;" : "=r"(pm));
    if (threadIdx.x < n) out[threadIdx.x] = sm < 1024 && pm == 0 ? threadIdx.x + 1 : -1;
}

// As waitThenScale, but every thread stores p[i] without a bounds check: threads past the allocation fault.
extern "C" __global__ void waitThenStore(int *flag, float *p) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        while (atomicAdd(flag, 0) == 0) {
        }
    }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    p[i] = i;
}
