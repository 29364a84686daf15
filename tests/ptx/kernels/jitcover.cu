// Kernels of tests/ptx/test_jit_cover.py: instruction families the compiling engine gained in round 5 (timers,
// set/szext, SIMD video instructions), each run on both engines.

// Every timer register, twice a clock64 around a barrier (so tier 2's barrier regions and tier 1's resume
// points both read timers). 8 values per thread.
extern "C" __global__ void timers(unsigned long long *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long *o = out + 8 * i, c0, c1, g0;
    unsigned lo, hi, glo, ghi;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c0));
    asm volatile("mov.u32 %0, %%clock;" : "=r"(lo));
    asm volatile("mov.u32 %0, %%clock_hi;" : "=r"(hi));
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
    __syncthreads();
    asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(glo));
    asm volatile("mov.u32 %0, %%globaltimer_hi;" : "=r"(ghi));
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c1));
    o[0] = c0; o[1] = lo; o[2] = hi; o[3] = g0; o[4] = glo; o[5] = ghi; o[6] = c1; o[7] = 0;
}
