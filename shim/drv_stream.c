/* The driver face: streams, events, host functions and stream memory operations. CUstream is the
 * runtime's cudaStream_t and CUevent its cudaEvent_t (the flag values are the same in both APIs). */
#include "drv_api.h"
#include "gs_capture.h"

#define DRV_ENTER()                          \
    do {                                     \
        CUresult gs_r_ = gs_drv_enter(NULL); \
        if (gs_r_) return gs_r_;             \
    } while (0)
#define RT(expr) \
    DRV_ENTER(); \
    return GS_DRV_CALL(expr)

/* ---- streams ---- */

/* What the call made (*handle, once it returned) belongs to the current context (cuCtxDestroy destroys it). */
static CUresult owned(CUresult r, void *const *handle, int kind) {
    if (!r) gs_drv_own((uintptr_t)*handle, kind);
    return r;
}

static CUresult disowned(CUresult r, void *handle, int kind) {
    if (!r) gs_drv_disown((uintptr_t)handle, kind);
    return r;
}

GS_DRV CUresult gs_cuStreamCreate(CUstream *s, unsigned flags) {
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    CUresult r = GS_DRV_CALL(gs_cudaStreamCreateWithFlags(s, flags));
    return owned(r, (void *const *)s, GS_OWN_STREAM);
}
GS_DRV CUresult gs_cuStreamCreateWithPriority(CUstream *s, unsigned flags, int priority) {
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    CUresult r = GS_DRV_CALL(gs_cudaStreamCreateWithPriority(s, flags, priority));
    return owned(r, (void *const *)s, GS_OWN_STREAM);
}
GS_DRV CUresult gs_cuStreamDestroy_v2(CUstream s) {
    DRV_ENTER();
    return disowned(GS_DRV_CALL(gs_cudaStreamDestroy(s)), s, GS_OWN_STREAM);
}
GS_DRV CUresult gs_cuStreamDestroy(CUstream s) { return gs_cuStreamDestroy_v2(s); }
GS_DRV CUresult gs_cuStreamSynchronize(CUstream s) { RT(gs_cudaStreamSynchronize(s)); }
GS_DRV CUresult gs_cuStreamSynchronize_ptsz(CUstream s) { RT(gs_cudaStreamSynchronize_ptsz(s)); }
GS_DRV CUresult gs_cuStreamQuery(CUstream s) { RT(gs_cudaStreamQuery(s)); }
GS_DRV CUresult gs_cuStreamQuery_ptsz(CUstream s) { RT(gs_cudaStreamQuery_ptsz(s)); }
GS_DRV CUresult gs_cuStreamWaitEvent(CUstream s, CUevent e, unsigned f) { RT(gs_cudaStreamWaitEvent(s, e, f)); }
GS_DRV CUresult gs_cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned f) {
    RT(gs_cudaStreamWaitEvent_ptsz(s, e, f));
}
GS_DRV CUresult gs_cuStreamGetPriority(CUstream s, int *p) { RT(gs_cudaStreamGetPriority(s, p)); }
GS_DRV CUresult gs_cuStreamGetPriority_ptsz(CUstream s, int *p) { RT(gs_cudaStreamGetPriority_ptsz(s, p)); }
GS_DRV CUresult gs_cuStreamGetFlags(CUstream s, unsigned *f) { RT(gs_cudaStreamGetFlags(s, f)); }
GS_DRV CUresult gs_cuStreamGetFlags_ptsz(CUstream s, unsigned *f) { RT(gs_cudaStreamGetFlags_ptsz(s, f)); }
GS_DRV CUresult gs_cuStreamIsCapturing(CUstream s, int *st) { RT(gs_cudaStreamIsCapturing(s, st)); }
GS_DRV CUresult gs_cuStreamIsCapturing_ptsz(CUstream s, int *st) { RT(gs_cudaStreamIsCapturing_ptsz(s, st)); }

/* CUstreamCallback has cudaStreamCallback_t's shape (stream, status, data) and the same status codes. */
GS_DRV CUresult gs_cuStreamAddCallback(CUstream s, cudaStreamCallback_t cb, void *data, unsigned flags) {
    RT(gs_cudaStreamAddCallback(s, cb, data, flags));
}
GS_DRV CUresult gs_cuStreamAddCallback_ptsz(CUstream s, cudaStreamCallback_t cb, void *data, unsigned flags) {
    RT(gs_cudaStreamAddCallback_ptsz(s, cb, data, flags));
}
GS_DRV CUresult gs_cuLaunchHostFunc(CUstream s, cudaHostFn_t fn, void *data) { RT(gs_cudaLaunchHostFunc(s, fn, data)); }
GS_DRV CUresult gs_cuLaunchHostFunc_ptsz(CUstream s, cudaHostFn_t fn, void *data) {
    RT(gs_cudaLaunchHostFunc_ptsz(s, fn, data));
}

/* A stream belongs to the context current when it was made: a cuCtxCreate context's for a stream the driver
 * face made in it, else the device's primary context. */
GS_DRV CUresult gs_cuStreamGetCtx(CUstream s, CUcontext *ctx) {
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    int dev;
    CUresult r = gs_drv_enter(&dev);
    if (r) return r;
    unsigned flags;
    r = GS_DRV_CALL(gs_cudaStreamGetFlags(s, &flags)); /* validates the handle */
    if (r) return r;
    gs_ctx *owner = gs_drv_owner((uintptr_t)s, GS_OWN_STREAM);
    *ctx = owner ? owner : gs_drv_primary(dev);
    return r;
}
GS_DRV CUresult gs_cuStreamGetCtx_ptsz(CUstream s, CUcontext *ctx) { return gs_cuStreamGetCtx(s, ctx); }
/* CUDA 12.5: also the green context, which gpushim never creates */
GS_DRV CUresult gs_cuStreamGetCtx_v2(CUstream s, CUcontext *ctx, void **green) {
    CUresult r = gs_cuStreamGetCtx(s, ctx);
    if (!r && green) *green = NULL;
    return r;
}
GS_DRV CUresult gs_cuStreamGetCtx_v2_ptsz(CUstream s, CUcontext *ctx, void **green) {
    return gs_cuStreamGetCtx_v2(s, ctx, green);
}

GS_DRV CUresult gs_cuStreamGetId(CUstream s, unsigned long long *id) {
    if (!id) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, 0, &h);
    if (!e) *id = h;
    return gs_drv_err(e);
}
GS_DRV CUresult gs_cuStreamGetId_ptsz(CUstream s, unsigned long long *id) {
    if (!id) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, 1, &h);
    if (!e) *id = h;
    return gs_drv_err(e);
}

/* ---- events ---- */

GS_DRV CUresult gs_cuEventCreate(CUevent *e, unsigned flags) {
    if (!e) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    CUresult r = GS_DRV_CALL(gs_cudaEventCreateWithFlags(e, flags));
    return owned(r, (void *const *)e, GS_OWN_EVENT);
}
GS_DRV CUresult gs_cuEventRecord(CUevent e, CUstream s) { RT(gs_cudaEventRecord(e, s)); }
GS_DRV CUresult gs_cuEventRecord_ptsz(CUevent e, CUstream s) { RT(gs_cudaEventRecord_ptsz(e, s)); }
GS_DRV CUresult gs_cuEventRecordWithFlags(CUevent e, CUstream s, unsigned f) {
    RT(gs_cudaEventRecordWithFlags(e, s, f));
}
GS_DRV CUresult gs_cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned f) {
    RT(gs_cudaEventRecordWithFlags_ptsz(e, s, f));
}
GS_DRV CUresult gs_cuEventQuery(CUevent e) { RT(gs_cudaEventQuery(e)); }
GS_DRV CUresult gs_cuEventSynchronize(CUevent e) { RT(gs_cudaEventSynchronize(e)); }
GS_DRV CUresult gs_cuEventElapsedTime(float *ms, CUevent a, CUevent b) { RT(gs_cudaEventElapsedTime(ms, a, b)); }
GS_DRV CUresult gs_cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) { RT(gs_cudaEventElapsedTime(ms, a, b)); }
GS_DRV CUresult gs_cuEventDestroy_v2(CUevent e) {
    DRV_ENTER();
    return disowned(GS_DRV_CALL(gs_cudaEventDestroy(e)), e, GS_OWN_EVENT);
}
GS_DRV CUresult gs_cuEventDestroy(CUevent e) { return gs_cuEventDestroy_v2(e); }

/* ---- stream memory operations ---- */

enum { WAIT_GEQ = 0, WAIT_EQ = 1, WAIT_AND = 2, WAIT_NOR = 3, WAIT_FLUSH = 1 << 30 };

/* A write of a 32/64-bit value in stream order: a host-to-device copy from the call's own argument (the
 * shim has taken pageable data when an asynchronous copy returns). */
static CUresult write_value(CUstream s, CUdeviceptr addr, uint64_t value, unsigned flags, int width, int ptsz) {
    DRV_ENTER();
    if (flags & ~1u || addr % (uint64_t)width) return CUDA_ERROR_INVALID_VALUE; /* NO_MEMORY_BARRIER only */
    uint32_t v32 = (uint32_t)value;
    if (gs_capture_any()) { /* a capture keeps the call, so the value must travel in it (not a copy from here) */
        CUresult r = memset_wide(addr, 0, v32, 1, 1, 4, s, 1, ptsz);
        return r || width == 4 ? r : memset_wide(addr + 4, 0, (uint32_t)(value >> 32), 1, 1, 4, s, 1, ptsz);
    }
    const void *src = width == 4 ? (const void *)&v32 : (const void *)&value;
    return GS_DRV_CALL((ptsz ? gs_cudaMemcpyAsync_ptsz : gs_cudaMemcpyAsync)((void *)(uintptr_t)addr, src,
                                                                             (size_t)width, 1, s));
}

/* The stream waits until the value at addr satisfies the condition (GEQ is a wrap-around comparison). */
static CUresult wait_value(CUstream s, CUdeviceptr addr, uint64_t value, unsigned flags, int width, int ptsz) {
    DRV_ENTER();
    if ((flags & ~(unsigned)WAIT_FLUSH) > WAIT_NOR || addr % (uint64_t)width) return CUDA_ERROR_INVALID_VALUE;
    cudaError_t e = gs_check_device_range((void *)(uintptr_t)addr, (size_t)width);
    uint64_t stream = 0;
    if (!e) e = gs_stream_handle(s, ptsz, &stream);
    if (e) return gs_drv_err(e);
    gs_call c;
    gs_call_begin(&c, GS_OP_STREAM_WAIT_VALUE, 5);
    gs_w_uint(c.w, stream);
    gs_w_uint(c.w, addr);
    gs_w_uint(c.w, width == 4 ? (uint32_t)value : value);
    gs_w_uint(c.w, flags & 3u);
    gs_w_uint(c.w, (uint64_t)width);
    if (gs_capture_record(stream, &c, &e)) return gs_drv_err(e); /* a stream being captured records it */
    e = gs_call_run(&c); /* the wait is queued when the reply comes; the stream is held, not the caller */
    gs_call_end(&c);
    return gs_drv_err(e);
}

GS_DRV CUresult gs_cuStreamWriteValue32(CUstream s, CUdeviceptr a, unsigned v, unsigned f) {
    return write_value(s, a, v, f, 4, 0);
}
GS_DRV CUresult gs_cuStreamWriteValue32_v2(CUstream s, CUdeviceptr a, unsigned v, unsigned f) {
    return write_value(s, a, v, f, 4, 0);
}
GS_DRV CUresult gs_cuStreamWriteValue32_ptsz(CUstream s, CUdeviceptr a, unsigned v, unsigned f) {
    return write_value(s, a, v, f, 4, 1);
}
GS_DRV CUresult gs_cuStreamWriteValue32_v2_ptsz(CUstream s, CUdeviceptr a, unsigned v, unsigned f) {
    return write_value(s, a, v, f, 4, 1);
}
GS_DRV CUresult gs_cuStreamWriteValue64(CUstream s, CUdeviceptr a, uint64_t v, unsigned f) {
    return write_value(s, a, v, f, 8, 0);
}
GS_DRV CUresult gs_cuStreamWriteValue64_v2(CUstream s, CUdeviceptr a, uint64_t v, unsigned f) {
    return write_value(s, a, v, f, 8, 0);
}
GS_DRV CUresult gs_cuStreamWriteValue64_ptsz(CUstream s, CUdeviceptr a, uint64_t v, unsigned f) {
    return write_value(s, a, v, f, 8, 1);
}
GS_DRV CUresult gs_cuStreamWriteValue64_v2_ptsz(CUstream s, CUdeviceptr a, uint64_t v, unsigned f) {
    return write_value(s, a, v, f, 8, 1);
}
GS_DRV CUresult gs_cuStreamWaitValue32(CUstream s, CUdeviceptr a, unsigned v, unsigned f) {
    return wait_value(s, a, v, f, 4, 0);
}
GS_DRV CUresult gs_cuStreamWaitValue32_v2(CUstream s, CUdeviceptr a, unsigned v, unsigned f) {
    return wait_value(s, a, v, f, 4, 0);
}
GS_DRV CUresult gs_cuStreamWaitValue32_ptsz(CUstream s, CUdeviceptr a, unsigned v, unsigned f) {
    return wait_value(s, a, v, f, 4, 1);
}
GS_DRV CUresult gs_cuStreamWaitValue32_v2_ptsz(CUstream s, CUdeviceptr a, unsigned v, unsigned f) {
    return wait_value(s, a, v, f, 4, 1);
}
GS_DRV CUresult gs_cuStreamWaitValue64(CUstream s, CUdeviceptr a, uint64_t v, unsigned f) {
    return wait_value(s, a, v, f, 8, 0);
}
GS_DRV CUresult gs_cuStreamWaitValue64_v2(CUstream s, CUdeviceptr a, uint64_t v, unsigned f) {
    return wait_value(s, a, v, f, 8, 0);
}
GS_DRV CUresult gs_cuStreamWaitValue64_ptsz(CUstream s, CUdeviceptr a, uint64_t v, unsigned f) {
    return wait_value(s, a, v, f, 8, 1);
}
GS_DRV CUresult gs_cuStreamWaitValue64_v2_ptsz(CUstream s, CUdeviceptr a, uint64_t v, unsigned f) {
    return wait_value(s, a, v, f, 8, 1);
}
