// Kernels end to end: templates, a second translation unit, device globals, __constant__ memory with
// cudaMemcpyToSymbol, kernels on streams ordered by events, a struct passed by value, printf, dynamic
// shared memory, function attributes and occupancy. Prints one "name=value" line per check.
#include <cstring>
#include <vector>
#include "../common.h"

struct Params {  // passed by value: 4 + 4 + 8 + 3*4 (+ padding) bytes
    int n;
    float scale;
    double offset;
    int taps[3];
};

__constant__ float coeffs[4];
__device__ int global_counter;
__device__ float table[256];

template <typename T>
__global__ void scale_add(T *out, const T *in, T factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * factor + (T)1;
}

__global__ void with_struct(Params p, float *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n) out[i] = p.scale * i + (float)p.offset + p.taps[0] + p.taps[1] + p.taps[2];
}

__global__ void poly(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = coeffs[0] + v * (coeffs[1] + v * (coeffs[2] + v * coeffs[3]));
        atomicAdd(&global_counter, 1);
    }
}

__global__ void block_sum(const int *in, int *out, int n) {
    extern __shared__ int buf[];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    buf[t] = i < n ? in[i] : 0;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = buf[0];
}

__global__ void hello(int tag) {
    if (threadIdx.x < 2) printf("hello from block %d thread %d tag %d\n", blockIdx.x, threadIdx.x, tag);
}

__global__ void read_table(float *out) { out[threadIdx.x] = table[threadIdx.x] * 2.0f; }

void launch_tu2(int *data, int n, cudaStream_t s);  // defined in tu2.cu

int main() {
    const int n = 10000;
    std::vector<float> hx(n), hy(n);
    for (int i = 0; i < n; i++) hx[i] = (float)(i % 100) / 10.0f;
    float *x, *y;
    CHECK(cudaMalloc(&x, n * sizeof(float)));
    CHECK(cudaMalloc(&y, n * sizeof(float)));
    CHECK(cudaMemcpy(x, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));

    // template instantiations, float and double
    scale_add<float><<<(n + 127) / 128, 128>>>(y, x, 3.0f, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(hy.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += hy[i] != hx[i] * 3.0f + 1.0f;
    std::printf("template_float=%s\n", bad ? "wrong" : "ok");
    double *dx, *dy;
    std::vector<double> hd(n), hd2(n);
    for (int i = 0; i < n; i++) hd[i] = i * 0.25;
    CHECK(cudaMalloc(&dx, n * sizeof(double)));
    CHECK(cudaMalloc(&dy, n * sizeof(double)));
    CHECK(cudaMemcpy(dx, hd.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    scale_add<double><<<(n + 255) / 256, 256>>>(dy, dx, 0.5, n);
    CHECK(cudaMemcpy(hd2.data(), dy, n * sizeof(double), cudaMemcpyDeviceToHost));
    bad = 0;
    for (int i = 0; i < n; i++) bad += hd2[i] != hd[i] * 0.5 + 1.0;
    std::printf("template_double=%s\n", bad ? "wrong" : "ok");

    // struct by value
    Params p{n, 0.5f, 2.25, {1, 2, 3}};
    with_struct<<<(n + 63) / 64, 64>>>(p, y);
    CHECK(cudaMemcpy(hy.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
    bad = 0;
    for (int i = 0; i < n; i++) bad += hy[i] != 0.5f * i + 2.25f + 6.0f;
    std::printf("struct_by_value=%s\n", bad ? "wrong" : "ok");

    // __constant__ + cudaMemcpyToSymbol, a __device__ counter read back with cudaMemcpyFromSymbol
    float c[4] = {1.0f, 2.0f, 0.5f, 0.25f};
    CHECK(cudaMemcpyToSymbol(coeffs, c, sizeof c));
    int zero = 0;
    CHECK(cudaMemcpyToSymbol(global_counter, &zero, sizeof zero));
    poly<<<(n + 127) / 128, 128>>>(x, y, n);
    CHECK(cudaMemcpy(hy.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
    bad = 0;
    for (int i = 0; i < n; i++) {
        float v = hx[i], want = c[0] + v * (c[1] + v * (c[2] + v * c[3]));
        bad += std::fabs(hy[i] - want) > 1e-4f * std::fabs(want) + 1e-5f;
    }
    int counter = -1;
    CHECK(cudaMemcpyFromSymbol(&counter, global_counter, sizeof counter));
    std::printf("constant_memory=%s counter=%d\n", bad ? "wrong" : "ok", counter);
    void *table_addr = nullptr;
    size_t table_size = 0;
    CHECK(cudaGetSymbolAddress(&table_addr, table));
    CHECK(cudaGetSymbolSize(&table_size, table));
    std::vector<float> t(256);
    for (int i = 0; i < 256; i++) t[i] = (float)i;
    CHECK(cudaMemcpy(table_addr, t.data(), sizeof(float) * 256, cudaMemcpyHostToDevice));  // through the address
    read_table<<<1, 256>>>(y);
    CHECK(cudaMemcpy(hy.data(), y, 256 * sizeof(float), cudaMemcpyDeviceToHost));
    std::printf("symbol_address=%s size=%zu\n", hy[255] == 510.0f ? "ok" : "wrong", table_size);
    EXPECT_ERR(cudaMemcpyToSymbol(coeffs, c, sizeof c, 4), cudaErrorInvalidValue);  // past the end

    // streams + events + dynamic shared memory; a kernel from the second translation unit
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    const int m = 1 << 16, threads = 256, blocks = m / threads;
    std::vector<int> hi(m);
    for (int i = 0; i < m; i++) hi[i] = i % 7;
    int *in, *sums;
    CHECK(cudaMalloc(&in, m * sizeof(int)));
    CHECK(cudaMalloc(&sums, blocks * sizeof(int)));
    CHECK(cudaMemcpyAsync(in, hi.data(), m * sizeof(int), cudaMemcpyHostToDevice, s1));
    launch_tu2(in, m, s1);  // doubles every element
    cudaEvent_t ready;
    CHECK(cudaEventCreate(&ready));
    CHECK(cudaEventRecord(ready, s1));
    CHECK(cudaStreamWaitEvent(s2, ready, 0));
    block_sum<<<blocks, threads, threads * sizeof(int), s2>>>(in, sums, m);
    std::vector<int> hs(blocks);
    CHECK(cudaMemcpyAsync(hs.data(), sums, blocks * sizeof(int), cudaMemcpyDeviceToHost, s2));
    CHECK(cudaStreamSynchronize(s2));
    long total = 0, want = 0;
    for (int v : hs) total += v;
    for (int v : hi) want += 2 * v;
    std::printf("streams_events_dynshared=%s\n", total == want ? "ok" : "wrong");

    cudaFuncAttributes fa;
    std::memset(&fa, 0xEE, sizeof fa);
    CHECK(cudaFuncGetAttributes(&fa, block_sum));
    // ptxVersion: the virtual architecture of the PTX the kernel came from (compute_52, nvcc 11.8's default: 52)
    std::printf("func_attrs maxThreads=%d ptx=%d\n", fa.maxThreadsPerBlock, fa.ptxVersion >= 50);
    int occ = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, block_sum, 256, 256 * sizeof(int)));
    std::printf("occupancy_positive=%d\n", occ > 0);
    CHECK(cudaFuncSetAttribute(block_sum, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
    CHECK(cudaFuncSetCacheConfig(block_sum, cudaFuncCachePreferShared));
    EXPECT_ERR(cudaFuncGetAttributes(&fa, (const void *)main), cudaErrorInvalidDeviceFunction);
    // a bad launch configuration is reported by the launch itself and is not sticky
    scale_add<float><<<1, 2048>>>(y, x, 1.0f, n);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidConfiguration);

    std::fflush(stdout);
    hello<<<2, 32>>>(7);
    CHECK(cudaDeviceSynchronize());
    std::printf("after_printf=ok\n");
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dy));
    CHECK(cudaFree(in));
    CHECK(cudaFree(sums));
    std::printf("OK\n");
    return 0;
}
