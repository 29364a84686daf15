// The demo: an unmodified CUDA program (built with nvcc -cudart shared) that computes y = a*x + y on the
// device and checks the result on the host.
#include <cmath>
#include <vector>
#include "common.h"

__global__ void saxpy(int n, float a, const float *x, float *y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int rt = 0, drv = 0;
    CHECK(cudaRuntimeGetVersion(&rt));
    CHECK(cudaDriverGetVersion(&drv));
    std::printf("device 0: %s (compute capability %d.%d, %d SMs, %.1f GiB), runtime %d, driver %d\n", prop.name,
                prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, rt, drv);
    const int n = 1 << 20;
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; i++) { x[i] = (float)i; y[i] = 1.0f; }
    float *dx, *dy;
    CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CHECK(cudaMalloc(&dy, n * sizeof(float)));
    CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    CHECK(cudaEventRecord(start));
    saxpy<<<256, 256>>>(n, 2.0f, dx, dy);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(stop));
    CHECK(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += std::fabs(y[i] - (2.0f * i + 1.0f)) > 1e-3f * (2.0f * i + 1.0f);
    std::printf("saxpy on %d elements: %s (y[12345] = %.1f, kernel %.1f ms)\n", n, bad ? "WRONG" : "correct",
                y[12345], ms);
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dy));
    return bad ? 1 : 0;
}
