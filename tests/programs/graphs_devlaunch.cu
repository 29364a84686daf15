// Device-side graph launch is not supported by gpushim: instantiating with cudaGraphInstantiateFlagDeviceLaunch
// fails with cudaErrorNotSupported, and a kernel that calls cudaGraphLaunch (CUDA Programming Guide, "Device
// Graph Launch") is refused when it would run, naming the call. Prints key=value lines
// (tests/e2e/test_graph_nodes.py checks them).
#include "common.h"

__global__ void child(int *x) { x[threadIdx.x] += 1; }
__global__ void launcher(cudaGraphExec_t g) { cudaGraphLaunch(g, cudaStreamGraphFireAndForget); }

int main() {
    int *x;
    CHECK(cudaMalloc(&x, 32 * sizeof(int)));
    CHECK(cudaMemset(x, 0, 32 * sizeof(int)));
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t n;
    void *args[] = {&x};
    cudaKernelNodeParams kp = {};
    kp.func = (void *)child;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(32);
    kp.kernelParams = args;
    CHECK(cudaGraphAddKernelNode(&n, g, nullptr, 0, &kp));
    cudaGraphExec_t dev = nullptr, host = nullptr;
    cudaError_t e = cudaGraphInstantiate(&dev, g, cudaGraphInstantiateFlagDeviceLaunch);
    printf("instantiate_device=%s\n", cudaGetErrorName(e));
    CHECK(cudaGraphInstantiate(&host, g, 0)); // the same graph, for the host, works
    launcher<<<1, 1>>>(host);
    cudaError_t launched = cudaGetLastError();
    cudaError_t synced = cudaDeviceSynchronize();
    printf("device_launch=%s,%s\n", cudaGetErrorName(launched), cudaGetErrorName(synced));
    CHECK(cudaGraphLaunch(host, 0)); // the session goes on
    CHECK(cudaDeviceSynchronize());
    int h = 0;
    CHECK(cudaMemcpy(&h, x, sizeof h, cudaMemcpyDeviceToHost));
    printf("host_launch=%d\n", h);
    return 0;
}
