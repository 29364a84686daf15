// An out-of-bounds kernel: the launch returns success; the next synchronising call reports the illegal
// address, and the error is sticky. With "trap" a kernel traps; with "assert" a device assert fails.
#include <cassert>
#include <cstring>
#include "../common.h"

__global__ void oob(int *p, int n) { p[threadIdx.x * 1000000] = n; }
__global__ void trapper() { if (threadIdx.x == 3) __trap(); }
__global__ void asserter(int v) { assert(v == 42); }

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "oob";
    int *d;
    CHECK(cudaMalloc(&d, 1024));
    if (!std::strcmp(mode, "oob")) oob<<<1, 64>>>(d, 5);
    else if (!std::strcmp(mode, "trap")) trapper<<<1, 32>>>();
    else asserter<<<1, 1>>>(7);
    std::printf("launch=%d\n", (int)cudaGetLastError());
    cudaError_t e = cudaDeviceSynchronize();
    std::printf("sync=%s\n", cudaGetErrorName(e));
    std::printf("sticky=%s\n", cudaGetErrorName(cudaMalloc(&d, 16)));
    std::printf("last=%s\n", cudaGetErrorName(cudaGetLastError()));
    std::printf("still=%s\n", cudaGetErrorName(cudaGetLastError()));
    return 0;
}
