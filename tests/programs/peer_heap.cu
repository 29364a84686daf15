// Device-side malloc() with peer access enabled (needs two devices).
// CUDA Programming Guide, "Dynamic Global Memory Allocation and Operations": memory allocated by malloc() in
// device code persists for the lifetime of the context, and the heap's size is cudaLimitMallocHeapSize, set
// before the first kernel that allocates; a malloc() the heap cannot satisfy returns NULL.
// Kernels run on device 0 with peer access to device 1 enabled, so they see both devices' memory.
#include "common.h"

__device__ int *g_block;

__global__ void alloc_and_fill(const int *remote, int n, int *ok) {
    g_block = (int *)malloc(n * sizeof(int));
    *ok = g_block != nullptr;
    if (g_block)
        for (int i = 0; i < n; i++) g_block[i] = remote[i] + i;  // a load of device 1's memory
}

__global__ void sum_block(int n, long long *sum) {
    long long s = 0;
    for (int i = 0; i < n; i++) s += g_block[i];
    *sum = s;
}

__global__ void try_malloc(size_t bytes, int *ok) {
    void *p = malloc(bytes);
    *ok = p != nullptr;
    free(p);
}

__global__ void free_block() { free(g_block); }

int main() {
    const int n = 4096;  // a 16 KiB block
    const size_t heap = 64 << 10;
    int *remote;
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&remote, n * sizeof(int)));
    CHECK(cudaMemset(remote, 0, n * sizeof(int)));
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceEnablePeerAccess(1, 0));
    CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, heap));
    int *ok;
    long long *sum;
    CHECK(cudaMalloc(&ok, sizeof(int)));
    CHECK(cudaMalloc(&sum, sizeof(long long)));
    int h = -1;
    long long hs = -1;
    alloc_and_fill<<<1, 1>>>(remote, n, ok);
    CHECK(cudaMemcpy(&h, ok, sizeof h, cudaMemcpyDeviceToHost));
    std::printf("alloc=%d\n", h);
    sum_block<<<1, 1>>>(n, sum);  // the next launch reads the block the previous one allocated
    CHECK(cudaMemcpy(&hs, sum, sizeof hs, cudaMemcpyDeviceToHost));
    std::printf("sum=%lld expected=%lld\n", hs, (long long)n * (n - 1) / 2);
    size_t v = 0;
    CHECK(cudaDeviceGetLimit(&v, cudaLimitMallocHeapSize));
    std::printf("limit=%zu\n", v);
    // 16 KiB of the 64 KiB heap are held: 56 KiB more cannot fit, 40 KiB can (freed again at once).
    try_malloc<<<1, 1>>>(56 << 10, ok);
    CHECK(cudaMemcpy(&h, ok, sizeof h, cudaMemcpyDeviceToHost));
    std::printf("malloc_56KiB=%d\n", h);
    try_malloc<<<1, 1>>>(40 << 10, ok);
    CHECK(cudaMemcpy(&h, ok, sizeof h, cudaMemcpyDeviceToHost));
    std::printf("malloc_40KiB=%d\n", h);
    free_block<<<1, 1>>>();
    try_malloc<<<1, 1>>>(56 << 10, ok);  // the block is back in the heap
    CHECK(cudaMemcpy(&h, ok, sizeof h, cudaMemcpyDeviceToHost));
    std::printf("malloc_56KiB_after_free=%d\n", h);
    CHECK(cudaDeviceSynchronize());
    std::printf("OK\n");
    return 0;
}
