// mbarrier through libcu++ (cuda::barrier, cuda::memcpy_async, cuda::pipeline) and raw PTX, plus
#pragma nv_diag_suppress static_var_with_dynamic_init
// griddepcontrol (sm_90).
#include <cuda/barrier>
#include <cuda/pipeline>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// Producer/consumer over shared memory with a block-scoped cuda::barrier, several phases: each phase every
// thread writes its slot, arrives and waits, then reads a neighbour's slot.
extern "C" __global__ void barrierPhases(int *out, int phases) {
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    __shared__ int buf[256];
    auto block = cg::this_thread_block();
    if (block.thread_rank() == 0) init(&bar, block.size());
    block.sync();
    int acc = 0;
    for (int p = 0; p < phases; p++) {
        buf[threadIdx.x] = threadIdx.x * (p + 1) + blockIdx.x;
        bar.arrive_and_wait();
        acc += buf[(threadIdx.x + 1 + p) % blockDim.x];
        bar.arrive_and_wait();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// cuda::memcpy_async into shared memory completed through a cuda::barrier (cp.async + mbarrier)
extern "C" __global__ void memcpyAsyncBarrier(const int *in, int *out, int n) {
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    __shared__ int tile[256];
    auto block = cg::this_thread_block();
    if (block.thread_rank() == 0) init(&bar, block.size());
    block.sync();
    for (int base = blockIdx.x * blockDim.x; base < n; base += gridDim.x * blockDim.x) {
        cuda::memcpy_async(block, tile, in + base, sizeof(int) * blockDim.x, bar);
        bar.arrive_and_wait();
        out[base + threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x] * 3;
        bar.arrive_and_wait();
    }
}

// A two-stage cuda::pipeline (producer_acquire / commit / consumer_wait / release) per thread
extern "C" __global__ void pipelineStages(const int *in, int *out, int tiles) {
    __shared__ int stage[2][128];
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
    int t = threadIdx.x;
    int sum = 0;
    for (int k = 0; k < 2 && k < tiles; k++) {
        pipe.producer_acquire();
        cuda::memcpy_async(&stage[k][t], &in[k * blockDim.x + t], sizeof(int), pipe);
        pipe.producer_commit();
    }
    for (int k = 0; k < tiles; k++) {
        cuda::pipeline_consumer_wait_prior<1>(pipe);
        sum += stage[k % 2][t] * (k + 1);
        pipe.consumer_release();
        if (k + 2 < tiles) {
            pipe.producer_acquire();
            cuda::memcpy_async(&stage[k % 2][t], &in[(k + 2) * blockDim.x + t], sizeof(int), pipe);
            pipe.producer_commit();
        }
    }
    out[t] = sum;
}

// Raw PTX: arrive returns a state; test_wait with it, pending_count, arrive_drop, expect_tx/complete_tx,
// try_wait.parity. One thread per block records what it sees.
extern "C" __global__ void rawMbarrier(unsigned long long *out) {
    __shared__ unsigned long long mb;
    unsigned a = (unsigned)__cvta_generic_to_shared(&mb);
    if (threadIdx.x == 0) asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(a), "r"(4));
    __syncthreads();
    unsigned long long st = 0;
    unsigned pend = 0, done = 0;
    if (threadIdx.x < 3) {  // 3 of 4 arrivals: the phase is not complete
        asm volatile("mbarrier.arrive.shared.b64 %0, [%1];" : "=l"(st) : "r"(a));
    }
    __syncthreads();
    if (threadIdx.x == 2) {
        asm volatile("mbarrier.pending_count.b64 %0, %1;" : "=r"(pend) : "l"(st));
        asm volatile("{ .reg .pred p; mbarrier.test_wait.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(a), "l"(st));
        out[0] = pend;  // pending before thread 2's arrival: 2
        out[1] = done;  // 0
        // the fourth arrival drops one expected arrival for later phases and completes phase 0
        asm volatile("mbarrier.arrive_drop.shared.b64 _, [%0];" ::"r"(a));
        asm volatile("{ .reg .pred p; mbarrier.test_wait.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(a), "l"(st));
        out[2] = done;  // 1
        // phase 1 expects 3 arrivals and 100 transaction bytes
        asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], 100;" ::"r"(a));
        asm volatile("mbarrier.arrive.shared.b64 _, [%0], 2;" ::"r"(a));
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(a), "r"(1));
        out[3] = done;  // 0: 100 bytes pending
        asm volatile("mbarrier.complete_tx.shared.b64 [%0], 100;" ::"r"(a));
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(a), "r"(1));
        out[4] = done;  // 1
        asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(a), "r"(0));
        out[5] = done;  // 0: phase 2 (parity 0) is the current one
    }
}

// griddepcontrol (programmatic dependent launch): the secondary waits for the primary's results.
extern "C" __global__ void pdlPrimary(int *a) {
    a[threadIdx.x] = threadIdx.x + 1;
    asm volatile("griddepcontrol.launch_dependents;");
}
extern "C" __global__ void pdlSecondary(const int *a, int *b) {
    asm volatile("griddepcontrol.wait;");
    b[threadIdx.x] = a[threadIdx.x] * 2;
}

// Misuse: arrive on an mbarrier that was never initialised (mode 0), init with a count of 0 (mode 1).
extern "C" __global__ void badMbarrier(int mode) {
    __shared__ unsigned long long mb;
    unsigned a = (unsigned)__cvta_generic_to_shared(&mb);
    if (mode == 0) {
        mb = 0;
        asm volatile("mbarrier.arrive.shared.b64 _, [%0];" ::"r"(a));
    } else {
        asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(a), "r"(0));
    }
}
