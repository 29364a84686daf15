/* Driver-face graph nodes beyond kernels: copy nodes (cuGraphAddMemcpyNode with CUDA_MEMCPY3D), memory
 * allocation and free nodes, batch memory-op nodes (wait / write value 32 and 64, flush, barrier), kernel
 * nodes whose arguments come packed in `extra`, and cuGraphAddNode / cuGraphNodeSetParams of these types.
 * Prints key=value lines (tests/e2e/test_graph_driver.py checks them). usage: drv_graph_mem KERNEL_DIR [count] */
#include <stddef.h>
#include <stdint.h>

#include "drv_common.h"

enum { N = 256 };

static CUDA_MEMCPY3D copy1d(CUmemorytype st, const void *sh, CUdeviceptr sd, CUmemorytype dt, void *dh,
                            CUdeviceptr dd, size_t bytes) {
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = st;
    c.srcHost = sh;
    c.srcDevice = sd;
    c.dstMemoryType = dt;
    c.dstHost = dh;
    c.dstDevice = dd;
    c.WidthInBytes = bytes;
    c.Height = 1;
    c.Depth = 1;
    return c;
}

static CUstreamBatchMemOpParams memop(CUstreamBatchMemOpType op, CUdeviceptr a, uint64_t v, unsigned flags) {
    CUstreamBatchMemOpParams m;
    memset(&m, 0, sizeof m);
    m.operation = op;
    if (op == CU_STREAM_MEM_OP_WAIT_VALUE_32 || op == CU_STREAM_MEM_OP_WAIT_VALUE_64) {
        m.waitValue.address = a;
        if (op == CU_STREAM_MEM_OP_WAIT_VALUE_32) m.waitValue.value = (cuuint32_t)v;
        else m.waitValue.value64 = v;
        m.waitValue.flags = flags;
    } else if (op == CU_STREAM_MEM_OP_WRITE_VALUE_32 || op == CU_STREAM_MEM_OP_WRITE_VALUE_64) {
        m.writeValue.address = a;
        if (op == CU_STREAM_MEM_OP_WRITE_VALUE_32) m.writeValue.value = (cuuint32_t)v;
        else m.writeValue.value64 = v;
        m.writeValue.flags = flags;
    }
    return m;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int count_mode = argc > 2 && !strcmp(argv[2], "count");
    CUdevice dev;
    CUcontext ctx = use_primary_context(&dev);
    CUmodule mod;
    CU_CHECK(cuModuleLoadData(&mod, read_kernel(argv[1], "vecadd.ptx", NULL)));
    CUfunction scale;
    CU_CHECK(cuModuleGetFunction(&scale, mod, "scale"));
    CUstream s, s2;
    CU_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b, flag;
    CU_CHECK(cuMemAlloc(&a, N * sizeof(float)));
    CU_CHECK(cuMemAlloc(&b, N * sizeof(float)));
    CU_CHECK(cuMemAlloc(&flag, 64));
    CU_CHECK(cuMemsetD8(flag, 0, 64));

    /* 1. copy in (pageable host -> device), a kernel with packed `extra` arguments, device -> device, copy out */
    static float in[N], out[N];
    for (int i = 0; i < N; i++) in[i] = (float)i;
    CUgraph g;
    CU_CHECK(cuGraphCreate(&g, 0));
    CUgraphNode cin, kern, cdd, cout;
    CUDA_MEMCPY3D c1 = copy1d(CU_MEMORYTYPE_HOST, in, 0, CU_MEMORYTYPE_DEVICE, NULL, a, sizeof in);
    CU_CHECK(cuGraphAddMemcpyNode(&cin, g, NULL, 0, &c1, ctx));
    struct { CUdeviceptr x; float f; int n; } packed = {a, 3.0f, N}; /* scale(float *x, float f, int n) */
    size_t packed_size = sizeof packed;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                     CU_LAUNCH_PARAM_END};
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = scale;
    kp.gridDimX = N / 64;
    kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 64;
    kp.blockDimY = kp.blockDimZ = 1;
    kp.extra = extra;
    CU_CHECK(cuGraphAddKernelNode(&kern, g, &cin, 1, &kp));
    packed.f = 100.0f; /* the node holds the values it was given (3) */
    CUDA_MEMCPY3D c2 = copy1d(CU_MEMORYTYPE_DEVICE, NULL, a, CU_MEMORYTYPE_DEVICE, NULL, b, sizeof in);
    CU_CHECK(cuGraphAddMemcpyNode(&cdd, g, &kern, 1, &c2, ctx));
    CUDA_MEMCPY3D c3 = copy1d(CU_MEMORYTYPE_DEVICE, NULL, b, CU_MEMORYTYPE_HOST, out, 0, sizeof out);
    CU_CHECK(cuGraphAddMemcpyNode(&cout, g, &cdd, 1, &c3, ctx));
    CUDA_MEMCPY3D got;
    CU_CHECK(cuGraphMemcpyNodeGetParams(cdd, &got));
    CUgraphNodeType t;
    CU_CHECK(cuGraphNodeGetType(cdd, &t));
    printf("memcpy_get=%zu,%d,%d type=%d\n", got.WidthInBytes, got.srcDevice == a, got.dstDevice == b, (int)t);
    CUgraphExec x;
    CU_CHECK(cuGraphInstantiate(&x, g, 0));
    CU_CHECK(cuGraphLaunch(x, s));
    CU_CHECK(cuStreamSynchronize(s));
    printf("copies=%g,%g,%g\n", out[0], out[1], out[N - 1]);
    /* the copy-in node reads the host buffer when the graph runs */
    for (int i = 0; i < N; i++) in[i] = 1.0f;
    CU_CHECK(cuGraphLaunch(x, s));
    CU_CHECK(cuStreamSynchronize(s));
    printf("relaunch=%g,%g\n", out[0], out[N - 1]);
    /* cuGraphExecMemcpyNodeSetParams: copy out only the first 4 floats, into another buffer */
    static float out2[4];
    CUDA_MEMCPY3D c4 = copy1d(CU_MEMORYTYPE_DEVICE, NULL, b, CU_MEMORYTYPE_HOST, out2, 0, sizeof out2);
    CU_CHECK(cuGraphExecMemcpyNodeSetParams(x, cout, &c4, ctx));
    CU_CHECK(cuGraphLaunch(x, s));
    CU_CHECK(cuStreamSynchronize(s));
    printf("exec_set_copy=%g,%g\n", out2[0], out2[3]);
    CU_CHECK(cuGraphExecDestroy(x));
    CU_CHECK(cuGraphDestroy(g));

    /* 1b. copy nodes to and from a CUDA array (a 2D box): host -> array, array -> host */
    enum { W = 8, H = 4 };
    CUDA_ARRAY_DESCRIPTOR ad = {W, H, CU_AD_FORMAT_FLOAT, 1};
    CUarray arr;
    CU_CHECK(cuArrayCreate(&arr, &ad));
    static float box_in[H][W], box_out[H][W];
    for (int r = 0; r < H; r++)
        for (int c = 0; c < W; c++) box_in[r][c] = (float)(r * 10 + c);
    CU_CHECK(cuGraphCreate(&g, 0));
    CUDA_MEMCPY3D ta;
    memset(&ta, 0, sizeof ta);
    ta.srcMemoryType = CU_MEMORYTYPE_HOST;
    ta.srcHost = box_in;
    ta.srcPitch = W * sizeof(float);
    ta.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    ta.dstArray = arr;
    ta.WidthInBytes = W * sizeof(float);
    ta.Height = H;
    ta.Depth = 1;
    CUDA_MEMCPY3D fa;
    memset(&fa, 0, sizeof fa);
    fa.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    fa.srcArray = arr;
    fa.srcXInBytes = 2 * sizeof(float); /* from column 2, row 1: a 3 x 2 box */
    fa.srcY = 1;
    fa.dstMemoryType = CU_MEMORYTYPE_HOST;
    fa.dstHost = box_out;
    fa.dstPitch = W * sizeof(float);
    fa.WidthInBytes = 3 * sizeof(float);
    fa.Height = 2;
    fa.Depth = 1;
    CUgraphNode to_arr, from_arr;
    CU_CHECK(cuGraphAddMemcpyNode(&to_arr, g, NULL, 0, &ta, ctx));
    CU_CHECK(cuGraphAddMemcpyNode(&from_arr, g, &to_arr, 1, &fa, ctx));
    CU_CHECK(cuGraphInstantiate(&x, g, 0));
    CU_CHECK(cuGraphLaunch(x, s));
    CU_CHECK(cuStreamSynchronize(s));
    printf("array=%g,%g,%g,%g\n", box_out[0][0], box_out[0][2], box_out[1][0], box_out[2][0]);
    CU_CHECK(cuGraphExecDestroy(x));
    CU_CHECK(cuGraphDestroy(g));
    CU_CHECK(cuArrayDestroy(arr));

    /* 2. batch memory-op nodes: writes (32 and 64 bits), then a wait that the writes satisfy, then a copy out */
    CU_CHECK(cuGraphCreate(&g, 0));
    CUstreamBatchMemOpParams w[4] = {
        memop(CU_STREAM_MEM_OP_WRITE_VALUE_32, flag, 7, 0),
        memop(CU_STREAM_MEM_OP_WRITE_VALUE_64, flag + 8, 0x1122334455667788ull, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER),
        memop(CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES, 0, 0, 0),
        memop(CU_STREAM_MEM_OP_BARRIER, 0, 0, 0),
    };
    CUDA_BATCH_MEM_OP_NODE_PARAMS bp = {ctx, 4, w, 0};
    CUgraphNode writes, wait, out_node;
    CU_CHECK(cuGraphAddBatchMemOpNode(&writes, g, NULL, 0, &bp));
    CUstreamBatchMemOpParams wt[2] = {memop(CU_STREAM_MEM_OP_WAIT_VALUE_32, flag, 7, CU_STREAM_WAIT_VALUE_EQ),
                                      memop(CU_STREAM_MEM_OP_WAIT_VALUE_64, flag + 8, 0x1122334455667788ull,
                                            CU_STREAM_WAIT_VALUE_GEQ)};
    CUDA_BATCH_MEM_OP_NODE_PARAMS bw = {ctx, 2, wt, 0};
    CU_CHECK(cuGraphAddBatchMemOpNode(&wait, g, &writes, 1, &bw));
    uint32_t vals[4] = {0};
    CUDA_MEMCPY3D c5 = copy1d(CU_MEMORYTYPE_DEVICE, NULL, flag, CU_MEMORYTYPE_HOST, vals, 0, sizeof vals);
    CU_CHECK(cuGraphAddMemcpyNode(&out_node, g, &wait, 1, &c5, ctx));
    CUDA_BATCH_MEM_OP_NODE_PARAMS gp;
    w[0].writeValue.value = 99; /* the node keeps its own copy of the operations */
    CU_CHECK(cuGraphBatchMemOpNodeGetParams(writes, &gp));
    CU_CHECK(cuGraphNodeGetType(writes, &t));
    printf("batch_get=%u,%d,%u type=%d\n", gp.count, gp.paramArray != w, gp.paramArray[0].writeValue.value, (int)t);
    CU_CHECK(cuGraphInstantiate(&x, g, 0));
    CU_CHECK(cuGraphLaunch(x, s));
    CU_CHECK(cuStreamSynchronize(s));
    printf("batch=%u,%08x%08x\n", vals[0], vals[3], vals[2]);
    CU_CHECK(cuGraphExecDestroy(x));
    CU_CHECK(cuGraphDestroy(g));

    /* 3. a wait node holds the stream until another stream writes the value (CUDA Driver API, "Stream Memory
     * Operations": the wait blocks work after it on the stream until the condition holds) */
    CU_CHECK(cuGraphCreate(&g, 0));
    CUstreamBatchMemOpParams hold = memop(CU_STREAM_MEM_OP_WAIT_VALUE_32, flag + 16, 1, CU_STREAM_WAIT_VALUE_GEQ);
    CUDA_BATCH_MEM_OP_NODE_PARAMS bh = {ctx, 1, &hold, 0};
    CUgraphNode hn, after;
    CU_CHECK(cuGraphAddBatchMemOpNode(&hn, g, NULL, 0, &bh));
    CUstreamBatchMemOpParams mark = memop(CU_STREAM_MEM_OP_WRITE_VALUE_32, flag + 20, 5, 0);
    CUDA_BATCH_MEM_OP_NODE_PARAMS bm = {ctx, 1, &mark, 0};
    CU_CHECK(cuGraphAddBatchMemOpNode(&after, g, &hn, 1, &bm));
    CU_CHECK(cuGraphInstantiate(&x, g, 0));
    CU_CHECK(cuGraphLaunch(x, s));
    CUresult q = cuStreamQuery(s); /* the flag is 0 until the write below: the graph cannot have finished */
    uint32_t before = 1;
    CU_CHECK(cuMemcpyDtoHAsync(&before, flag + 20, 4, s2));
    CU_CHECK(cuStreamSynchronize(s2));
    CU_CHECK(cuStreamWriteValue32(s2, flag + 16, 1, 0));
    CU_CHECK(cuStreamSynchronize(s));
    uint32_t marked = 0;
    CU_CHECK(cuMemcpyDtoH(&marked, flag + 20, 4));
    printf("held=%s before=%u after=%u\n", cu_name(q), before, marked);
    CU_CHECK(cuGraphExecDestroy(x));
    CU_CHECK(cuGraphDestroy(g));

    /* 3b. stream memory operations captured into a graph: the written value is the one given at capture */
    CUgraph cg;
    CU_CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_CHECK(cuStreamWriteValue32(s, flag + 24, 77, 0));
    CU_CHECK(cuStreamWriteValue64(s, flag + 32, 0xAABBCCDD00112233ull, 0));
    CU_CHECK(cuStreamWaitValue32(s, flag + 24, 77, CU_STREAM_WAIT_VALUE_EQ));
    CU_CHECK(cuStreamEndCapture(s, &cg));
    CU_CHECK(cuMemsetD8(flag + 24, 0, 16));
    CU_CHECK(cuGraphInstantiate(&x, cg, 0));
    CU_CHECK(cuGraphLaunch(x, s));
    CU_CHECK(cuStreamSynchronize(s));
    uint32_t cap[3] = {0};
    CU_CHECK(cuMemcpyDtoH(cap, flag + 24, 4));
    CU_CHECK(cuMemcpyDtoH(cap + 1, flag + 32, 8));
    printf("captured=%u,%08x%08x\n", cap[0], cap[2], cap[1]);
    CU_CHECK(cuGraphExecDestroy(x));
    CU_CHECK(cuGraphDestroy(cg));

    /* 4. cuGraphAddNode with every type the driver face builds: memory allocation, memset, host, copy, batch
     * memory op, memory free; and cuGraphNodeSetParams / cuGraphExecNodeSetParams on them */
    CU_CHECK(cuGraphCreate(&g, 0));
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    np.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    np.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    np.alloc.poolProps.location.id = 0;
    np.alloc.bytesize = 64;
    CUgraphNode al, ms, hostn, cp, bo, fr;
    CU_CHECK(cuGraphAddNode(&al, g, NULL, NULL, 0, &np));
    CUdeviceptr mem = np.alloc.dptr;
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    CU_CHECK(cuGraphMemAllocNodeGetParams(al, &ap));
    REQUIRE(mem != 0 && ap.dptr == mem && ap.bytesize == 64);
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEMSET;
    np.memset.dst = mem;
    np.memset.value = 0x01020304u;
    np.memset.elementSize = 4;
    np.memset.width = 16;
    np.memset.height = 1;
    np.memset.ctx = ctx;
    CU_CHECK(cuGraphAddNode(&ms, g, &al, NULL, 1, &np));
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
    CUstreamBatchMemOpParams w2 = memop(CU_STREAM_MEM_OP_WRITE_VALUE_32, mem + 4, 42, 0);
    np.memOp.ctx = ctx;
    np.memOp.count = 1;
    np.memOp.paramArray = &w2;
    CU_CHECK(cuGraphAddNode(&bo, g, &ms, NULL, 1, &np));
    static uint32_t got4[16];
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    np.memcpy.copyCtx = ctx;
    np.memcpy.copyParams = copy1d(CU_MEMORYTYPE_DEVICE, NULL, mem, CU_MEMORYTYPE_HOST, got4, 0, sizeof got4);
    CU_CHECK(cuGraphAddNode(&cp, g, &bo, NULL, 1, &np));
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    np.free.dptr = mem;
    CU_CHECK(cuGraphAddNode(&fr, g, &cp, NULL, 1, &np));
    CUdeviceptr freed = 0;
    CU_CHECK(cuGraphMemFreeNodeGetParams(fr, &freed));
    REQUIRE(freed == mem);
    static int host_calls;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_HOST;
    np.host.fn = (CUhostFn)(void (*)(void *))0;
    REQUIRE(cuGraphAddNode(&hostn, g, &fr, NULL, 1, &np) == CUDA_ERROR_INVALID_VALUE); /* no function */
    size_t nn = 0;
    CU_CHECK(cuGraphGetNodes(g, NULL, &nn));
    CU_CHECK(cuGraphInstantiate(&x, g, 0));
    CU_CHECK(cuGraphLaunch(x, s));
    CU_CHECK(cuStreamSynchronize(s));
    printf("add_node nodes=%zu words=%08x,%u,%08x\n", nn, got4[0], got4[1], got4[15]);
    (void)host_calls;
    /* cuGraphExecNodeSetParams of the batch node: write 43 instead; cuGraphNodeSetParams of the graph's node
     * does not change the executable graph (CUDA: an executable graph is a snapshot) */
    w2.writeValue.value = 43;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
    np.memOp.ctx = ctx;
    np.memOp.count = 1;
    np.memOp.paramArray = &w2;
    CU_CHECK(cuGraphExecNodeSetParams(x, bo, &np));
    w2.writeValue.value = 44;
    CU_CHECK(cuGraphNodeSetParams(bo, &np));
    CU_CHECK(cuGraphLaunch(x, s));
    CU_CHECK(cuStreamSynchronize(s));
    printf("node_set=%u\n", got4[1]);
    CU_CHECK(cuGraphExecDestroy(x));
    CU_CHECK(cuGraphInstantiate(&x, g, 0));
    CU_CHECK(cuGraphLaunch(x, s));
    CU_CHECK(cuStreamSynchronize(s));
    printf("reinstantiated=%u\n", got4[1]);
    CU_CHECK(cuGraphExecDestroy(x));

    /* 5. bad input: each a clear error, the graph unharmed */
    CUgraphNode bad;
    CUstreamBatchMemOpParams junk = memop((CUstreamBatchMemOpType)77, flag, 0, 0);
    CUDA_BATCH_MEM_OP_NODE_PARAMS bj = {ctx, 1, &junk, 0};
    CU_EXPECT(cuGraphAddBatchMemOpNode(&bad, g, NULL, 0, &bj), CUDA_ERROR_INVALID_VALUE);
    bj.count = 0;
    CU_EXPECT(cuGraphAddBatchMemOpNode(&bad, g, NULL, 0, &bj), CUDA_ERROR_INVALID_VALUE);
    CUstreamBatchMemOpParams odd = memop(CU_STREAM_MEM_OP_WRITE_VALUE_32, flag + 2, 1, 0); /* misaligned */
    CUDA_BATCH_MEM_OP_NODE_PARAMS bo2 = {ctx, 1, &odd, 0};
    CU_EXPECT(cuGraphAddBatchMemOpNode(&bad, g, NULL, 0, &bo2), CUDA_ERROR_INVALID_VALUE);
    CUstreamBatchMemOpParams wild = memop(CU_STREAM_MEM_OP_WAIT_VALUE_32, 0x10, 1, 0); /* not device memory */
    CUDA_BATCH_MEM_OP_NODE_PARAMS bw2 = {ctx, 1, &wild, 0};
    REQUIRE(cuGraphAddBatchMemOpNode(&bad, g, NULL, 0, &bw2) != CUDA_SUCCESS);
    CU_EXPECT(cuGraphAddMemcpyNode(&bad, g, NULL, 0, NULL, ctx), CUDA_ERROR_INVALID_VALUE);
    void *both[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_END};
    kp.extra = both; /* no CU_LAUNCH_PARAM_BUFFER_SIZE */
    REQUIRE(cuGraphAddKernelNode(&bad, g, NULL, 0, &kp) != CUDA_SUCCESS);
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL;
    CU_EXPECT(cuGraphAddNode(&bad, g, NULL, NULL, 0, &np), CUDA_ERROR_NOT_SUPPORTED);
    size_t nn2 = 0;
    CU_CHECK(cuGraphGetNodes(g, NULL, &nn2));
    printf("bad_input ok nodes=%zu\n", nn2);
    CU_CHECK(cuGraphDestroy(g));

    /* 5b. device graph launch (CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH): add_one then twice, launched by a
     * kernel of a host-launched graph as a tail launch */
    CUmodule dmod;
    CU_CHECK(cuModuleLoadData(&dmod, read_kernel(argv[1], "devgraph.ptx", NULL)));
    CUfunction add_one, twice, launcher;
    CU_CHECK(cuModuleGetFunction(&add_one, dmod, "add_one"));
    CU_CHECK(cuModuleGetFunction(&twice, dmod, "twice"));
    CU_CHECK(cuModuleGetFunction(&launcher, dmod, "launcher"));
    CU_CHECK(cuMemsetD8(flag, 0, 64));
    CUgraph dg, hg;
    CU_CHECK(cuGraphCreate(&dg, 0));
    CUdeviceptr cells = flag;
    void *dargs[] = {&cells};
    CUDA_KERNEL_NODE_PARAMS dk;
    memset(&dk, 0, sizeof dk);
    dk.func = add_one;
    dk.gridDimX = dk.gridDimY = dk.gridDimZ = 1;
    dk.blockDimX = 8;
    dk.blockDimY = dk.blockDimZ = 1;
    dk.kernelParams = dargs;
    CUgraphNode d1, d2, hl;
    CU_CHECK(cuGraphAddKernelNode(&d1, dg, NULL, 0, &dk));
    dk.func = twice;
    CU_CHECK(cuGraphAddKernelNode(&d2, dg, &d1, 1, &dk));
    CUgraphExec dx, hx;
    CUresult dr = cuGraphInstantiateWithFlags(&dx, dg, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH);
    if (dr == CUDA_SUCCESS) {
        CU_CHECK(cuGraphUpload(dx, s));
        CU_CHECK(cuGraphCreate(&hg, 0));
        int tail = 1;
        CUdeviceptr rcp = flag + 32;
        void *largs[] = {&dx, &tail, &rcp};
        dk.func = launcher;
        dk.blockDimX = 1;
        dk.kernelParams = largs;
        CU_CHECK(cuGraphAddKernelNode(&hl, hg, NULL, 0, &dk));
        CU_CHECK(cuGraphInstantiate(&hx, hg, 0));
        CU_CHECK(cuGraphLaunch(hx, s));
        CU_CHECK(cuGraphLaunch(hx, s));
        CU_CHECK(cuStreamSynchronize(s));
        int dv[9];
        CU_CHECK(cuMemcpyDtoH(dv, flag, sizeof dv));
        printf("devgraph=%d,%d,%d\n", dv[0], dv[7], dv[8]); /* ((0 + 1) * 2 + 1) * 2 = 6; rc 0 */
        CU_CHECK(cuGraphExecDestroy(hx));
        CU_CHECK(cuGraphDestroy(hg));
        CU_CHECK(cuGraphExecDestroy(dx));
    } else {
        printf("devgraph=%s\n", cu_name(dr));
    }
    CU_CHECK(cuGraphDestroy(dg));

    /* 6. a graph of copy, kernel and batch nodes costs one frame per launch (the test counts the server's calls) */
    if (count_mode) {
        CU_CHECK(cuGraphCreate(&g, 0));
        CUDA_MEMCPY3D cdd2 = copy1d(CU_MEMORYTYPE_DEVICE, NULL, a, CU_MEMORYTYPE_DEVICE, NULL, b, sizeof in);
        CU_CHECK(cuGraphAddMemcpyNode(&cdd, g, NULL, 0, &cdd2, ctx));
        kp.extra = extra;
        CU_CHECK(cuGraphAddKernelNode(&kern, g, &cdd, 1, &kp));
        w[0].writeValue.value = 7; /* what the wait node below waits for */
        CU_CHECK(cuGraphAddBatchMemOpNode(&writes, g, &kern, 1, &bp));
        CU_CHECK(cuGraphAddBatchMemOpNode(&wait, g, &writes, 1, &bw));
        CU_CHECK(cuGraphInstantiate(&x, g, 0));
        CU_CHECK(cuGraphLaunch(x, s)); /* the first launch also uploads */
        CU_CHECK(cuStreamSynchronize(s));
        printf("phase=ready\n");
        fflush(stdout);
        getchar();
        for (int i = 0; i < 50; i++) CU_CHECK(cuGraphLaunch(x, s));
        CU_CHECK(cuStreamSynchronize(s));
        printf("phase=launched\n");
        fflush(stdout);
        getchar();
        CU_CHECK(cuGraphExecDestroy(x));
        CU_CHECK(cuGraphDestroy(g));
    }
    printf("drv graph mem ok\n");
    return 0;
}
