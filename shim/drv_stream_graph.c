/* The driver face's graph nodes made of the calls of drv_memory.c and drv_stream.c (this file comes after them
 * in the unity build): copy nodes (CUDA_MEMCPY3D), memory nodes, and batch memory-op nodes
 * (cuGraphAddBatchMemOpNode: wait and write value 32/64, flush, barrier). Each node holds the calls the stream
 * operation would post (shim/gs_graph.h), so a launch stays one frame. */
#include "drv_api.h"
#include "gs_graph.h"

#define GRT(expr)                               \
    do {                                         \
        CUresult gs_r_ = gs_drv_enter(NULL);     \
        return gs_r_ ? gs_r_ : GS_DRV_CALL(expr); \
    } while (0)

/* ---- copy nodes: the copy recorded as the cuMemcpy3DAsync it describes (CUDA arrays included) ---- */

static CUresult drv_build_copy(gs_gops *ops, const drv_memcpy3d *p) {
    if (!p || !p->WidthInBytes || !p->Height || !p->Depth) return CUDA_ERROR_INVALID_VALUE;
    gs_recorder r;
    gs_record_begin(&r, ops);
    CUresult cr = memcpy_3d(p, NULL, 1, 0);
    gs_record_end(&r);
    if (cr) gs_ops_clear(ops);
    return cr;
}

CUresult gs_drv_add_copy_node(void **n, void *g, void *const *d, size_t nd, const void *p) {
    CUresult cr = gs_drv_enter(NULL);
    if (cr) return cr;
    gs_gops ops = {0};
    cr = drv_build_copy(&ops, p);
    if (cr) return cr;
    return GS_DRV_CALL(gs_graph_add_built(n, g, d, nd, GT_MEMCPY, &ops, p, sizeof(drv_memcpy3d)));
}
GS_DRV CUresult gs_cuGraphAddMemcpyNode(void **n, void *g, void *const *d, size_t nd, const drv_memcpy3d *p,
                                        void *ctx) {
    (void)ctx; /* the one current context of the session's device */
    return gs_drv_add_copy_node(n, g, d, nd, p);
}
GS_DRV CUresult gs_cuGraphMemcpyNodeGetParams(void *n, drv_memcpy3d *p) {
    GRT(gs_graph_node_params(n, GT_MEMCPY, p, sizeof *p));
}
static CUresult drv_set_copy(void *x, void *n, const drv_memcpy3d *p) {
    CUresult cr = gs_drv_enter(NULL);
    if (cr) return cr;
    gs_gops ops = {0};
    cr = drv_build_copy(&ops, p);
    if (cr) return cr;
    if (x) return GS_DRV_CALL(gs_graph_exec_set_ops(x, n, GT_MEMCPY, &ops));
    return GS_DRV_CALL(gs_graph_node_set_ops(n, GT_MEMCPY, &ops, p, sizeof *p));
}
GS_DRV CUresult gs_cuGraphMemcpyNodeSetParams(void *n, const drv_memcpy3d *p) { return drv_set_copy(NULL, n, p); }
GS_DRV CUresult gs_cuGraphExecMemcpyNodeSetParams(void *x, void *n, const drv_memcpy3d *p, void *ctx) {
    (void)ctx;
    if (!x) return CUDA_ERROR_INVALID_VALUE;
    return drv_set_copy(x, n, p);
}

/* ---- memory nodes: CUDA_MEM_ALLOC_NODE_PARAMS has the runtime's cudaMemAllocNodeParams layout ---- */

GS_DRV CUresult gs_cuGraphAddMemAllocNode(void **n, void *g, void *const *d, size_t nd, void *p) {
    GRT(gs_cudaGraphAddMemAllocNode(n, g, d, nd, p));
}
GS_DRV CUresult gs_cuGraphMemAllocNodeGetParams(void *n, void *p) { GRT(gs_cudaGraphMemAllocNodeGetParams(n, p)); }
GS_DRV CUresult gs_cuGraphMemFreeNodeGetParams(void *n, CUdeviceptr *p) {
    GRT(gs_cudaGraphMemFreeNodeGetParams(n, (void **)p));
}
GS_DRV CUresult gs_cuGraphMemsetNodeSetParams(void *n, const void *p) { GRT(gs_cudaGraphMemsetNodeSetParams(n, p)); }

/* ---- batch memory-op nodes ---- */

/* CUDA_BATCH_MEM_OP_NODE_PARAMS (v1 and v2 alike); paramArray holds CUstreamBatchMemOpParams of 48 bytes:
 * operation (4 bytes), then for waits and writes the address at 8, the value at 16 (32 or 64 bits) and the
 * flags at 24; for flush and barrier the flags at 4. */
typedef struct {
    void *ctx;
    unsigned count;
    const uint8_t *ops;
    unsigned flags;
} drv_batch_params;
enum { MEMOP_SIZE = 48, MEMOP_WAIT32 = 1, MEMOP_WRITE32 = 2, MEMOP_FLUSH = 3, MEMOP_WAIT64 = 4, MEMOP_WRITE64 = 5,
       MEMOP_BARRIER = 6, MEMOP_MAX = 256 };

/* A 4-byte store of v at addr: MEMSET_WIDE of one 32-bit element (the value travels in the call). */
static cudaError_t record_store32(uint64_t addr, uint32_t v) {
    gs_call c;
    gs_call_begin(&c, GS_OP_MEMSET_WIDE, 7);
    gs_w_uint(c.w, addr);
    gs_w_uint(c.w, 4);
    gs_w_uint(c.w, v);
    gs_w_uint(c.w, 1);
    gs_w_uint(c.w, 1);
    gs_w_uint(c.w, 4);
    gs_w_uint(c.w, 0);
    cudaError_t e = cudaSuccess;
    if (!gs_capture_record(0, &c, &e)) e = cudaErrorUnknown;
    return e;
}

static cudaError_t record_wait(uint64_t addr, uint64_t value, unsigned flags, int width) {
    gs_call c;
    gs_call_begin(&c, GS_OP_STREAM_WAIT_VALUE, 5);
    gs_w_uint(c.w, 0);
    gs_w_uint(c.w, addr);
    gs_w_uint(c.w, width == 4 ? (uint32_t)value : value);
    gs_w_uint(c.w, flags & 3u);
    gs_w_uint(c.w, (uint64_t)width);
    cudaError_t e = cudaSuccess;
    if (!gs_capture_record(0, &c, &e)) e = cudaErrorUnknown;
    return e;
}

/* One operation's calls. Flush and barrier have nothing to do: the emulator's memory is coherent and every
 * call of a stream runs in order (their flags are still checked). */
static CUresult build_memop(const uint8_t *m) {
    int op;
    uint64_t addr, value;
    uint32_t v32;
    unsigned flags, small;
    memcpy(&op, m, 4);
    memcpy(&small, m + 4, 4);
    memcpy(&addr, m + 8, 8);
    memcpy(&value, m + 16, 8);
    memcpy(&v32, m + 16, 4);
    memcpy(&flags, m + 24, 4);
    int width = op == MEMOP_WAIT64 || op == MEMOP_WRITE64 ? 8 : 4;
    cudaError_t e = cudaSuccess;
    switch (op) {
    case MEMOP_WAIT32:
    case MEMOP_WAIT64:
        if ((flags & ~(unsigned)WAIT_FLUSH) > WAIT_NOR || addr % (uint64_t)width) return CUDA_ERROR_INVALID_VALUE;
        e = gs_check_device_range((void *)(uintptr_t)addr, (size_t)width);
        if (!e) e = record_wait(addr, width == 4 ? v32 : value, flags, width);
        break;
    case MEMOP_WRITE32:
    case MEMOP_WRITE64:
        if (flags & ~1u || addr % (uint64_t)width) return CUDA_ERROR_INVALID_VALUE; /* NO_MEMORY_BARRIER only */
        e = gs_check_device_range((void *)(uintptr_t)addr, (size_t)width);
        if (!e) e = record_store32(addr, width == 4 ? v32 : (uint32_t)value); /* little-endian halves */
        if (!e && width == 8) e = record_store32(addr + 4, (uint32_t)(value >> 32));
        break;
    case MEMOP_FLUSH: return small ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    case MEMOP_BARRIER: return small > 1 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS; /* SYS or GPU scope */
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return gs_drv_err(e);
}

static CUresult drv_build_batch(gs_gops *ops, const drv_batch_params *p) {
    if (!p || !p->count || !p->ops || p->count > MEMOP_MAX || p->flags) return CUDA_ERROR_INVALID_VALUE;
    gs_recorder r;
    gs_record_begin(&r, ops);
    CUresult cr = CUDA_SUCCESS;
    for (unsigned i = 0; i < p->count && !cr; i++) cr = build_memop(p->ops + (size_t)i * MEMOP_SIZE);
    gs_record_end(&r);
    if (cr) gs_ops_clear(ops);
    return cr;
}

/* The node's own copy of the operations, which cuGraphBatchMemOpNodeGetParams gives back. */
static CUresult keep_ops(void *n, const drv_batch_params *p) {
    pthread_mutex_lock(&gs_graph_lock);
    cudaError_t e = gs_node_known_locked(n) ? gs_node_keep_blob_locked(n, p->ops, (size_t)p->count * MEMOP_SIZE,
                                                                        offsetof(drv_batch_params, ops))
                                            : cudaErrorInvalidValue;
    pthread_mutex_unlock(&gs_graph_lock);
    return gs_drv_err(e);
}

CUresult gs_drv_add_batch_node(void **n, void *g, void *const *d, size_t nd, const void *pv) {
    const drv_batch_params *p = pv;
    CUresult cr = gs_drv_enter(NULL);
    if (cr) return cr;
    gs_gops ops = {0};
    cr = drv_build_batch(&ops, p);
    if (cr) return cr;
    cr = GS_DRV_CALL(gs_graph_add_built(n, g, d, nd, GT_BATCH_MEM_OP, &ops, p, sizeof *p));
    return cr ? cr : keep_ops(*n, p);
}
GS_DRV CUresult gs_cuGraphAddBatchMemOpNode(void **n, void *g, void *const *d, size_t nd, const drv_batch_params *p) {
    return gs_drv_add_batch_node(n, g, d, nd, p);
}
GS_DRV CUresult gs_cuGraphBatchMemOpNodeGetParams(void *n, drv_batch_params *p) {
    GRT(gs_graph_node_params(n, GT_BATCH_MEM_OP, p, sizeof *p));
}
static CUresult drv_set_batch(void *x, void *n, const drv_batch_params *p) {
    CUresult cr = gs_drv_enter(NULL);
    if (cr) return cr;
    gs_gops ops = {0};
    cr = drv_build_batch(&ops, p);
    if (cr) return cr;
    if (x) return GS_DRV_CALL(gs_graph_exec_set_ops(x, n, GT_BATCH_MEM_OP, &ops));
    cr = GS_DRV_CALL(gs_graph_node_set_ops(n, GT_BATCH_MEM_OP, &ops, p, sizeof *p));
    return cr ? cr : keep_ops(n, p);
}
GS_DRV CUresult gs_cuGraphBatchMemOpNodeSetParams(void *n, const drv_batch_params *p) {
    return drv_set_batch(NULL, n, p);
}
GS_DRV CUresult gs_cuGraphExecBatchMemOpNodeSetParams(void *x, void *n, const drv_batch_params *p) {
    if (!x) return CUDA_ERROR_INVALID_VALUE;
    return drv_set_batch(x, n, p);
}

/* cuGraphNodeSetParams / cuGraphExecNodeSetParams: CUgraphNodeParams (type, then the union at 16) by type */
static CUresult drv_set_node(void *x, void *n, unsigned char *p) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    int type;
    memcpy(&type, p, sizeof type);
    unsigned char *u = p + 16;
    switch (type) {
    case GT_KERNEL: return drv_set_kernel(x, n, (const drv_kernel_params *)u, 1);
    case GT_MEMCPY: return drv_set_copy(x, n, (const drv_memcpy3d *)(u + 16));
    case GT_BATCH_MEM_OP: return drv_set_batch(x, n, (const drv_batch_params *)u);
    case GT_MEMSET:
    case GT_HOST:
    case GT_EVENT_RECORD:
    case GT_WAIT_EVENT: GRT(x ? gs_cudaGraphExecNodeSetParams(x, n, p) : gs_cudaGraphNodeSetParams(n, p));
    default:
        gs_warn_once("cu-graph-set-node", "cuGraph(Exec)NodeSetParams: node type %d is not supported by gpushim "
                     "(kernel, copy, memset, host, event and batch memory-op nodes are): CUDA_ERROR_NOT_SUPPORTED",
                     type);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}
GS_DRV CUresult gs_cuGraphNodeSetParams(void *n, unsigned char *p) { return drv_set_node(NULL, n, p); }
GS_DRV CUresult gs_cuGraphExecNodeSetParams(void *x, void *n, unsigned char *p) {
    if (!x) return CUDA_ERROR_INVALID_VALUE;
    return drv_set_node(x, n, p);
}
#undef GRT
