// Cooperative groups' grid sync through cudaLaunchCooperativeKernel (CUDA C++ Programming Guide, "Grid
// Synchronization"): each block sums what every block wrote before the sync. Prints key=value lines.
#include <cooperative_groups.h>

#include "common.h"
namespace cg = cooperative_groups;

__global__ void phases(int *a, long long *sums) {
    cg::grid_group g = cg::this_grid();
    unsigned long long i = g.thread_rank(), n = g.size();
    a[i] = (int)i;
    g.sync();
    if (threadIdx.x == 0) {
        long long s = 0;
        for (unsigned long long j = 0; j < n; j++) s += a[j];
        sums[blockIdx.x] = s;
    }
}

int main() {
    int coop = 0;
    CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
    std::printf("cooperative_attr=%d\n", coop);
    const int blocks = 16, threads = 128, n = blocks * threads;
    int *a;
    long long *sums;
    CHECK(cudaMalloc(&a, n * sizeof(int)));
    CHECK(cudaMalloc(&sums, blocks * sizeof(long long)));
    void *args[] = {&a, &sums};
    CHECK(cudaLaunchCooperativeKernel((void *)phases, blocks, threads, args, 0, 0));
    long long h[blocks];
    CHECK(cudaMemcpy(h, sums, sizeof h, cudaMemcpyDeviceToHost));
    int errors = 0;
    for (int b = 0; b < blocks; b++) errors += h[b] != (long long)n * (n - 1) / 2;
    std::printf("grid_sync_errors=%d\n", errors);
    return 0;
}
