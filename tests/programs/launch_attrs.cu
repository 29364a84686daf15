// cudaLaunchKernelEx with launch attributes (CUDA Runtime API, "Execution Control"): they travel to the server
// in LAUNCH_EX. A launch with a cluster shape, priority, programmatic stream serialization and a launch
// completion event computes the right result and its event completes; CUDA's cluster rules
// (cudaErrorInvalidClusterSize); bad attributes.
#include "common.h"

__global__ void twice(const int *in, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2 * in[i];
}

int main() {
    const int n = 1024, threads = 64, blocks = n / threads;
    int *in, *out, host[n];
    for (int i = 0; i < n; i++) host[i] = i;
    CHECK(cudaMalloc(&in, n * sizeof(int)));
    CHECK(cudaMalloc(&out, n * sizeof(int)));
    CHECK(cudaMemcpy(in, host, n * sizeof(int), cudaMemcpyHostToDevice));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t done;
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));

    cudaLaunchAttribute at[4] = {};
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 4, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    at[1].id = cudaLaunchAttributePriority, at[1].val.priority = -1;
    at[2].id = cudaLaunchAttributeProgrammaticStreamSerialization, at[2].val.programmaticStreamSerializationAllowed = 1;
    at[3].id = cudaLaunchAttributeLaunchCompletionEvent, at[3].val.launchCompletionEvent.event = done;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(blocks), cfg.blockDim = dim3(threads), cfg.stream = s, cfg.attrs = at, cfg.numAttrs = 4;
    CHECK(cudaLaunchKernelEx(&cfg, twice, (const int *)in, out, n));
    CHECK(cudaEventSynchronize(done));
    CHECK(cudaMemcpy(host, out, n * sizeof(int), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += host[i] != 2 * i;
    printf("result_bad=%d\n", bad);

    cfg.numAttrs = 1;
    at[0].val.clusterDim.x = 3; // 16 blocks are not a multiple of 3
    printf("cluster_3=%d\n", (int)cudaLaunchKernelEx(&cfg, twice, (const int *)in, out, n));
    printf("last_error=%d\n", (int)cudaGetLastError()); // the launch's error is also the last error
    at[0].id = (cudaLaunchAttributeID)99;
    printf("unknown_id=%d\n", (int)cudaLaunchKernelEx(&cfg, twice, (const int *)in, out, n));
    cudaGetLastError();
    CHECK(cudaDeviceSynchronize());

    // captured into a graph: the kernel node runs (gpushim keeps no attributes in graphs, and says so)
    at[0].id = cudaLaunchAttributeClusterDimension, at[0].val.clusterDim.x = 2;
    CHECK(cudaMemset(out, 0, n * sizeof(int)));
    cudaGraph_t g;
    cudaGraphExec_t x;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaLaunchKernelEx(&cfg, twice, (const int *)in, out, n));
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&x, g, 0));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(host, out, n * sizeof(int), cudaMemcpyDeviceToHost));
    bad = 0;
    for (int i = 0; i < n; i++) bad += host[i] != 2 * i;
    printf("graph_bad=%d\n", bad);
    printf("OK\n");
    return 0;
}
