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
#undef GRT
