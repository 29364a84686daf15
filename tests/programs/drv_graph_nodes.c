/* Graphs built node by node through the driver API: a 32-bit memset node, a kernel node (CUfunction) after it,
 * an edge added afterwards, a host node; launched, then the kernel node's arguments changed in the executable
 * graph (cuGraphExecKernelNodeSetParams). usage: drv_graph_nodes KERNEL_DIR */
#include "drv_common.h"

static int host_runs;
static void CUDA_CB count(void *p) { (void)p; host_runs++; }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    CUdevice dev;
    CUcontext ctx = use_primary_context(&dev);
    CUmodule mod;
    CU_CHECK(cuModuleLoadData(&mod, read_kernel(argv[1], "vecadd.ptx", NULL)));
    CUfunction scale;
    CU_CHECK(cuModuleGetFunction(&scale, mod, "scale"));
    enum { N = 1024 };
    CUdeviceptr x;
    CU_CHECK(cuMemAlloc(&x, N * sizeof(float)));
    CUstream s;
    CU_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

    CUgraph g;
    CU_CHECK(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS ms = {0};
    ms.dst = x;
    ms.value = 0x40000000u; /* 2.0f */
    ms.elementSize = 4;
    ms.width = N;
    ms.height = 1;
    CUgraphNode set, kern, host;
    CU_CHECK(cuGraphAddMemsetNode(&set, g, NULL, 0, &ms, ctx));
    float f = 3.0f;
    int n = N;
    void *args[] = {&x, &f, &n};
    CUDA_KERNEL_NODE_PARAMS kp = {0};
    kp.func = scale;
    kp.gridDimX = N / 256;
    kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 256;
    kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;
    CU_CHECK(cuGraphAddKernelNode(&kern, g, NULL, 0, &kp));
    CU_CHECK(cuGraphAddDependencies(g, &set, &kern, NULL, 1)); /* the memset first */
    CUDA_HOST_NODE_PARAMS hp = {count, NULL};
    CU_CHECK(cuGraphAddHostNode(&host, g, &kern, 1, &hp));
    CUgraphNodeType t;
    CU_CHECK(cuGraphNodeGetType(kern, &t));
    REQUIRE(t == CU_GRAPH_NODE_TYPE_KERNEL);
    size_t roots = 0;
    CU_CHECK(cuGraphGetRootNodes(g, NULL, &roots));
    REQUIRE(roots == 1);

    CUgraphExec exec;
    CU_CHECK(cuGraphInstantiate(&exec, g, 0));
    float h[N];
    CU_CHECK(cuGraphLaunch(exec, s));
    CU_CHECK(cuStreamSynchronize(s));
    CU_CHECK(cuMemcpyDtoH(h, x, sizeof h));
    REQUIRE(h[0] == 6.0f && h[N - 1] == 6.0f && host_runs == 1);
    f = 5.0f; /* the node keeps the value it was given: 3 */
    CU_CHECK(cuGraphLaunch(exec, s));
    CU_CHECK(cuStreamSynchronize(s));
    CU_CHECK(cuMemcpyDtoH(h, x, sizeof h));
    REQUIRE(h[0] == 6.0f && host_runs == 2);
    CU_CHECK(cuGraphExecKernelNodeSetParams(exec, kern, &kp)); /* now 5 */
    CU_CHECK(cuGraphLaunch(exec, s));
    CU_CHECK(cuStreamSynchronize(s));
    CU_CHECK(cuMemcpyDtoH(h, x, sizeof h));
    REQUIRE(h[0] == 10.0f && h[N - 1] == 10.0f && host_runs == 3);
    kp.func = NULL;
    REQUIRE(cuGraphAddKernelNode(&kern, g, NULL, 0, &kp) == CUDA_ERROR_INVALID_VALUE);
    CU_CHECK(cuGraphExecDestroy(exec));
    CU_CHECK(cuGraphDestroy(g));
    CU_CHECK(cuStreamDestroy(s));
    printf("graph nodes ok: memset, kernel, host nodes; exec kernel params updated\n");
    return 0;
}
