// Special registers, block reductions through barriers, generic pointers into several spaces, 64-bit atomics.
extern "C" __global__ void specials(unsigned *out) {
    unsigned b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    unsigned t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    unsigned nt = blockDim.x * blockDim.y * blockDim.z;
    unsigned *o = out + 16 * (b * nt + t);
    unsigned lane, warp, lt, ge;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    asm("mov.u32 %0, %%warpid;" : "=r"(warp));
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
    asm("mov.u32 %0, %%lanemask_ge;" : "=r"(ge));
    long long c0 = clock64();
    unsigned c1 = clock();
    unsigned long long g0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
    long long c2 = clock64();
    unsigned long long g1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
    o[0] = threadIdx.x; o[1] = threadIdx.y; o[2] = threadIdx.z;
    o[3] = blockIdx.x; o[4] = blockIdx.y; o[5] = blockIdx.z;
    o[6] = blockDim.x * 10000 + blockDim.y * 100 + blockDim.z;
    o[7] = gridDim.x * 10000 + gridDim.y * 100 + gridDim.z;
    o[8] = lane; o[9] = warp; o[10] = lt; o[11] = ge;
    o[12] = c2 > c0; o[13] = g1 > g0; o[14] = c1 != 0 || c0 != 0; o[15] = warpSize;
}
extern "C" __global__ void barReduce(const int *in, int *out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[t];
    int cnt = __syncthreads_count(v > 0);
    int all = __syncthreads_and(v > -5);
    int any = __syncthreads_or(v > 8);
    __syncwarp();
    out[3 * t] = cnt; out[3 * t + 1] = all; out[3 * t + 2] = any;
}
__device__ __noinline__ float bump(float *p, float v) { float old = *p; *p = old + v; return old; }
extern "C" __global__ void genericPtrs(float *g, float *out, unsigned *counter, unsigned *shcount) {
    __shared__ float sh[128];
    __shared__ unsigned cnt;
    float loc[4] = {1, 2, 3, 4};
    int t = threadIdx.x, gi = blockIdx.x * blockDim.x + t;
    sh[t] = 100.0f + t;
    if (t == 0) cnt = 0;
    __syncthreads();
    float *p = (t % 3 == 0) ? &sh[t] : (t % 3 == 1) ? &g[gi] : &loc[t & 3];
    float old = bump(p, 0.5f);  // one generic ld/st mixing shared, global and local addresses
    unsigned *c = (t & 1) ? counter : &cnt;
    atomicAdd(c, 1u);  // one generic atomic on global and shared addresses
    __syncthreads();
    out[gi] = old + *p + loc[t & 3] * 1000;
    if (t == 0) shcount[blockIdx.x] = cnt;
}
extern "C" __global__ void atomics64(unsigned long long *a, long long *m, const long long *v, unsigned long long *old) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    long long x = v[t];
    old[4 * t] = atomicAdd(&a[0], (unsigned long long)x);
    old[4 * t + 1] = (unsigned long long)atomicMax(&m[0], x);
    old[4 * t + 2] = (unsigned long long)atomicMin(&m[1], x);
    old[4 * t + 3] = atomicCAS(&a[1], (unsigned long long)t, (unsigned long long)x);
}
extern "C" __global__ void spinLock(int *lock, int *sum, const int *v) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if ((threadIdx.x & 31) == 0) {  // one thread per warp takes the lock: the others spin
        while (atomicCAS(lock, 0, 1) != 0) {}
        __threadfence();
        *sum += v[t];
        __threadfence();
        atomicExch(lock, 0);
    }
}
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
__device__ unsigned int g_retired = 0;
// Single-pass sum: every block reduces its slice (warp tiles synchronised through cooperative groups), takes a
// ticket with atomicInc, and the block that retires last adds up the partial sums of all blocks.
extern "C" __global__ void lastBlockSum(const float *in, float *partial, float *total, unsigned n) {
    cg::thread_block cta = cg::this_thread_block();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(cta);
    extern __shared__ float buf[];
    volatile float *vb = buf;
    __shared__ bool last;
    unsigned t = threadIdx.x;
    float s = 0;
    for (unsigned i = blockIdx.x * blockDim.x + t; i < n; i += blockDim.x * gridDim.x) s += in[i];
    s = cg::reduce(tile, s, cg::plus<float>());
    if (tile.thread_rank() == 0) vb[t / 32] = s;
    cg::sync(cta);
    if (t == 0) {
        float b = 0;
        for (unsigned w = 0; w < blockDim.x / 32; ++w) b += vb[w];
        partial[blockIdx.x] = b;
        __threadfence();
        unsigned ticket = atomicInc(&g_retired, gridDim.x);
        last = ticket == gridDim.x - 1;
    }
    cg::sync(cta);
    if (last && t == 0) {
        float sum = 0;
        for (unsigned b = 0; b < gridDim.x; ++b) sum += ((volatile float *)partial)[b];
        *total = sum;
        g_retired = 0;
    }
}
// Warp-specialised producer/consumer through named barriers: warps 0-1 produce, warps 2-3 consume.
extern "C" __global__ void producerConsumer(const int *in, int *out, int rounds) {
    __shared__ int buf[64];
    int t = threadIdx.x;
    const int *src = in + blockIdx.x * rounds * 64;
    int *dst = out + blockIdx.x * rounds * 64;
    for (int r = 0; r < rounds; ++r) {
        if (t < 64) {
            buf[t] = src[r * 64 + t] * 2;
            asm volatile("bar.arrive 1, 128;" ::: "memory");
            asm volatile("bar.sync 2, 128;" ::: "memory");
        } else {
            asm volatile("bar.sync 1, 128;" ::: "memory");
            dst[r * 64 + t - 64] = buf[(t - 64) ^ 1] + 1;
            asm volatile("bar.arrive 2, 128;" ::: "memory");
        }
    }
}
// Function pointers: a table in global memory (address initialisers) and a data-dependent choice.
__device__ __noinline__ int fpTwice(int x) { return 2 * x; }
__device__ __noinline__ int fpSquare(int x) { return x * x; }
__device__ __noinline__ int fpNeg(int x) { return -x; }
typedef int (*IntFn)(int);
__device__ IntFn g_fns[3] = {fpTwice, fpSquare, fpNeg};
extern "C" __global__ void funcPointers(const int *in, int *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    IntFn f = g_fns[i % 3];
    IntFn h = (in[i] & 1) ? fpTwice : fpNeg;
    out[i] = f(in[i]) + h(in[i] + 1);
}
// Device-side heap.
extern "C" __global__ void deviceHeap(int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int *p = (int *)malloc(n * sizeof(int));
    if (p == nullptr) { out[i] = -1; return; }
    for (int k = 0; k < n; ++k) p[k] = i * k;
    int s = 0;
    for (int k = 0; k < n; ++k) s += p[k];
    free(p);
    out[i] = s;
}
// Cooperative-groups tiles and coalesced groups inside divergent code.
extern "C" __global__ void cgTiles(const int *in, int *out) {
    cg::thread_block cta = cg::this_thread_block();
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    int v = in[i];
    cg::thread_block_tile<8> tile8 = cg::tiled_partition<8>(cta);
    int s8 = cg::reduce(tile8, v, cg::plus<int>());
    int up = tile8.shfl_up(v, 1);
    int r = 0;
    if (v & 1) {  // a divergent branch: the odd values form a coalesced group per warp
        cg::coalesced_group active = cg::coalesced_threads();
        r = active.size() * 1000 + active.thread_rank();
        r += active.shfl(v, 0) * 0;
    }
    out[4 * i] = s8;
    out[4 * i + 1] = up;
    out[4 * i + 2] = r;
    out[4 * i + 3] = tile8.meta_group_rank();
}
// Threads that exit early must take no part in later stores, atomics, votes, barriers or printf.
extern "C" __global__ void earlyExit(const int *in, int *out, int *count) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    if (v % 3 == 0) return;
    out[4 * i] = v * 2;
    atomicAdd(count, 1);
    unsigned b = __ballot_sync(__activemask(), v & 1);
    int n = __syncthreads_count(v > 50);
    int s = 0;
    for (int k = 0; k < (v & 7); ++k) s += k;
    out[4 * i + 1] = b;
    out[4 * i + 2] = n;
    out[4 * i + 3] = s;
    if (v == 1) printf("v1 at %d\n", i);
}
