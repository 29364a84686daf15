/* Stream capture and graphs through the driver API: a 32-bit memset (a pattern the server writes) and a
 * launch are captured, not run, then the instantiated graph runs twice. usage: drv_graph KERNEL_DIR */
#include "drv_common.h"

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod;
    CU_CHECK(cuModuleLoadData(&mod, read_kernel(argv[1], "vecadd.ptx", NULL)));
    CUfunction scale;
    CU_CHECK(cuModuleGetFunction(&scale, mod, "scale"));
    enum { N = 4096 };
    CUdeviceptr x;
    CU_CHECK(cuMemAlloc(&x, N * sizeof(float)));
    CU_CHECK(cuMemsetD32(x, 0, N));
    CUstream s;
    CU_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

    /* CUDA programming guide, "Creating a Graph Using Stream Capture": work issued to a capturing stream
     * is recorded into the graph, not executed */
    CU_CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureStatus st;
    CU_CHECK(cuStreamIsCapturing(s, &st));
    REQUIRE(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CU_CHECK(cuMemsetD32Async(x, 0x40000000u, N, s)); /* 2.0f */
    float f = 3.0f;
    int n = N;
    void *args[] = {&x, &f, &n};
    CU_CHECK(cuLaunchKernel(scale, N / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
    CUgraph g;
    CU_CHECK(cuStreamEndCapture(s, &g));
    float h[N];
    CU_CHECK(cuMemcpyDtoH(h, x, sizeof h));
    REQUIRE(h[0] == 0.0f && h[N - 1] == 0.0f); /* nothing ran yet */

    CUgraphExec exec;
    CU_CHECK(cuGraphInstantiate(&exec, g, 0));
    for (int round = 0; round < 2; round++) {
        CU_CHECK(cuMemsetD32(x, 0, N));
        CU_CHECK(cuCtxSynchronize());
        CU_CHECK(cuGraphLaunch(exec, s));
        CU_CHECK(cuStreamSynchronize(s));
        CU_CHECK(cuMemcpyDtoH(h, x, sizeof h));
        for (int i = 0; i < N; i++)
            if (h[i] != 6.0f) { fprintf(stderr, "round %d: h[%d] = %f\n", round, i, h[i]); return 1; }
    }
    CU_CHECK(cuGraphExecDestroy(exec));
    CU_CHECK(cuGraphDestroy(g));
    CU_CHECK(cuStreamDestroy(s));
    printf("graph ok: captured memset and launch, replayed twice\n");
    return 0;
}
