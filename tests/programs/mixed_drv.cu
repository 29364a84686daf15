// Runtime and driver calls on one stream in one process: the stream from cudaStreamCreate is the
// CUstream, cudaMalloc's pointer the CUdeviceptr, the runtime's context the primary context, and the
// driver's functions come from cuGetProcAddress as well as from cudaGetDriverEntryPoint.
#include <cuda.h>
#include <cudaTypedefs.h>

#include "common.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations" // cudaGetDriverEntryPoint is tested on purpose

#define CU(call)                                                                                  \
    do {                                                                                          \
        CUresult r_ = (call);                                                                     \
        if (r_ != CUDA_SUCCESS) {                                                                 \
            std::fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, (int)r_);   \
            std::exit(1);                                                                         \
        }                                                                                         \
    } while (0)

__global__ void add_one(int *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1;
}

static void CUDA_CB mark(void *p) { *(int *)p = 1; }

int main() {
    const int n = 1024;
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0));
    // no cuInit: the runtime has initialised the driver, so driver calls work at once
    CUcontext cur = nullptr, primary = nullptr;
    CU(cuCtxGetCurrent(&cur));
    CU(cuDevicePrimaryCtxRetain(&primary, 0));
    if (cur != primary) { std::fprintf(stderr, "runtime context %p is not the primary context %p\n", cur, primary); return 1; }

    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int *d = nullptr;
    CHECK(cudaMalloc(&d, n * sizeof(int)));
    // driver memset, runtime kernel, driver kernel-free copy back, all in the order of one stream
    CU(cuMemsetD32Async((CUdeviceptr)d, 41, n, (CUstream)s));
    add_one<<<n / 256, 256, 0, s>>>(d, n);
    CHECK(cudaGetLastError());
    // the driver function the runtime hands out, by version (CUDA 12.5+)
    PFN_cuMemsetD32Async_v3020 memset32 = nullptr;
    cudaDriverEntryPointQueryResult q;
    CHECK(cudaGetDriverEntryPointByVersion("cuMemsetD32Async", (void **)&memset32, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !memset32) { std::fprintf(stderr, "entry point: %d\n", (int)q); return 1; }
    CU(memset32((CUdeviceptr)(d + n / 2), 100, n / 2, (CUstream)s));
    void *none = (void *)1;
    CHECK(cudaGetDriverEntryPoint("cuNoSuchThing", &none, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSymbolNotFound || none) { std::fprintf(stderr, "unknown symbol: %d\n", (int)q); return 1; }
    int done = 0;
    CU(cuLaunchHostFunc((CUstream)s, mark, &done));
    int h[n];
    CU(cuMemcpyDtoHAsync(h, (CUdeviceptr)d, sizeof h, (CUstream)s));
    CU(cuStreamSynchronize((CUstream)s));
    for (int i = 0; i < n; i++) {
        int want = i < n / 2 ? 42 : 100;
        if (h[i] != want) { std::fprintf(stderr, "h[%d] = %d, want %d\n", i, h[i], want); return 1; }
    }
    if (!done) { std::fprintf(stderr, "host function did not run\n"); return 1; }
    // a driver allocation used by the runtime
    CUdeviceptr dp;
    CU(cuMemAlloc(&dp, 64));
    CHECK(cudaMemset((void *)dp, 0x5a, 64));
    unsigned char b[64];
    CHECK(cudaMemcpy(b, (void *)dp, 64, cudaMemcpyDeviceToHost));
    if (b[63] != 0x5a) return 1;
    cudaPointerAttributes pa;
    CHECK(cudaPointerGetAttributes(&pa, (void *)dp));
    if (pa.type != cudaMemoryTypeDevice) return 1;
    // a failing driver call leaves the runtime's last error alone
    if (cuMemcpyHtoD(0, b, 1) == CUDA_SUCCESS) return 1;
    CHECK(cudaGetLastError());
    CU(cuMemFree(dp));
    CHECK(cudaFree(d));
    CHECK(cudaStreamDestroy(s));
    std::printf("mixed ok\n");
    return 0;
}
