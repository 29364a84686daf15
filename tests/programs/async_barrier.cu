// sm_90 asynchronous features: cub::DeviceMergeSort (whose kernels use griddepcontrol, programmatic dependent
// launch), a cudaLaunchKernelEx launch with cudaLaunchAttributeProgrammaticStreamSerialization whose secondary
// kernel calls cudaGridDependencySynchronize (CUDA C++ Programming Guide, "Programmatic Dependent Launch and
// Synchronization"), and cuda::barrier / cuda::memcpy_async / cuda::pipeline kernels (mbarrier, cp.async).
// Results are checked on the host; prints key=value lines.
#pragma nv_diag_suppress static_var_with_dynamic_init
#include <cooperative_groups.h>
#include <cub/device/device_merge_sort.cuh>
#include <cuda/barrier>
#include <cuda/pipeline>

#include <algorithm>
#include <vector>

#include "common.h"
namespace cg = cooperative_groups;

struct Less {
    __device__ bool operator()(int a, int b) const { return a < b; }
};

__global__ void primary(int *a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = i * 3 + 1;
    cudaTriggerProgrammaticLaunchCompletion();
}

__global__ void secondary(const int *a, int *b, int n) {
    cudaGridDependencySynchronize();  // the primary's writes are visible after this
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = a[i] * 2;
}

// Tiles copied into shared memory with cuda::memcpy_async and a block-scoped cuda::barrier; each tile is
// reversed and scaled.
__global__ void tiles_barrier(const int *in, int *out, int n) {
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    __shared__ int tile[128];
    auto block = cg::this_thread_block();
    if (block.thread_rank() == 0) init(&bar, block.size());
    block.sync();
    for (int base = blockIdx.x * blockDim.x; base < n; base += gridDim.x * blockDim.x) {
        cuda::memcpy_async(block, tile, in + base, sizeof(int) * blockDim.x, bar);
        bar.arrive_and_wait();
        out[base + threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x] * 5;
        bar.arrive_and_wait();
    }
}

// A two-stage per-thread cuda::pipeline: out[t] = sum over k of in[k][t] * (k + 1).
__global__ void pipeline_sum(const int *in, int *out, int tiles) {
    __shared__ int stage[2][128];
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
    int t = threadIdx.x, sum = 0;
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

int main() {
    // merge sort
    const int n = 20000;
    std::vector<int> h(n);
    unsigned x = 7;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        h[i] = (int)(x >> 4) - (1 << 27);
    }
    int *d;
    CHECK(cudaMalloc(&d, n * sizeof(int)));
    CHECK(cudaMemcpy(d, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    size_t temp_bytes = 0;
    CHECK(cub::DeviceMergeSort::SortKeys(nullptr, temp_bytes, d, n, Less()));
    void *temp;
    CHECK(cudaMalloc(&temp, temp_bytes));
    CHECK(cub::DeviceMergeSort::SortKeys(temp, temp_bytes, d, n, Less()));
    std::vector<int> got(n);
    CHECK(cudaMemcpy(got.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
    std::sort(h.begin(), h.end());
    std::printf("merge_sort_ok=%d\n", got == h);

    // programmatic dependent launch
    const int m = 1000;
    int *a, *b;
    CHECK(cudaMalloc(&a, m * sizeof(int)));
    CHECK(cudaMalloc(&b, m * sizeof(int)));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    primary<<<(m + 127) / 128, 128, 0, s>>>(a, m);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((m + 127) / 128);
    cfg.blockDim = dim3(128);
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CHECK(cudaLaunchKernelEx(&cfg, secondary, (const int *)a, b, m));
    std::vector<int> hb(m);
    CHECK(cudaMemcpyAsync(hb.data(), b, m * sizeof(int), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    int pdl_errors = 0;
    for (int i = 0; i < m; i++) pdl_errors += hb[i] != (i * 3 + 1) * 2;
    std::printf("pdl_errors=%d\n", pdl_errors);
    // an attribute list that is not there is refused
    cfg.attrs = nullptr;
    std::printf("null_attrs=%d\n", (int)cudaLaunchKernelEx(&cfg, secondary, (const int *)a, b, m));

    // cuda::barrier + memcpy_async
    const int t = 128 * 8;
    std::vector<int> hin(t), hout(t);
    for (int i = 0; i < t; i++) hin[i] = i * 7 - 300;
    int *din, *dout;
    CHECK(cudaMalloc(&din, t * sizeof(int)));
    CHECK(cudaMalloc(&dout, t * sizeof(int)));
    CHECK(cudaMemcpy(din, hin.data(), t * sizeof(int), cudaMemcpyHostToDevice));
    tiles_barrier<<<3, 128>>>(din, dout, t);
    CHECK(cudaMemcpy(hout.data(), dout, t * sizeof(int), cudaMemcpyDeviceToHost));
    int barrier_errors = 0;
    for (int i = 0; i < t; i++) barrier_errors += hout[i] != hin[(i / 128) * 128 + 127 - i % 128] * 5;
    std::printf("barrier_errors=%d\n", barrier_errors);

    // cuda::pipeline
    const int tiles = 6;
    pipeline_sum<<<1, 128>>>(din, dout, tiles);
    CHECK(cudaMemcpy(hout.data(), dout, 128 * sizeof(int), cudaMemcpyDeviceToHost));
    int pipeline_errors = 0;
    for (int i = 0; i < 128; i++) {
        int want = 0;
        for (int k = 0; k < tiles; k++) want += hin[k * 128 + i] * (k + 1);
        pipeline_errors += hout[i] != want;
    }
    std::printf("pipeline_errors=%d\n", pipeline_errors);
    return 0;
}
