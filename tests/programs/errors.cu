// The errors a real GPU returns for bad arguments: invalid device, invalid or foreign pointers, double
// free, copies past an allocation, foreign handles; and the last-error rules.
#include <cstring>
#include "common.h"

__global__ void touch(int *p) { p[threadIdx.x] = 1; }

int main(int argc, char **argv) {
    int n = 0;
    CHECK(cudaGetDeviceCount(&n));
    cudaDeviceProp p;
    EXPECT_ERR(cudaGetDeviceProperties(&p, n), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaGetDeviceProperties(&p, -1), cudaErrorInvalidDevice);
    int v;
    EXPECT_ERR(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, n + 3), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaSetDevice(-1), cudaErrorInvalidDevice);

    char *d;
    CHECK(cudaMalloc(&d, 1000));
    char host[2000];
    std::memset(host, 1, sizeof host);
    // a copy that runs past the end of the allocation
    EXPECT_ERR(cudaMemcpy(d, host, 1001, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(host, d + 500, 501, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemset(d + 999, 0, 2), cudaErrorInvalidValue);
    // a pointer that is not device memory, used as one
    EXPECT_ERR(cudaMemcpy(host, (void *)0x1234, 10, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    EXPECT_ERR(cudaFree(host), cudaErrorInvalidValue);
    EXPECT_ERR(cudaFree(d + 8), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(host, d, 10, (cudaMemcpyKind)42), cudaErrorInvalidMemcpyDirection);
    CHECK(cudaFree(d));
    EXPECT_ERR(cudaFree(d), cudaErrorInvalidValue);  // double free
    CHECK(cudaFree(nullptr));
    EXPECT_ERR(cudaFreeHost(host), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMalloc(&d, (size_t)1 << 60), cudaErrorMemoryAllocation);
    EXPECT_ERR(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
    EXPECT_ERR(cudaGetLastError(), cudaErrorMemoryAllocation);
    CHECK(cudaGetLastError());
    std::printf("name=%s string=%s\n", cudaGetErrorName(cudaErrorInvalidValue), cudaGetErrorString(cudaErrorInvalidValue));
    std::printf("unknown=%s\n", cudaGetErrorString((cudaError_t)12345));

    if (argc > 1 && std::strcmp(argv[1], "launch") == 0) {
        int *k;
        CHECK(cudaMalloc(&k, 64 * sizeof(int)));
        touch<<<1, 64>>>(k);
        cudaError_t e = cudaGetLastError();
        std::printf("launch=%d %s\n", (int)e, cudaGetErrorName(e));
        CHECK(cudaFree(k));
    }
    std::printf("OK\n");
    return 0;
}
