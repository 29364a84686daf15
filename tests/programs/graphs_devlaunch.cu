// Device-side graph launch (CUDA Programming Guide, "Device Graph Launch"): a graph instantiated with
// cudaGraphInstantiateFlagDeviceLaunch and uploaded, launched by a kernel of a host-launched graph with
// cudaGraphLaunch(exec, cudaStreamGraphTailLaunch / cudaStreamGraphFireAndForget). Prints key=value lines
// (tests/e2e/test_graph_nodes.py checks them).
#include "common.h"

__global__ void add_one(int *x) { x[threadIdx.x] += 1; }
__global__ void twice(int *x) { x[threadIdx.x] *= 2; }
__global__ void snapshot(const int *x, int *y) { y[threadIdx.x] = x[threadIdx.x]; }
__global__ void launcher(cudaGraphExec_t g, int tail, int *rc) {
    rc[0] = (int)cudaGraphLaunch(g, tail ? cudaStreamGraphTailLaunch : cudaStreamGraphFireAndForget);
}

static cudaGraph_t kernel_graph(void *func, void *arg_ptr, cudaGraph_t g, cudaGraphNode_t *dep) {
    cudaKernelNodeParams kp = {};
    void *args[] = {arg_ptr};
    kp.func = func;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(32);
    kp.kernelParams = args;
    cudaGraphNode_t n;
    CHECK(cudaGraphAddKernelNode(&n, g, *dep ? dep : nullptr, *dep ? 1 : 0, &kp));
    *dep = n;
    return g;
}

int main() {
    int *x, *rc, *y;
    CHECK(cudaMalloc(&x, 32 * sizeof(int)));
    CHECK(cudaMalloc(&y, 32 * sizeof(int)));
    CHECK(cudaMalloc(&rc, sizeof(int)));
    CHECK(cudaMemset(x, 0, 32 * sizeof(int)));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    // the device graph: x += 1, then x *= 2 (the order shows in the result)
    cudaGraph_t dg;
    CHECK(cudaGraphCreate(&dg, 0));
    cudaGraphNode_t last = nullptr;
    kernel_graph((void *)add_one, &x, dg, &last);
    kernel_graph((void *)twice, &x, dg, &last);
    cudaGraphExec_t dexec;
    CHECK(cudaGraphInstantiate(&dexec, dg, cudaGraphInstantiateFlagDeviceLaunch));
    CHECK(cudaGraphUpload(dexec, s));
    // host graphs whose one kernel launches it: tail launch, then fire and forget
    int hrc = -1, h = -1;
    const char *modes[] = {"fire_and_forget", "tail"};
    for (int tail = 0; tail < 2; tail++) {
        cudaGraph_t hg;
        CHECK(cudaGraphCreate(&hg, 0));
        cudaKernelNodeParams kp = {};
        void *args[] = {&dexec, &tail, &rc};
        kp.func = (void *)launcher;
        kp.gridDim = dim3(1);
        kp.blockDim = dim3(1);
        kp.kernelParams = args;
        cudaGraphNode_t n;
        CHECK(cudaGraphAddKernelNode(&n, hg, nullptr, 0, &kp));
        // after the launcher, a node that copies x: a tail launch runs once this whole graph is done, so the
        // copy sees x before the device graph ran (CUDA Programming Guide, "Device Graph Launch", tail launch)
        cudaGraphNode_t snap;
        void *sargs[] = {&x, &y};
        kp.func = (void *)snapshot;
        kp.blockDim = dim3(32);
        kp.kernelParams = sargs;
        if (tail) CHECK(cudaGraphAddKernelNode(&snap, hg, &n, 1, &kp));
        cudaGraphExec_t hexec;
        CHECK(cudaGraphInstantiate(&hexec, hg, 0));
        CHECK(cudaGraphLaunch(hexec, s));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaMemcpy(&hrc, rc, sizeof hrc, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(&h, x + 31, sizeof h, cudaMemcpyDeviceToHost));
        int seen = -1;
        CHECK(cudaMemcpy(&seen, y + 31, sizeof seen, cudaMemcpyDeviceToHost));
        printf("%s=%d,%d seen=%d\n", modes[tail], hrc, h, tail ? seen : -1);
        CHECK(cudaGraphExecDestroy(hexec));
        CHECK(cudaGraphDestroy(hg));
    }
    // the device graph launched from the host as well
    CHECK(cudaGraphLaunch(dexec, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(&h, x, sizeof h, cudaMemcpyDeviceToHost));
    printf("host_launch=%d\n", h);

    // a graph instantiated for the host only: cudaGraphLaunch in device code fails (cudaErrorInvalidValue)
    cudaGraphExec_t hostonly;
    CHECK(cudaGraphInstantiate(&hostonly, dg, 0));
    int zero = 0;
    launcher<<<1, 1, 0, s>>>(hostonly, zero, rc);
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(&hrc, rc, sizeof hrc, cudaMemcpyDeviceToHost));
    printf("not_for_device=%s\n", cudaGetErrorName((cudaError_t)hrc));
    // a graph with a host node cannot be instantiated for device launch
    cudaGraph_t bad;
    CHECK(cudaGraphCreate(&bad, 0));
    cudaHostNodeParams hp = {[](void *) {}, nullptr};
    cudaGraphNode_t hn;
    CHECK(cudaGraphAddHostNode(&hn, bad, nullptr, 0, &hp));
    cudaGraphExec_t bexec;
    cudaError_t e = cudaGraphInstantiate(&bexec, bad, cudaGraphInstantiateFlagDeviceLaunch);
    printf("host_node=%s\n", cudaGetErrorName(e));
    cudaGetLastError();
    CHECK(cudaGraphExecDestroy(dexec));
    CHECK(cudaGraphExecDestroy(hostonly));
    printf("graphs devlaunch ok\n");
    return 0;
}
