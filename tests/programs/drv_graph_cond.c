/* A conditional WHILE node through the driver API (CUDA Driver API, cuGraphConditionalHandleCreate and
 * cuGraphAddNode with CU_GRAPH_NODE_TYPE_CONDITIONAL): the body's kernel counts down and sets the condition
 * with cudaGraphSetConditional; CU_GRAPH_COND_ASSIGN_DEFAULT enters the loop at every launch.
 * usage: drv_graph_cond KERNEL_DIR; prints key=value lines. */
#include "drv_common.h"

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    CUdevice dev;
    CUcontext ctx = use_primary_context(&dev);
    char path[4096];
    snprintf(path, sizeof path, "%s/cond.ptx", argv[1]);
    CUmodule mod;
    CU_CHECK(cuModuleLoad(&mod, path));
    CUfunction countdown;
    CU_CHECK(cuModuleGetFunction(&countdown, mod, "countdown"));
    CUdeviceptr counter, steps;
    CU_CHECK(cuMemAlloc(&counter, 4));
    CU_CHECK(cuMemAlloc(&steps, 4));

    CUgraph g;
    CU_CHECK(cuGraphCreate(&g, 0));
    CUgraphConditionalHandle h;
    CU_CHECK(cuGraphConditionalHandleCreate(&h, g, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = h;
    p.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
    p.conditional.size = 1;
    p.conditional.ctx = ctx;
    CUgraphNode w;
    CU_CHECK(cuGraphAddNode(&w, g, NULL, NULL, 0, &p));
    CUgraph body = p.conditional.phGraph_out[0];
    void *args[] = {&h, &counter, &steps};
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = countdown;
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;
    CUgraphNode k;
    CU_CHECK(cuGraphAddKernelNode(&k, body, NULL, 0, &kp));
    CUgraphExec x;
    CU_CHECK(cuGraphInstantiate(&x, g, 0));
    int c = 5, s = 0;
    CU_CHECK(cuMemcpyHtoD(counter, &c, 4));
    CU_CHECK(cuMemcpyHtoD(steps, &s, 4));
    CU_CHECK(cuGraphLaunch(x, NULL));
    CU_CHECK(cuStreamSynchronize(NULL));
    int first;
    CU_CHECK(cuMemcpyDtoH(&first, steps, 4));
    c = 2;
    CU_CHECK(cuMemcpyHtoD(counter, &c, 4));
    CU_CHECK(cuGraphLaunch(x, NULL));
    CU_CHECK(cuStreamSynchronize(NULL));
    CU_CHECK(cuMemcpyDtoH(&s, steps, 4));
    CU_CHECK(cuMemcpyDtoH(&c, counter, 4));
    printf("while=%d,%d,%d\n", first, s, c);  /* 5 steps, then 2 more: 5,7,0 */

    /* a node type the driver face does not add this way */
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL;
    printf("ext_sem=%d\n", (int)cuGraphAddNode(&w, g, NULL, NULL, 0, &p));
    CU_CHECK(cuGraphExecDestroy(x));
    CU_CHECK(cuGraphDestroy(g));
    printf("done=1\n");
    return 0;
}
