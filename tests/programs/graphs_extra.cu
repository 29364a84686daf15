// Runtime-face kernel nodes whose arguments come packed in `extra` (cudaKernelNodeParams.extra with
// CU_LAUNCH_PARAM_BUFFER_POINTER / CU_LAUNCH_PARAM_BUFFER_SIZE / CU_LAUNCH_PARAM_END), through
// cudaGraphAddKernelNode, cudaGraphAddNode and cudaGraphExecKernelNodeSetParams. Prints key=value lines
// (tests/e2e/test_graph_nodes.py checks them).
#include <cstddef>
#include <cuda.h> // the CU_LAUNCH_PARAM_* values only
#include "common.h"

__global__ void axpy(float *y, const float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}

struct Packed { // axpy's parameters as the kernel lays them out: 8-byte pointers, then a float and an int
    float *y;
    const float *x;
    float a;
    int n;
};

int main() {
    const int n = 128;
    float *x, *y;
    CHECK(cudaMalloc(&x, n * sizeof(float)));
    CHECK(cudaMalloc(&y, n * sizeof(float)));
    float h[n];
    for (int i = 0; i < n; i++) h[i] = (float)i;
    CHECK(cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(y, 0, sizeof h));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));

    Packed p = {y, x, 2.0f, n};
    size_t size = sizeof p;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &p, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    cudaKernelNodeParams kp = {};
    kp.func = (void *)axpy;
    kp.gridDim = dim3(n / 32);
    kp.blockDim = dim3(32);
    kp.extra = extra;
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t k1, k2;
    CHECK(cudaGraphAddKernelNode(&k1, g, nullptr, 0, &kp));
    p.a = 50.0f; // the node holds the values it was given (2)
    // cudaGraphAddNode with cudaGraphNodeParams: a second axpy after the first, a = 1
    Packed p2 = {y, x, 1.0f, n};
    void *extra2[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &p2, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    cudaGraphNodeParams np = {};
    np.type = cudaGraphNodeTypeKernel;
    np.kernel.func = (void *)axpy;
    np.kernel.gridDim = dim3(n / 32);
    np.kernel.blockDim = dim3(32);
    np.kernel.extra = extra2;
    CHECK(cudaGraphAddNode(&k2, g, &k1, nullptr, 1, &np));
    // cudaGraphKernelNodeGetParams: the values, given back as kernelParams
    cudaKernelNodeParams got = {};
    CHECK(cudaGraphKernelNodeGetParams(k1, &got));
    printf("get_params=%d,%g,%d\n", got.kernelParams != nullptr, got.kernelParams ? *(float *)got.kernelParams[2] : -1.0f,
           got.kernelParams ? *(int *)got.kernelParams[3] : -1);
    cudaGraphExec_t ex;
    CHECK(cudaGraphInstantiate(&ex, g, 0));
    CHECK(cudaGraphLaunch(ex, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost));
    printf("extra=%g,%g,%g\n", h[0], h[1], h[n - 1]); // y = (2 + 1) * x
    // cudaGraphExecKernelNodeSetParams with extra: the first node now adds 10 * x
    Packed p3 = {y, x, 10.0f, n};
    void *extra3[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &p3, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    kp.extra = extra3;
    CHECK(cudaGraphExecKernelNodeSetParams(ex, k1, &kp));
    CHECK(cudaGraphLaunch(ex, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost));
    printf("exec_set=%g,%g\n", h[1], h[n - 1]); // 3x + 11x

    // bad input: a clear error, nothing added
    cudaGraphNode_t bad;
    size_t small = sizeof p - 4;
    void *short_buf[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &p, CU_LAUNCH_PARAM_BUFFER_SIZE, &small, CU_LAUNCH_PARAM_END};
    kp.extra = short_buf;
    cudaError_t e_small = cudaGraphAddKernelNode(&bad, g, nullptr, 0, &kp);
    void *args[] = {&y, &x, &p.a, &p.n};
    kp.extra = extra;
    kp.kernelParams = args; // both: CUDA takes one or the other
    cudaError_t e_both = cudaGraphAddKernelNode(&bad, g, nullptr, 0, &kp);
    void *no_ptr[] = {CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    kp.kernelParams = nullptr;
    kp.extra = no_ptr;
    cudaError_t e_noptr = cudaGraphAddKernelNode(&bad, g, nullptr, 0, &kp);
    size_t count = 0;
    CHECK(cudaGraphGetNodes(g, nullptr, &count));
    printf("bad=%s,%s,%s nodes=%zu\n", cudaGetErrorName(e_small), cudaGetErrorName(e_both), cudaGetErrorName(e_noptr),
           count);
    cudaGetLastError();
    CHECK(cudaGraphExecDestroy(ex));
    CHECK(cudaGraphDestroy(g));
    printf("graphs extra ok\n");
    return 0;
}
