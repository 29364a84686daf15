/* Stream capture (shim/api_capture.c, gs_graph.h): while a stream captures, the asynchronous calls issued
 * on it become nodes of the graph being built instead of being sent; the same hooks record the calls of a
 * node built by cudaGraphAdd*Node.
 *
 * Every hook is a gs_capture_* call placed where an asynchronous call would be sent. Each returns 1 when
 * capture handled the call (recorded it, or refused it: *e says which), 0 when the call proceeds as
 * usual. While no stream captures, a hook costs one relaxed atomic load. */
#ifndef GS_CAPTURE_H
#define GS_CAPTURE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "gs_client.h"

#define cudaErrorIllegalState 401
#define cudaErrorStreamCaptureUnsupported 900
#define cudaErrorStreamCaptureInvalidated 901

/* Streams in capture (active or invalidated), process-wide. */
extern _Atomic int gs_capture_count;

static inline int gs_capture_any(void) { return atomic_load_explicit(&gs_capture_count, memory_order_relaxed) != 0; }

int gs_capture_record_slow(uint64_t stream, gs_call *c, cudaError_t *e);
int gs_capture_copy_slow(uint64_t stream, void *dst, const void *src, size_t n, int kind, int async, cudaError_t *e);
int gs_capture_copy2d_slow(uint64_t stream, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t height, int kind, cudaError_t *e);
int gs_capture_host_func_slow(uint64_t stream, void *fn, void *data, int is_stream_callback, cudaError_t *e);
int gs_capture_event_record_slow(uint64_t event, uint64_t stream, cudaError_t *e);
int gs_capture_wait_event_slow(uint64_t stream, uint64_t event, unsigned flags, cudaError_t *e);
int gs_capture_stream_op_slow(uint64_t stream, int op, cudaError_t *e);
int gs_capture_refuse_slow(uint64_t stream, const char *what, cudaError_t *e);
int gs_capture_device_sync_slow(cudaError_t *e);
int gs_capture_malloc_slow(uint64_t stream, void **ptr, size_t size, cudaError_t *e);
int gs_capture_free_slow(uint64_t stream, void *ptr, cudaError_t *e);
/* cudaStreamIsCapturing: 0 none, 1 active, 2 invalidated. */
int gs_capture_status(uint64_t stream);

/* An encoded asynchronous call (kernel launch, memset) on `stream`, about to be POSTed. */
static inline int gs_capture_record(uint64_t stream, gs_call *c, cudaError_t *e) {
    return gs_capture_any() && gs_capture_record_slow(stream, c, e);
}
/* A copy of a resolved kind (async: cudaMemcpyAsync; else a synchronous cudaMemcpy). */
static inline int gs_capture_copy(uint64_t stream, void *dst, const void *src, size_t n, int kind, int async,
                                  cudaError_t *e) {
    return gs_capture_any() && gs_capture_copy_slow(stream, dst, src, n, kind, async, e);
}
static inline int gs_capture_copy2d(uint64_t stream, void *dst, size_t dpitch, const void *src, size_t spitch,
                                    size_t width, size_t height, int kind, cudaError_t *e) {
    return gs_capture_any() && gs_capture_copy2d_slow(stream, dst, dpitch, src, spitch, width, height, kind, e);
}
/* cudaLaunchHostFunc (recorded) or cudaStreamAddCallback (refused during capture, as CUDA does). */
static inline int gs_capture_host_func(uint64_t stream, void *fn, void *data, int is_stream_callback,
                                       cudaError_t *e) {
    return gs_capture_any() && gs_capture_host_func_slow(stream, fn, data, is_stream_callback, e);
}
/* cudaEventRecord on a capturing stream marks the event as captured (no node, as in CUDA). */
static inline int gs_capture_event_record(uint64_t event, uint64_t stream, cudaError_t *e) {
    return gs_capture_any() && gs_capture_event_record_slow(event, stream, e);
}
/* cudaStreamWaitEvent on an event recorded in a capture: fork (the stream joins the capture) or join. */
static inline int gs_capture_wait_event(uint64_t stream, uint64_t event, unsigned flags, cudaError_t *e) {
    return gs_capture_any() && gs_capture_wait_event_slow(stream, event, flags, e);
}
/* Stream synchronize/query on a capturing stream fail and invalidate the capture; destroy ends it. */
static inline int gs_capture_stream_op(uint64_t stream, int op, cudaError_t *e) {
    return gs_capture_any() && gs_capture_stream_op_slow(stream, op, e);
}
/* An asynchronous operation gpushim cannot capture (stream-ordered allocation): refused with a message. */
static inline int gs_capture_refuse(uint64_t stream, const char *what, cudaError_t *e) {
    return gs_capture_any() && gs_capture_refuse_slow(stream, what, e);
}
/* cudaDeviceSynchronize while a stream captures: refused, and the captures are invalidated. */
static inline int gs_capture_device_sync(cudaError_t *e) {
    return gs_capture_any() && gs_capture_device_sync_slow(e);
}

/* cudaMallocAsync / cudaFreeAsync in a capturing stream: memory allocation and free nodes. */
static inline int gs_capture_malloc(uint64_t stream, void **ptr, size_t size, cudaError_t *e) {
    return gs_capture_any() && gs_capture_malloc_slow(stream, ptr, size, e);
}
static inline int gs_capture_free(uint64_t stream, void *ptr, cudaError_t *e) {
    return gs_capture_any() && gs_capture_free_slow(stream, ptr, e);
}

#endif
