// CUDA graphs built node by node (cudaGraphAdd*Node, cudaGraphAddNode), queries, dependencies, executable
// graph updates, capture across streams (fork/join), memory nodes from stream-ordered allocation in a
// capture, and bad input. Prints key=value lines the test checks; `count` as the first argument instead
// pauses (reads a line from stdin) before and after 100 launches, so the test can count frames.
#include <atomic>
#include <cstring>
#include <string>
#include <vector>
#include "common.h"

__global__ void add(const int *a, const int *b, int *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
__global__ void scale(int *c, int k, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] *= k;
}
__global__ void setv(int *x, int i, int v) { x[i] = v; }
// x[dst] = x[a] * ka + x[b] * kb
__global__ void combine(int *x, int dst, int a, int ka, int b, int kb) { x[dst] = x[a] * ka + x[b] * kb; }
__global__ void incr(int *x) { x[0] += 1; }

static std::atomic<int> host_calls{0};
static void CUDART_CB count_call(void *) { host_calls++; }
static int destroyed_objects = 0;
static void CUDART_CB destroy_object(void *p) { destroyed_objects += *(int *)p; }
static void CUDART_CB write_source(void *p) {  // a host node that writes what a later copy node reads
    int *src = (int *)p;
    for (int i = 0; i < 64; i++) src[i] = 50 + i;
}

static cudaKernelNodeParams kparams(void *fn, void **args, unsigned grid = 1, unsigned block = 1) {
    cudaKernelNodeParams p = {};
    p.func = fn;
    p.gridDim = dim3(grid);
    p.blockDim = dim3(block);
    p.kernelParams = args;
    return p;
}

static int type_of(cudaGraphNode_t n) {
    cudaGraphNodeType t;
    CHECK(cudaGraphNodeGetType(n, &t));
    return (int)t;
}

static void wait_line() {
    char buf[16];
    if (!std::fgets(buf, sizeof buf, stdin)) std::exit(2);
}

int main(int argc, char **argv) {
    const int N = 256;
    cudaStream_t s, s2;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    int *d_x;
    CHECK(cudaMalloc(&d_x, 16 * sizeof(int)));

    if (argc > 1 && std::strcmp(argv[1], "count") == 0) {
        // One kernel node that increments a counter, launched 100 times: one frame per launch.
        cudaGraph_t g;
        cudaGraphNode_t n;
        CHECK(cudaGraphCreate(&g, 0));
        void *args[] = {&d_x};
        cudaKernelNodeParams p = kparams((void *)incr, args);
        CHECK(cudaGraphAddKernelNode(&n, g, nullptr, 0, &p));
        cudaGraphExec_t x;
        CHECK(cudaGraphInstantiate(&x, g, 0));
        CHECK(cudaMemset(d_x, 0, sizeof(int)));
        CHECK(cudaGraphLaunch(x, s));  // the first launch on a stream
        CHECK(cudaStreamSynchronize(s));
        std::printf("phase=ready\n");
        std::fflush(stdout);
        wait_line();
        for (int i = 0; i < 100; i++) CHECK(cudaGraphLaunch(x, s));
        CHECK(cudaStreamSynchronize(s));
        std::printf("phase=launched\n");
        std::fflush(stdout);
        wait_line();
        int v = 0;
        CHECK(cudaMemcpy(&v, d_x, sizeof v, cudaMemcpyDeviceToHost));
        std::printf("count=%d\n", v);
        return 0;
    }

    // ---- every node type in one graph ----
    int *d_a, *d_b, *d_c;
    CHECK(cudaMalloc(&d_a, N * sizeof(int)));
    CHECK(cudaMalloc(&d_b, N * sizeof(int)));
    CHECK(cudaMalloc(&d_c, N * sizeof(int)));
    std::vector<int> h_b(N), h_c(N, -1);
    for (int i = 0; i < N; i++) h_b[i] = i;
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));

    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t n_set, n_h2d, n_k, n_host, n_child, n_empty, n_d2h, n_rec;
    cudaMemsetParams ms = {};
    ms.dst = d_a;
    ms.value = 7;
    ms.elementSize = 4;
    ms.width = N;
    ms.height = 1;
    CHECK(cudaGraphAddMemsetNode(&n_set, g, nullptr, 0, &ms));
    CHECK(cudaGraphAddMemcpyNode1D(&n_h2d, g, nullptr, 0, d_b, h_b.data(), N * sizeof(int),
                                   cudaMemcpyHostToDevice));
    int n = N;
    void *add_args[] = {&d_a, &d_b, &d_c, &n};
    cudaKernelNodeParams kp = kparams((void *)add, add_args, N / 64, 64);
    cudaGraphNode_t k_deps[] = {n_set, n_h2d};
    CHECK(cudaGraphAddKernelNode(&n_k, g, k_deps, 2, &kp));
    cudaHostNodeParams hp = {count_call, nullptr};
    CHECK(cudaGraphAddHostNode(&n_host, g, &n_k, 1, &hp));
    cudaGraph_t child;  // the child: c *= 2
    CHECK(cudaGraphCreate(&child, 0));
    int two = 2;
    void *scale_args[] = {&d_c, &two, &n};
    cudaKernelNodeParams sp = kparams((void *)scale, scale_args, N / 64, 64);
    cudaGraphNode_t n_scale;
    CHECK(cudaGraphAddKernelNode(&n_scale, child, nullptr, 0, &sp));
    CHECK(cudaGraphAddChildGraphNode(&n_child, g, &n_k, 1, child));
    CHECK(cudaGraphDestroy(child));  // the node holds its own copy
    cudaGraphNode_t e_deps[] = {n_host, n_child};
    CHECK(cudaGraphAddEmptyNode(&n_empty, g, e_deps, 2));
    CHECK(cudaGraphAddMemcpyNode1D(&n_d2h, g, &n_empty, 1, h_c.data(), d_c, N * sizeof(int),
                                   cudaMemcpyDeviceToHost));
    CHECK(cudaGraphAddEventRecordNode(&n_rec, g, &n_d2h, 1, ev));

    size_t count = 0, roots = 0, nedges = 0;
    CHECK(cudaGraphGetNodes(g, nullptr, &count));
    CHECK(cudaGraphGetRootNodes(g, nullptr, &roots));
    CHECK(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &nedges));
    std::printf("build nodes=%zu roots=%zu edges=%zu types=%d,%d,%d,%d,%d,%d,%d,%d\n", count, roots, nedges,
                type_of(n_set), type_of(n_h2d), type_of(n_k), type_of(n_host), type_of(n_child), type_of(n_empty),
                type_of(n_d2h), type_of(n_rec));
    cudaKernelNodeParams got = {};
    CHECK(cudaGraphKernelNodeGetParams(n_k, &got));
    std::printf("kernel_params func=%d grid=%u block=%u n=%d\n", got.func == (void *)add, got.gridDim.x,
                got.blockDim.x, *(int *)got.kernelParams[3]);
    cudaGraph_t inner;
    size_t inner_n = 0;
    CHECK(cudaGraphChildGraphNodeGetGraph(n_child, &inner));
    CHECK(cudaGraphGetNodes(inner, nullptr, &inner_n));
    cudaEvent_t got_ev;
    CHECK(cudaGraphEventRecordNodeGetEvent(n_rec, &got_ev));
    std::printf("child_nodes=%zu event=%d\n", inner_n, got_ev == ev);

    cudaGraphExec_t x;
    CHECK(cudaGraphInstantiate(&x, g, 0));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    bool ok = true;
    for (int i = 0; i < N; i++) ok = ok && h_c[i] == 2 * (7 + i);
    std::printf("every_type=%s host_calls=%d event=%d\n", ok ? "ok" : "WRONG", host_calls.load(),
                (int)cudaEventQuery(ev));
    unsigned long long xflags = 1;
    CHECK(cudaGraphExecGetFlags(x, &xflags));
    CHECK(cudaGraphDebugDotPrint(g, argc > 1 ? argv[1] : "/dev/null", 0));
    std::printf("exec_flags=%llu\n", xflags);
    cudaEvent_t ev2, got_ev2;
    CHECK(cudaEventCreateWithFlags(&ev2, cudaEventDisableTiming));
    CHECK(cudaGraphEventRecordNodeSetEvent(n_rec, ev2));
    CHECK(cudaGraphEventRecordNodeGetEvent(n_rec, &got_ev2));
    CHECK(cudaGraphExecEventRecordNodeSetEvent(x, n_rec, ev2));
    std::printf("set_event=%d\n", got_ev2 == ev2);
    // cudaGraphMemcpyNodeSetParams1D on the graph does not change the executable graph made before
    CHECK(cudaGraphMemcpyNodeSetParams1D(n_d2h, h_c.data(), d_a, N * sizeof(int), cudaMemcpyDeviceToHost));
    // The host-to-device node reads its source when the graph runs (CUDA's semantics).
    for (int i = 0; i < N; i++) h_b[i] = 1000 + i;
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    ok = true;
    for (int i = 0; i < N; i++) ok = ok && h_c[i] == 2 * (1007 + i);
    std::printf("relaunch=%s host_calls=%d\n", ok ? "ok" : "WRONG", host_calls.load());

    // A copy node after a host node that writes its source reads what the host node wrote.
    {
        cudaGraph_t gh;
        CHECK(cudaGraphCreate(&gh, 0));
        std::vector<int> src(64, 0), dst(64, 0);
        cudaHostNodeParams wp = {write_source, src.data()};
        cudaGraphNode_t hn, cn, bn;
        CHECK(cudaGraphAddHostNode(&hn, gh, nullptr, 0, &wp));
        CHECK(cudaGraphAddMemcpyNode1D(&cn, gh, &hn, 1, d_x, src.data(), 16 * sizeof(int),
                                       cudaMemcpyHostToDevice));
        CHECK(cudaGraphAddMemcpyNode1D(&bn, gh, &cn, 1, dst.data(), d_x, 16 * sizeof(int), cudaMemcpyDeviceToHost));
        cudaGraphExec_t xh;
        CHECK(cudaGraphInstantiate(&xh, gh, 0));
        CHECK(cudaGraphLaunch(xh, s));
        CHECK(cudaStreamSynchronize(s));
        std::printf("host_then_copy=%d,%d\n", dst[0], dst[15]);
        CHECK(cudaGraphExecDestroy(xh));
        CHECK(cudaGraphDestroy(gh));
    }

    // ---- cudaGraphAddNode (cudaGraphNodeParams) and a 3D copy node ----
    cudaGraph_t g2;
    CHECK(cudaGraphCreate(&g2, 0));
    cudaGraphNodeParams np = {};
    np.type = cudaGraphNodeTypeMemset;
    np.memset.dst = d_x;
    np.memset.value = 3;
    np.memset.elementSize = 4;
    np.memset.width = 16;
    np.memset.height = 1;
    cudaGraphNode_t a0, a1, a2;
    CHECK(cudaGraphAddNode(&a0, g2, nullptr, nullptr, 0, &np));
    int idx = 5, val = 42;
    void *set_args[] = {&d_x, &idx, &val};
    np = {};
    np.type = cudaGraphNodeTypeKernel;
    np.kernel.func = (void *)setv;
    np.kernel.gridDim = dim3(1);
    np.kernel.blockDim = dim3(1);
    np.kernel.kernelParams = set_args;
    CHECK(cudaGraphAddNode(&a1, g2, &a0, nullptr, 1, &np));
    // 3D: a 4x3x2 box of the 16 ints seen as 4-int rows, 3 rows a slice... copied into a pitched buffer
    cudaPitchedPtr pitched;
    CHECK(cudaMalloc3D(&pitched, make_cudaExtent(4 * sizeof(int), 2, 2)));
    cudaMemcpy3DParms p3 = {};
    p3.srcPtr = make_cudaPitchedPtr(d_x, 4 * sizeof(int), 4, 2);
    p3.dstPtr = pitched;
    p3.extent = make_cudaExtent(4 * sizeof(int), 2, 2);
    p3.kind = cudaMemcpyDeviceToDevice;
    CHECK(cudaGraphAddMemcpyNode(&a2, g2, &a1, 1, &p3));
    cudaGraphExec_t x2;
    CHECK(cudaGraphInstantiate(&x2, g2, 0));
    CHECK(cudaGraphLaunch(x2, s));
    CHECK(cudaStreamSynchronize(s));
    int box[16];
    CHECK(cudaMemcpy2D(box, 4 * sizeof(int), pitched.ptr, pitched.pitch, 4 * sizeof(int), 4, cudaMemcpyDeviceToHost));
    std::string boxs;
    for (int i = 0; i < 16; i++) boxs += std::to_string(box[i]) + (i < 15 ? "," : "");
    std::printf("add_node box=%s\n", boxs.c_str());

    // ---- dependencies: nodes added out of order, edges added afterwards (a diamond) ----
    cudaGraph_t g3;
    CHECK(cudaGraphCreate(&g3, 0));
    cudaGraphNode_t nd, nb, nc, na;
    int i0 = 0, i1 = 1, i2 = 2, i3 = 3, one = 1, ten = 10, zero = 0;
    void *d_args[] = {&d_x, &i3, &i1, &one, &i2, &one};   // x3 = x1 + x2
    void *b_args[] = {&d_x, &i1, &i0, &one, &i0, &one};   // x1 = x0 + x0
    void *c_args[] = {&d_x, &i2, &i0, &ten, &i0, &zero};  // x2 = x0 * 10
    void *a_args[] = {&d_x, &i0, &val};                   // x0 = 42
    cudaKernelNodeParams pd = kparams((void *)combine, d_args), pb = kparams((void *)combine, b_args),
                         pc = kparams((void *)combine, c_args), pa = kparams((void *)setv, a_args);
    CHECK(cudaGraphAddKernelNode(&nd, g3, nullptr, 0, &pd));
    CHECK(cudaGraphAddKernelNode(&nb, g3, nullptr, 0, &pb));
    CHECK(cudaGraphAddKernelNode(&nc, g3, nullptr, 0, &pc));
    CHECK(cudaGraphAddKernelNode(&na, g3, nullptr, 0, &pa));
    cudaGraphNode_t from[] = {na, na, nb, nc}, to[] = {nb, nc, nd, nd};
    CHECK(cudaGraphAddDependencies(g3, from, to, nullptr, 4));
    size_t ndeps = 0, ndependents = 0;
    CHECK(cudaGraphNodeGetDependencies(nd, nullptr, nullptr, &ndeps));
    CHECK(cudaGraphNodeGetDependentNodes(na, nullptr, nullptr, &ndependents));
    CHECK(cudaGraphGetRootNodes(g3, nullptr, &roots));
    cudaGraphNode_t ef[8], et[8];
    nedges = 8;
    CHECK(cudaGraphGetEdges(g3, ef, et, nullptr, &nedges));
    cudaGraphNode_t root;
    size_t one_root = 1;
    CHECK(cudaGraphGetRootNodes(g3, &root, &one_root));
    cudaGraphExec_t x3;
    CHECK(cudaGraphInstantiate(&x3, g3, 0));
    CHECK(cudaMemset(d_x, 0, 16 * sizeof(int)));
    CHECK(cudaGraphLaunch(x3, s));
    int h_x[16];
    CHECK(cudaMemcpy(h_x, d_x, sizeof h_x, cudaMemcpyDeviceToHost));
    std::printf("diamond x=%d,%d,%d,%d deps=%zu dependents=%zu roots=%zu root_is_a=%d edges=%zu\n", h_x[0], h_x[1],
                h_x[2], h_x[3], ndeps, ndependents, roots, root == na, nedges);
    // A cycle cannot be instantiated.
    cudaGraphNode_t back_from[] = {nd}, back_to[] = {na};
    CHECK(cudaGraphAddDependencies(g3, back_from, back_to, nullptr, 1));
    cudaGraphExec_t bad_x = nullptr;
    cudaError_t cyc = cudaGraphInstantiate(&bad_x, g3, 0);
    CHECK(cudaGraphRemoveDependencies(g3, back_from, back_to, nullptr, 1));
    std::printf("cycle=%d\n", cyc != cudaSuccess);
    cudaGetLastError();

    // ---- executable graph updates ----
    // cudaGraphExecKernelNodeSetParams: the next launches use the new arguments.
    int v9 = 9;
    void *a9_args[] = {&d_x, &i0, &v9};
    cudaKernelNodeParams pa9 = kparams((void *)setv, a9_args);
    CHECK(cudaGraphExecKernelNodeSetParams(x3, na, &pa9));
    CHECK(cudaGraphLaunch(x3, s));
    CHECK(cudaMemcpy(h_x, d_x, sizeof h_x, cudaMemcpyDeviceToHost));
    std::printf("exec_set x=%d,%d,%d,%d\n", h_x[0], h_x[1], h_x[2], h_x[3]);
    // the same through cudaGraphExecNodeSetParams (cudaGraphNodeParams)
    int v11 = 11;
    void *a11_args[] = {&d_x, &i0, &v11};
    cudaGraphNodeParams gp = {};
    gp.type = cudaGraphNodeTypeKernel;
    gp.kernel.func = (void *)setv;
    gp.kernel.gridDim = dim3(1);
    gp.kernel.blockDim = dim3(1);
    gp.kernel.kernelParams = a11_args;
    CHECK(cudaGraphExecNodeSetParams(x3, na, &gp));
    CHECK(cudaGraphLaunch(x3, s));
    CHECK(cudaMemcpy(h_x, d_x, sizeof h_x, cudaMemcpyDeviceToHost));
    std::printf("exec_node_set x=%d,%d,%d,%d\n", h_x[0], h_x[1], h_x[2], h_x[3]);
    CHECK(cudaGraphExecKernelNodeSetParams(x3, na, &pa9));  // back to 9 for what follows
    // cudaGraphExecUpdate from a clone with one node's arguments changed: same topology, accepted.
    cudaGraph_t g4;
    CHECK(cudaGraphClone(&g4, g3));
    size_t n4 = 0;
    CHECK(cudaGraphGetNodes(g4, nullptr, &n4));
    std::vector<cudaGraphNode_t> nodes4(n4);
    CHECK(cudaGraphGetNodes(g4, nodes4.data(), &n4));
    int v5 = 5;
    void *a5_args[] = {&d_x, &i0, &v5};
    cudaKernelNodeParams pa5 = kparams((void *)setv, a5_args);
    cudaGraphNode_t na4;
    CHECK(cudaGraphNodeFindInClone(&na4, na, g4));
    std::printf("find_in_clone=%d\n", na4 == nodes4[3]);
    CHECK(cudaGraphKernelNodeSetParams(nodes4[3], &pa5));  // the clone keeps the order of the nodes
    cudaGraphExecUpdateResultInfo info = {};
    CHECK(cudaGraphExecUpdate(x3, g4, &info));
    CHECK(cudaGraphLaunch(x3, s));
    CHECK(cudaMemcpy(h_x, d_x, sizeof h_x, cudaMemcpyDeviceToHost));
    std::printf("update=%d x=%d,%d,%d,%d\n", (int)info.result, h_x[0], h_x[1], h_x[2], h_x[3]);
    // A graph with another topology is refused: cudaErrorGraphExecUpdateFailure, TopologyChanged.
    cudaGraphNode_t extra;
    CHECK(cudaGraphAddEmptyNode(&extra, g4, nullptr, 0));
    cudaError_t upd = cudaGraphExecUpdate(x3, g4, &info);
    std::printf("update_topology=%d result=%d\n", (int)upd, (int)info.result);
    cudaGetLastError();

    // ---- capture across streams: fork and join through events ----
    cudaEvent_t e1, e2;
    CHECK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    setv<<<1, 1, 0, s>>>(d_x, 0, 1);                     // x0 = 1
    CHECK(cudaEventRecord(e1, s));
    CHECK(cudaStreamWaitEvent(s2, e1, 0));               // fork: s2 joins the capture
    combine<<<1, 1, 0, s2>>>(d_x, 1, 0, 1, 0, 1);         // x1 = 2*x0
    combine<<<1, 1, 0, s>>>(d_x, 2, 0, 3, 0, 0);          // x2 = 3*x0
    cudaStreamCaptureStatus st1, st2;
    unsigned long long id1 = 0, id2 = 0;
    cudaGraph_t cg1 = nullptr, cg2 = nullptr;
    const cudaGraphNode_t *cdeps = nullptr;
    size_t ncdeps = 0;
    CHECK(cudaStreamGetCaptureInfo(s, &st1, &id1, &cg1, nullptr, nullptr, nullptr));
    CHECK(cudaStreamGetCaptureInfo(s2, &st2, &id2, &cg2, &cdeps, nullptr, &ncdeps));
    std::printf("capture_info s=%d s2=%d same_id=%d same_graph=%d s2_deps=%zu s2_dep_type=%d\n", (int)st1,
                (int)st2, id1 == id2 && id1 != 0, cg1 == cg2 && cg1, ncdeps, ncdeps ? type_of(cdeps[0]) : -1);
    CHECK(cudaEventRecord(e2, s2));
    CHECK(cudaStreamWaitEvent(s, e2, 0));                 // join
    combine<<<1, 1, 0, s>>>(d_x, 3, 1, 1, 2, 1);          // x3 = x1 + x2
    cudaGraph_t fj;
    CHECK(cudaStreamEndCapture(s, &fj));
    CHECK(cudaStreamIsCapturing(s2, &st2));
    size_t fj_nodes = 0, fj_edges = 0;
    CHECK(cudaGraphGetNodes(fj, nullptr, &fj_nodes));
    CHECK(cudaGraphGetEdges(fj, nullptr, nullptr, nullptr, &fj_edges));
    cudaGraphExec_t xfj;
    CHECK(cudaGraphInstantiate(&xfj, fj, 0));
    CHECK(cudaMemset(d_x, 0, 16 * sizeof(int)));
    CHECK(cudaGraphLaunch(xfj, s2));
    CHECK(cudaStreamSynchronize(s2));
    CHECK(cudaMemcpy(h_x, d_x, sizeof h_x, cudaMemcpyDeviceToHost));
    std::printf("fork_join nodes=%zu edges=%zu x=%d,%d,%d,%d s2_after=%d\n", fj_nodes, fj_edges, h_x[0], h_x[1],
                h_x[2], h_x[3], (int)st2);

    // cudaStreamUpdateCaptureDependencies: Set with no nodes makes the next captured call a root
    {
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        setv<<<1, 1, 0, s>>>(d_x, 0, 1);
        setv<<<1, 1, 0, s>>>(d_x, 1, 2);
        CHECK(cudaStreamUpdateCaptureDependencies(s, nullptr, nullptr, 0, cudaStreamSetCaptureDependencies));
        setv<<<1, 1, 0, s>>>(d_x, 2, 3);
        cudaGraph_t ug;
        CHECK(cudaStreamEndCapture(s, &ug));
        size_t ur = 0, ue = 0;
        CHECK(cudaGraphGetRootNodes(ug, nullptr, &ur));
        CHECK(cudaGraphGetEdges(ug, nullptr, nullptr, nullptr, &ue));
        std::printf("update_deps roots=%zu edges=%zu\n", ur, ue);
        CHECK(cudaGraphDestroy(ug));
    }

    // cudaStreamBeginCaptureToGraph: captured work joins an existing graph, after the given nodes
    {
        cudaGraph_t tg;
        CHECK(cudaGraphCreate(&tg, 0));
        int four = 4;
        void *t_args[] = {&d_x, &i0, &four};
        cudaKernelNodeParams tp = kparams((void *)setv, t_args);
        cudaGraphNode_t tn;
        CHECK(cudaGraphAddKernelNode(&tn, tg, nullptr, 0, &tp));
        CHECK(cudaStreamBeginCaptureToGraph(s, tg, &tn, nullptr, 1, cudaStreamCaptureModeGlobal));
        combine<<<1, 1, 0, s>>>(d_x, 1, 0, 2, 0, 0);  // x1 = 2 * x0
        cudaGraph_t back;
        CHECK(cudaStreamEndCapture(s, &back));
        size_t tnodes = 0, tedges = 0;
        CHECK(cudaGraphGetNodes(tg, nullptr, &tnodes));
        CHECK(cudaGraphGetEdges(tg, nullptr, nullptr, nullptr, &tedges));
        cudaGraphExec_t tx;
        CHECK(cudaGraphInstantiate(&tx, tg, 0));
        CHECK(cudaGraphLaunch(tx, s));
        CHECK(cudaMemcpy(h_x, d_x, sizeof h_x, cudaMemcpyDeviceToHost));
        std::printf("capture_to_graph same=%d nodes=%zu edges=%zu x1=%d\n", back == tg, tnodes, tedges, h_x[1]);
        CHECK(cudaGraphExecDestroy(tx));
        CHECK(cudaGraphDestroy(tg));
    }

    // ---- memory nodes: cudaMallocAsync / cudaFreeAsync inside a capture ----
    std::vector<int> h_m(N, 0);
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    int *d_m = nullptr;
    CHECK(cudaMallocAsync(&d_m, N * sizeof(int), s));
    CHECK(cudaMemsetAsync(d_m, 0, N * sizeof(int), s));
    add<<<N / 64, 64, 0, s>>>(d_m, d_b, d_m, N);          // m = b
    CHECK(cudaMemcpyAsync(h_m.data(), d_m, N * sizeof(int), cudaMemcpyDeviceToHost, s));
    CHECK(cudaFreeAsync(d_m, s));
    cudaGraph_t mg;
    CHECK(cudaStreamEndCapture(s, &mg));
    size_t mg_n = 5;
    cudaGraphNode_t mnodes[5];
    CHECK(cudaGraphGetNodes(mg, mnodes, &mg_n));
    std::string mtypes;
    for (size_t i = 0; i < mg_n; i++) mtypes += std::to_string(type_of(mnodes[i])) + (i + 1 < mg_n ? "," : "");
    cudaGraphExec_t xm;
    CHECK(cudaGraphInstantiate(&xm, mg, 0));
    CHECK(cudaGraphDestroy(mg));  // the executable graph keeps the memory
    CHECK(cudaGraphLaunch(xm, s));
    CHECK(cudaGraphLaunch(xm, s));
    CHECK(cudaStreamSynchronize(s));
    ok = true;
    for (int i = 0; i < N; i++) ok = ok && h_m[i] == 1000 + i;
    std::printf("mem_nodes types=%s result=%s\n", mtypes.c_str(), ok ? "ok" : "WRONG");
    CHECK(cudaGraphExecDestroy(xm));

    // ---- user objects: the destructor runs when the graph and its executable graph let go ----
    {
        static int one_obj = 1;
        cudaUserObject_t obj;
        CHECK(cudaUserObjectCreate(&obj, &one_obj, destroy_object, 1, cudaUserObjectNoDestructorSync));
        cudaGraph_t ug;
        CHECK(cudaGraphCreate(&ug, 0));
        cudaGraphNode_t en;
        CHECK(cudaGraphAddEmptyNode(&en, ug, nullptr, 0));
        CHECK(cudaGraphRetainUserObject(ug, obj, 1, cudaGraphUserObjectMove));  // the graph takes our reference
        cudaGraph_t uc;
        CHECK(cudaGraphClone(&uc, ug));
        cudaGraphExec_t ux;
        CHECK(cudaGraphInstantiate(&ux, ug, 0));
        CHECK(cudaGraphDestroy(ug));
        CHECK(cudaGraphDestroy(uc));
        int after_graphs = destroyed_objects;
        CHECK(cudaGraphLaunch(ux, s));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaGraphExecDestroy(ux));
        int e_gone = (int)cudaUserObjectRetain(obj, 1);
        cudaGetLastError();
        std::printf("user_object after_graphs=%d after_exec=%d gone=%d\n", after_graphs, destroyed_objects, e_gone);
    }

    // ---- bad input: clear errors, nothing else harmed ----
    cudaGraphNode_t bad;
    int e_null_graph = (int)cudaGraphAddKernelNode(&bad, nullptr, nullptr, 0, &kp);
    int e_foreign_dep = (int)cudaGraphAddEmptyNode(&bad, g2, &n_k, 1);  // n_k is a node of g
    cudaGraphNode_t dup[] = {n_set, n_set};
    int e_dup_dep = (int)cudaGraphAddEmptyNode(&bad, g, dup, 2);
    int e_wrong_type = (int)cudaGraphKernelNodeGetParams(n_set, &got);
    int e_null_params = (int)cudaGraphAddMemsetNode(&bad, g, nullptr, 0, nullptr);
    np = {};
    np.type = cudaGraphNodeTypeExtSemaphoreSignal;  // not supported by gpushim
    int e_ext_sem = (int)cudaGraphAddNode(&bad, g2, nullptr, nullptr, 0, &np);
    int e_exec_foreign = (int)cudaGraphExecKernelNodeSetParams(x3, n_k, &kp);  // n_k is not in x3
    ms.dst = h_c.data();  // host memory
    int e_host_memset = (int)cudaGraphAddMemsetNode(&bad, g2, nullptr, 0, &ms);
    std::printf("bad null_graph=%d foreign_dep=%d dup_dep=%d wrong_type=%d null_params=%d ext_sem=%d "
                "exec_foreign=%d host_memset=%d\n", e_null_graph, e_foreign_dep, e_dup_dep, e_wrong_type,
                e_null_params, e_ext_sem, e_exec_foreign, e_host_memset);
    cudaGetLastError();
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphExecDestroy(x2));
    CHECK(cudaGraphExecDestroy(x3));
    CHECK(cudaGraphExecDestroy(xfj));
    int e_destroyed = (int)cudaGraphLaunch(x3, s);
    cudaGetLastError();
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaGraphDestroy(g2));
    CHECK(cudaGraphDestroy(g3));
    CHECK(cudaGraphDestroy(g4));
    CHECK(cudaGraphDestroy(fj));
    int e_destroyed_graph = (int)cudaGraphDestroy(g);
    cudaGetLastError();
    CHECK(cudaDeviceSynchronize());
    std::printf("destroyed launch=%d graph=%d\n", e_destroyed, e_destroyed_graph);
    std::printf("OK\n");
    return 0;
}
