/* The driver face: stream capture and graphs, on the runtime face's single-stream capture (api_graph.c):
 * CUgraph and CUgraphExec are the runtime's cudaGraph_t and cudaGraphExec_t. */
#include "drv_api.h"

#define GRT(expr)                               \
    do {                                         \
        CUresult gs_r_ = gs_drv_enter(NULL);     \
        return gs_r_ ? gs_r_ : GS_DRV_CALL(expr); \
    } while (0)

/* CUDA 10.0's cuStreamBeginCapture has no mode: it captures in CU_STREAM_CAPTURE_MODE_GLOBAL (0). */
GS_DRV CUresult gs_cuStreamBeginCapture(CUstream s) { GRT(gs_cudaStreamBeginCapture(s, 0)); }
GS_DRV CUresult gs_cuStreamBeginCapture_ptsz(CUstream s) { GRT(gs_cudaStreamBeginCapture_ptsz(s, 0)); }
GS_DRV CUresult gs_cuStreamBeginCapture_v2(CUstream s, int mode) { GRT(gs_cudaStreamBeginCapture(s, mode)); }
GS_DRV CUresult gs_cuStreamBeginCapture_v2_ptsz(CUstream s, int mode) { GRT(gs_cudaStreamBeginCapture_ptsz(s, mode)); }
GS_DRV CUresult gs_cuStreamEndCapture(CUstream s, void **graph) { GRT(gs_cudaStreamEndCapture(s, graph)); }
GS_DRV CUresult gs_cuStreamEndCapture_ptsz(CUstream s, void **graph) { GRT(gs_cudaStreamEndCapture_ptsz(s, graph)); }
GS_DRV CUresult gs_cuThreadExchangeStreamCaptureMode(int *mode) { GRT(gs_cudaThreadExchangeStreamCaptureMode(mode)); }

GS_DRV CUresult gs_cuGraphInstantiate(void **exec, void *g, void **err_node, char *log, size_t size) {
    GRT(gs_cudaGraphInstantiate__11(exec, g, err_node, log, size));
}
GS_DRV CUresult gs_cuGraphInstantiate_v2(void **exec, void *g, void **err_node, char *log, size_t size) {
    GRT(gs_cudaGraphInstantiate__11(exec, g, err_node, log, size));
}
GS_DRV CUresult gs_cuGraphInstantiateWithFlags(void **exec, void *g, unsigned long long flags) {
    GRT(gs_cudaGraphInstantiateWithFlags(exec, g, flags));
}
GS_DRV CUresult gs_cuGraphLaunch(void *exec, CUstream s) { GRT(gs_cudaGraphLaunch(exec, s)); }
GS_DRV CUresult gs_cuGraphLaunch_ptsz(void *exec, CUstream s) { GRT(gs_cudaGraphLaunch_ptsz(exec, s)); }
GS_DRV CUresult gs_cuGraphUpload(void *exec, CUstream s) { GRT(gs_cudaGraphUpload(exec, s)); }
GS_DRV CUresult gs_cuGraphUpload_ptsz(void *exec, CUstream s) { GRT(gs_cudaGraphUpload_ptsz(exec, s)); }
GS_DRV CUresult gs_cuGraphGetNodes(void *g, void **nodes, size_t *count) { GRT(gs_cudaGraphGetNodes(g, nodes, count)); }
GS_DRV CUresult gs_cuGraphDestroy(void *g) { GRT(gs_cudaGraphDestroy(g)); }
GS_DRV CUresult gs_cuGraphExecDestroy(void *exec) { GRT(gs_cudaGraphExecDestroy(exec)); }
/* User objects: CUuserObject is the runtime's cudaUserObject_t, CUhostFn its cudaHostFn_t, the flags the same
 * (cuda.core's GraphBuilder keeps its kernels' arguments alive with them) */
GS_DRV CUresult gs_cuUserObjectCreate(void **out, void *ptr, cudaHostFn_t fn, unsigned refs, unsigned flags) {
    GRT(gs_cudaUserObjectCreate(out, ptr, fn, refs, flags));
}
GS_DRV CUresult gs_cuUserObjectRetain(void *obj, unsigned count) { GRT(gs_cudaUserObjectRetain(obj, count)); }
GS_DRV CUresult gs_cuUserObjectRelease(void *obj, unsigned count) { GRT(gs_cudaUserObjectRelease(obj, count)); }
GS_DRV CUresult gs_cuGraphRetainUserObject(void *g, void *obj, unsigned count, unsigned flags) {
    GRT(gs_cudaGraphRetainUserObject(g, obj, count, flags));
}
GS_DRV CUresult gs_cuGraphReleaseUserObject(void *g, void *obj, unsigned count) {
    GRT(gs_cudaGraphReleaseUserObject(g, obj, count));
}
#undef GRT

/* ---- graphs built node by node (shim/gs_graph.h): CUgraphNode is the runtime's cudaGraphNode_t ---- */

#include "gs_graph.h"

struct drv_function;
CUresult gs_cuLaunchKernel(struct drv_function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                           unsigned bz, unsigned smem, CUstream s, void **params, void **extra);

#define GRT(expr)                               \
    do {                                         \
        CUresult gs_r_ = gs_drv_enter(NULL);     \
        return gs_r_ ? gs_r_ : GS_DRV_CALL(expr); \
    } while (0)

GS_DRV CUresult gs_cuGraphCreate(void **g, unsigned flags) { GRT(gs_cudaGraphCreate(g, flags)); }
GS_DRV CUresult gs_cuGraphClone(void **out, void *g) { GRT(gs_cudaGraphClone(out, g)); }
GS_DRV CUresult gs_cuGraphDestroyNode(void *n) { GRT(gs_cudaGraphDestroyNode(n)); }
GS_DRV CUresult gs_cuGraphAddEmptyNode(void **n, void *g, void *const *d, size_t nd) {
    GRT(gs_cudaGraphAddEmptyNode(n, g, d, nd));
}
GS_DRV CUresult gs_cuGraphAddChildGraphNode(void **n, void *g, void *const *d, size_t nd, void *child) {
    GRT(gs_cudaGraphAddChildGraphNode(n, g, d, nd, child));
}
GS_DRV CUresult gs_cuGraphChildGraphNodeGetGraph(void *n, void **g) { GRT(gs_cudaGraphChildGraphNodeGetGraph(n, g)); }
GS_DRV CUresult gs_cuGraphAddEventRecordNode(void **n, void *g, void *const *d, size_t nd, void *ev) {
    GRT(gs_cudaGraphAddEventRecordNode(n, g, d, nd, ev));
}
GS_DRV CUresult gs_cuGraphAddEventWaitNode(void **n, void *g, void *const *d, size_t nd, void *ev) {
    GRT(gs_cudaGraphAddEventWaitNode(n, g, d, nd, ev));
}
GS_DRV CUresult gs_cuGraphEventRecordNodeGetEvent(void *n, void **ev) { GRT(gs_cudaGraphEventRecordNodeGetEvent(n, ev)); }
GS_DRV CUresult gs_cuGraphEventWaitNodeGetEvent(void *n, void **ev) { GRT(gs_cudaGraphEventWaitNodeGetEvent(n, ev)); }
/* CUDA_HOST_NODE_PARAMS has the runtime's layout */
GS_DRV CUresult gs_cuGraphAddHostNode(void **n, void *g, void *const *d, size_t nd, const void *p) {
    GRT(gs_cudaGraphAddHostNode(n, g, d, nd, p));
}
GS_DRV CUresult gs_cuGraphHostNodeGetParams(void *n, void *p) { GRT(gs_cudaGraphHostNodeGetParams(n, p)); }
GS_DRV CUresult gs_cuGraphHostNodeSetParams(void *n, const void *p) { GRT(gs_cudaGraphHostNodeSetParams(n, p)); }
GS_DRV CUresult gs_cuGraphExecHostNodeSetParams(void *x, void *n, const void *p) {
    GRT(gs_cudaGraphExecHostNodeSetParams(x, n, p));
}
/* CUDA_MEMSET_NODE_PARAMS has the runtime's layout; the context is the current one */
GS_DRV CUresult gs_cuGraphAddMemsetNode(void **n, void *g, void *const *d, size_t nd, const void *p, void *ctx) {
    (void)ctx;
    GRT(gs_cudaGraphAddMemsetNode(n, g, d, nd, p));
}
GS_DRV CUresult gs_cuGraphMemsetNodeGetParams(void *n, void *p) { GRT(gs_cudaGraphMemsetNodeGetParams(n, p)); }
GS_DRV CUresult gs_cuGraphExecMemsetNodeSetParams(void *x, void *n, const void *p, void *ctx) {
    (void)ctx;
    GRT(gs_cudaGraphExecMemsetNodeSetParams(x, n, p));
}
GS_DRV CUresult gs_cuGraphAddMemFreeNode(void **n, void *g, void *const *d, size_t nd, void *dptr) {
    GRT(gs_cudaGraphAddMemFreeNode(n, g, d, nd, dptr));
}
GS_DRV CUresult gs_cuGraphGetRootNodes(void *g, void **nodes, size_t *count) { GRT(gs_cudaGraphGetRootNodes(g, nodes, count)); }
GS_DRV CUresult gs_cuGraphGetEdges(void *g, void **from, void **to, size_t *n) { GRT(gs_cudaGraphGetEdges(g, from, to, n)); }
GS_DRV CUresult gs_cuGraphGetEdges_v2(void *g, void **from, void **to, void *ed, size_t *n) {
    GRT(gs_cudaGraphGetEdges__13(g, from, to, ed, n));
}
GS_DRV CUresult gs_cuGraphAddDependencies(void *g, void *const *from, void *const *to, size_t n) {
    GRT(gs_cudaGraphAddDependencies(g, from, to, n));
}
GS_DRV CUresult gs_cuGraphAddDependencies_v2(void *g, void *const *from, void *const *to, const void *ed, size_t n) {
    GRT(gs_cudaGraphAddDependencies__13(g, from, to, ed, n));
}
GS_DRV CUresult gs_cuGraphRemoveDependencies(void *g, void *const *from, void *const *to, size_t n) {
    GRT(gs_cudaGraphRemoveDependencies(g, from, to, n));
}
GS_DRV CUresult gs_cuGraphRemoveDependencies_v2(void *g, void *const *from, void *const *to, const void *ed, size_t n) {
    GRT(gs_cudaGraphRemoveDependencies__13(g, from, to, ed, n));
}
GS_DRV CUresult gs_cuGraphNodeGetDependencies(void *n, void **out, size_t *c) { GRT(gs_cudaGraphNodeGetDependencies(n, out, c)); }
GS_DRV CUresult gs_cuGraphNodeGetDependencies_v2(void *n, void **out, void *ed, size_t *c) {
    GRT(gs_cudaGraphNodeGetDependencies__13(n, out, ed, c));
}
GS_DRV CUresult gs_cuGraphNodeGetDependentNodes(void *n, void **out, size_t *c) {
    GRT(gs_cudaGraphNodeGetDependentNodes(n, out, c));
}
GS_DRV CUresult gs_cuGraphNodeGetDependentNodes_v2(void *n, void **out, void *ed, size_t *c) {
    GRT(gs_cudaGraphNodeGetDependentNodes__13(n, out, ed, c));
}
GS_DRV CUresult gs_cuGraphNodeGetType(void *n, int *type) { GRT(gs_cudaGraphNodeGetType(n, type)); }
GS_DRV CUresult gs_cuGraphExecUpdate(void *x, void *g, void **err_node, int *result) {
    GRT(gs_cudaGraphExecUpdate__11(x, g, err_node, result));
}
GS_DRV CUresult gs_cuGraphExecUpdate_v2(void *x, void *g, void *info) { GRT(gs_cudaGraphExecUpdate__12(x, g, info)); }
GS_DRV CUresult gs_cuGraphInstantiateWithParams(void **x, void *g, void *p) { GRT(gs_cudaGraphInstantiateWithParams(x, g, p)); }
GS_DRV CUresult gs_cuGraphInstantiateWithParams_ptsz(void **x, void *g, void *p) {
    GRT(gs_cudaGraphInstantiateWithParams(x, g, p));
}
GS_DRV CUresult gs_cuStreamGetCaptureInfo(CUstream s, int *st, unsigned long long *id) {
    GRT(gs_cudaStreamGetCaptureInfo(s, st, id));
}
GS_DRV CUresult gs_cuStreamGetCaptureInfo_ptsz(CUstream s, int *st, unsigned long long *id) {
    GRT(gs_cudaStreamGetCaptureInfo_ptsz(s, st, id));
}
GS_DRV CUresult gs_cuStreamGetCaptureInfo_v2(CUstream s, int *st, unsigned long long *id, void **g, const void ***d,
                                             size_t *n) {
    GRT(gs_cudaStreamGetCaptureInfo_v2(s, st, id, g, d, n));
}
GS_DRV CUresult gs_cuStreamGetCaptureInfo_v2_ptsz(CUstream s, int *st, unsigned long long *id, void **g,
                                                  const void ***d, size_t *n) {
    GRT(gs_cudaStreamGetCaptureInfo_v2_ptsz(s, st, id, g, d, n));
}
GS_DRV CUresult gs_cuStreamGetCaptureInfo_v3(CUstream s, int *st, unsigned long long *id, void **g, const void ***d,
                                             const void **ed, size_t *n) {
    GRT(gs_cudaStreamGetCaptureInfo_v3(s, st, id, g, d, ed, n));
}
GS_DRV CUresult gs_cuStreamGetCaptureInfo_v3_ptsz(CUstream s, int *st, unsigned long long *id, void **g,
                                                  const void ***d, const void **ed, size_t *n) {
    GRT(gs_cudaStreamGetCaptureInfo_v3_ptsz(s, st, id, g, d, ed, n));
}

/* CUDA_KERNEL_NODE_PARAMS (v1: 56 bytes; v2 adds kern and ctx): a CUfunction and the launch configuration,
 * recorded as the launch cuLaunchKernel would post (kernelParams or extra). */
typedef struct {
    struct drv_function *func;
    unsigned gx, gy, gz, bx, by, bz, smem;
    void **params, **extra;
    void *kern, *ctx;
} drv_kernel_params;

static cudaError_t drv_build_kernel(gs_gops *ops, const drv_kernel_params *p, int v2) {
    if (!p || !p->func) return cudaErrorInvalidValue;
    if (v2 && p->kern && p->kern != (void *)p->func) {
        gs_warn_once("graph-cukernel", "kernel nodes naming a CUkernel are not supported by gpushim yet");
        return cudaErrorNotSupported;
    }
    gs_recorder r;
    gs_record_begin(&r, ops);
    CUresult cr = gs_cuLaunchKernel(p->func, p->gx, p->gy, p->gz, p->bx, p->by, p->bz, p->smem, NULL, p->params,
                                    p->extra);
    gs_record_end(&r);
    return cr == CUDA_SUCCESS ? cudaSuccess : cr == CUDA_ERROR_INVALID_VALUE ? cudaErrorInvalidValue
                                                                             : cudaErrorInvalidDeviceFunction;
}

static CUresult drv_add_kernel(void **n, void *g, void *const *d, size_t nd, const drv_kernel_params *p, int v2) {
    CUresult cr = gs_drv_enter(NULL);
    if (cr) return cr;
    gs_gops ops = {0};
    cudaError_t e = drv_build_kernel(&ops, p, v2);
    if (e) { gs_ops_clear(&ops); return gs_drv_err(e); }
    return GS_DRV_CALL(gs_graph_add_built(n, g, d, nd, GT_KERNEL, &ops, p, v2 ? 72 : 56));
}
GS_DRV CUresult gs_cuGraphAddKernelNode(void **n, void *g, void *const *d, size_t nd, const drv_kernel_params *p) {
    return drv_add_kernel(n, g, d, nd, p, 0);
}
GS_DRV CUresult gs_cuGraphAddKernelNode_v2(void **n, void *g, void *const *d, size_t nd, const drv_kernel_params *p) {
    return drv_add_kernel(n, g, d, nd, p, 1);
}
GS_DRV CUresult gs_cuGraphKernelNodeGetParams(void *n, void *p) { GRT(gs_cudaGraphKernelNodeGetParams(n, p)); }
GS_DRV CUresult gs_cuGraphKernelNodeGetParams_v2(void *n, void *p) {
    GRT(gs_graph_node_params(n, GT_KERNEL, p, 72));
}

static CUresult drv_set_kernel(void *x, void *n, const drv_kernel_params *p, int v2) {
    CUresult cr = gs_drv_enter(NULL);
    if (cr) return cr;
    gs_gops ops = {0};
    cudaError_t e = drv_build_kernel(&ops, p, v2);
    if (e) { gs_ops_clear(&ops); return gs_drv_err(e); }
    if (x) return GS_DRV_CALL(gs_graph_exec_set_ops(x, n, GT_KERNEL, &ops));
    return GS_DRV_CALL(gs_graph_node_set_ops(n, GT_KERNEL, &ops, p, v2 ? 72 : 56));
}
GS_DRV CUresult gs_cuGraphKernelNodeSetParams(void *n, const drv_kernel_params *p) { return drv_set_kernel(NULL, n, p, 0); }
GS_DRV CUresult gs_cuGraphKernelNodeSetParams_v2(void *n, const drv_kernel_params *p) {
    return drv_set_kernel(NULL, n, p, 1);
}
GS_DRV CUresult gs_cuGraphExecKernelNodeSetParams(void *x, void *n, const drv_kernel_params *p) {
    if (!x) return CUDA_ERROR_INVALID_VALUE;
    return drv_set_kernel(x, n, p, 0);
}
GS_DRV CUresult gs_cuGraphExecKernelNodeSetParams_v2(void *x, void *n, const drv_kernel_params *p) {
    if (!x) return CUDA_ERROR_INVALID_VALUE;
    return drv_set_kernel(x, n, p, 1);
}

/* ---- conditional nodes (api_graph_cond.c) and cuGraphAddNode ---- */

GS_DRV CUresult gs_cuGraphConditionalHandleCreate(uint64_t *h, void *g, void *ctx, unsigned dflt, unsigned flags) {
    (void)ctx; /* the graph's context: the one current context of the session's device */
    GRT(gs_cudaGraphConditionalHandleCreate(h, g, dflt, flags));
}

/* shim/drv_stream_graph.c (after drv_memory.c and drv_stream.c in the unity build) */
CUresult gs_drv_add_copy_node(void **n, void *g, void *const *d, size_t nd, const void *p);
CUresult gs_drv_add_batch_node(void **n, void *g, void *const *d, size_t nd, const void *p);

/* CUgraphNodeParams: type, reserved, then the union at 16. CUDA_CONDITIONAL_NODE_PARAMS begins like the
 * runtime's cudaConditionalNodeParams (handle, type, size, phGraph_out); kernel nodes are
 * CUDA_KERNEL_NODE_PARAMS_v3 (v2's layout); child graph and event nodes hold one handle. */
static CUresult drv_add_node(void **n, void *g, void *const *d, size_t nd, unsigned char *p) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    int type;
    memcpy(&type, p, sizeof type);
    unsigned char *u = p + 16;
    switch (type) {
    case GT_KERNEL: return drv_add_kernel(n, g, d, nd, (const drv_kernel_params *)u, 1);
    case GT_EMPTY: GRT(gs_cudaGraphAddEmptyNode(n, g, d, nd));
    case GT_GRAPH: GRT(gs_cudaGraphAddChildGraphNode(n, g, d, nd, *(void **)u));
    case GT_WAIT_EVENT: GRT(gs_cudaGraphAddEventWaitNode(n, g, d, nd, *(void **)u));
    case GT_EVENT_RECORD: GRT(gs_cudaGraphAddEventRecordNode(n, g, d, nd, *(void **)u));
    case GT_CONDITIONAL: GRT(gs_graph_add_conditional(n, g, d, nd, u));
    case GT_MEMCPY: return gs_drv_add_copy_node(n, g, d, nd, u + 16); /* CUDA_MEMCPY_NODE_PARAMS.copyParams */
    case GT_MEMSET: GRT(gs_cudaGraphAddMemsetNode(n, g, d, nd, u));   /* _v2: v1's layout, then ctx */
    case GT_HOST: GRT(gs_cudaGraphAddHostNode(n, g, d, nd, u));
    case GT_MEM_ALLOC: GRT(gs_cudaGraphAddMemAllocNode(n, g, d, nd, u));
    case GT_MEM_FREE: GRT(gs_cudaGraphAddMemFreeNode(n, g, d, nd, *(void **)u));
    case GT_BATCH_MEM_OP: return gs_drv_add_batch_node(n, g, d, nd, u);
    default:
        gs_warn_once("cu-graph-add-node", "cuGraphAddNode: node type %d is not supported by gpushim (external "
                     "semaphores do not exist in gpushim): CUDA_ERROR_NOT_SUPPORTED", type);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}
GS_DRV CUresult gs_cuGraphAddNode(void **n, void *g, void *const *d, size_t nd, unsigned char *p) {
    return drv_add_node(n, g, d, nd, p);
}
GS_DRV CUresult gs_cuGraphAddNode_v2(void **n, void *g, void *const *d, const void *edges, size_t nd, unsigned char *p) {
    (void)edges; /* default edges only, as cudaGraphAddNode */
    return drv_add_node(n, g, d, nd, p);
}
#undef GRT
