// Warp-level reductions as tutorials write them: a block sum with __shfl_down_sync (one value per warp in
// shared memory, then the first warp), and a count of positive values per warp with __ballot_sync,
// __reduce_add_sync and __all_sync over the live lanes (__activemask) of a grid whose last warp is partial.
// Built for sm_90 (__reduce_add_sync needs sm_80+). The host recomputes everything and prints key=value lines;
// the exit status is 0 when all match.
#include <vector>

#include "common.h"

extern "C" __global__ void block_sum(const int *in, unsigned long long *out, int n) {
    __shared__ int part[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) part[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < blockDim.x / 32 ? part[lane] : 0;
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0) atomicAdd(out, (unsigned long long)(long long)v);
    }
}

extern "C" __global__ void count_positive(const int *in, int *count, int *mismatch, int *warps_all, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned m = __activemask();
    bool pos = in[i] > 0;
    unsigned b = __ballot_sync(m, pos);
    int c = (int)__reduce_add_sync(m, pos ? 1u : 0u);
    int all = __all_sync(m, pos);
    if (c != __popc(b)) atomicAdd(mismatch, 1);
    if ((int)(threadIdx.x & 31) == __ffs(m) - 1) {
        atomicAdd(count, c);
        atomicAdd(warps_all, all);
    }
}

int main() {
    const int n = (1 << 20) + 77, threads = 256, blocks = (n + threads - 1) / threads;
    std::vector<int> h(n);
    unsigned x = 2024;
    long long want_sum = 0;
    int want_pos = 0, want_all = 0;
    for (int i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        h[i] = (int)((x >> 8) % 2001) - 1000;
        if (i / 32 % 97 == 5) h[i] = 1 + (int)(x >> 28);  // some warps entirely positive
        want_sum += h[i];
        want_pos += h[i] > 0;
    }
    for (int w = 0; w * 32 < n; w++) {
        bool all = true;
        for (int i = w * 32; i < n && i < w * 32 + 32; i++) all = all && h[i] > 0;
        want_all += all;
    }
    int *d_in, *d_counts;
    unsigned long long *d_sum;
    CHECK(cudaMalloc(&d_in, n * sizeof(int)));
    CHECK(cudaMalloc(&d_counts, 3 * sizeof(int)));
    CHECK(cudaMalloc(&d_sum, sizeof(unsigned long long)));
    CHECK(cudaMemcpy(d_in, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(d_counts, 0, 3 * sizeof(int)));
    CHECK(cudaMemset(d_sum, 0, sizeof(unsigned long long)));
    block_sum<<<blocks, threads>>>(d_in, d_sum, n);
    CHECK(cudaGetLastError());
    count_positive<<<blocks, threads>>>(d_in, d_counts, d_counts + 1, d_counts + 2, n);
    CHECK(cudaGetLastError());
    unsigned long long sum;
    int counts[3];
    CHECK(cudaMemcpy(&sum, d_sum, sizeof sum, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(counts, d_counts, sizeof counts, cudaMemcpyDeviceToHost));
    std::printf("sum=%lld\nsum_expected=%lld\n", (long long)sum, want_sum);
    std::printf("positives=%d\npositives_expected=%d\nballot_mismatch=%d\n", counts[0], want_pos, counts[1]);
    std::printf("warps_all=%d\nwarps_all_expected=%d\n", counts[2], want_all);
    bool ok = (long long)sum == want_sum && counts[0] == want_pos && counts[1] == 0 && counts[2] == want_all;
    std::printf("%s\n", ok ? "PASSED" : "FAILED");
    return ok ? 0 : 1;
}
