// Limits, cache configuration, stream-ordered allocation, capture status, peer copies and peer access,
// function names. Run against a server with two devices.
#include <cstring>
#include "common.h"

__global__ void fill(int *p, int v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v + i;
}

__global__ void heap_probe(int *ok, size_t bytes) {
    void *p = malloc(bytes);
    *ok = p != nullptr;
    if (p) free(p);
}

int main() {
    size_t v = 0;
    CHECK(cudaDeviceGetLimit(&v, cudaLimitMallocHeapSize));
    std::printf("heap_default=%zu\n", v);
    CHECK(cudaDeviceGetLimit(&v, cudaLimitStackSize));
    std::printf("stack_default=%zu\n", v);
    int *ok;
    CHECK(cudaMalloc(&ok, sizeof(int)));
    heap_probe<<<1, 1>>>(ok, 1 << 20);
    int h = -1;
    CHECK(cudaMemcpy(&h, ok, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 4096));
    CHECK(cudaDeviceGetLimit(&v, cudaLimitMallocHeapSize));
    heap_probe<<<1, 1>>>(ok, 1 << 20);
    int h2 = -1;
    CHECK(cudaMemcpy(&h2, ok, sizeof h2, cudaMemcpyDeviceToHost));
    std::printf("heap_set=%zu malloc_1MiB=%d,%d\n", v, h, h2);
    EXPECT_ERR(cudaDeviceSetLimit((cudaLimit)77, 1), cudaErrorUnsupportedLimit);

    cudaFuncCache cc;
    CHECK(cudaDeviceSetCacheConfig(cudaFuncCachePreferL1));
    CHECK(cudaDeviceGetCacheConfig(&cc));
    std::printf("cache_config=%d\n", (int)cc);

    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusActive;
    CHECK(cudaStreamIsCapturing(s, &cs));
    std::printf("capturing=%d\n", (int)cs);
    int *a;
    const int n = 4096;
    CHECK(cudaMallocAsync((void **)&a, n * sizeof(int), s));
    fill<<<n / 256, 256, 0, s>>>(a, 7, n);
    int back[4];
    CHECK(cudaMemcpyAsync(back, a + 100, sizeof back, cudaMemcpyDeviceToHost, s));
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaStreamSynchronize(s));
    std::printf("malloc_async=%d\n", back[0] == 107 && back[3] == 110);
    EXPECT_ERR(cudaFreeAsync(a, s), cudaErrorInvalidValue);  // already freed

    int ndev = 0;
    CHECK(cudaGetDeviceCount(&ndev));
    if (ndev >= 2) {
        int *d0, *d1;
        CHECK(cudaSetDevice(0));
        CHECK(cudaMalloc(&d0, n * sizeof(int)));
        fill<<<n / 256, 256>>>(d0, 1000, n);
        CHECK(cudaSetDevice(1));
        CHECK(cudaMalloc(&d1, n * sizeof(int)));
        CHECK(cudaMemcpyPeer(d1, 1, d0, 0, n * sizeof(int)));
        CHECK(cudaMemcpy(back, d1 + 5, sizeof back, cudaMemcpyDeviceToHost));
        std::printf("peer_copy=%d\n", back[0] == 1005);
        int can = -1;
        CHECK(cudaDeviceCanAccessPeer(&can, 1, 0));
        CHECK(cudaDeviceEnablePeerAccess(0, 0));
        EXPECT_ERR(cudaDeviceEnablePeerAccess(0, 0), cudaErrorPeerAccessAlreadyEnabled);
        CHECK(cudaDeviceDisablePeerAccess(0));
        EXPECT_ERR(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled);
        EXPECT_ERR(cudaDeviceEnablePeerAccess(1, 0), cudaErrorInvalidDevice);
        std::printf("peer_access=%d\n", can);
        CHECK(cudaSetDevice(0));
    }
    const char *name = nullptr;
    CHECK(cudaFuncGetName(&name, fill));
    std::printf("func_name=%s\n", name);
    CHECK(cudaInitDevice(0, 0, 0));
    EXPECT_ERR(cudaInitDevice(99, 0, 0), cudaErrorInvalidDevice);
    std::printf("OK\n");
    return 0;
}
