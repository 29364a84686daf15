/* Streams and events: handles are the server's; host functions run in the client when the server
 * reports that their stream reached them. */
#include <string.h>

#include "gs_api.h"
#include "gs_capture.h"

static cudaError_t stream_create(cudaStream_t *s, unsigned flags, int priority) {
    if (!s || (flags & ~1u)) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_call c;
    gs_call_begin(&c, GS_OP_STREAM_CREATE, 3);
    gs_w_int(c.w, gs_thread()->device);
    gs_w_uint(c.w, flags);
    gs_w_int(c.w, priority);
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        *s = (cudaStream_t)(uintptr_t)gs_u64(&c);
        gs_handle_add(GS_HANDLE_STREAM, (uintptr_t)*s);
    }
    gs_call_end(&c);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaStreamCreate(cudaStream_t *s) { return stream_create(s, 0, 0); }
GS_IMPL cudaError_t gs_cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f) { return stream_create(s, f, 0); }
GS_IMPL cudaError_t gs_cudaStreamCreateWithPriority(cudaStream_t *s, unsigned f, int p) {
    return stream_create(s, f, p);
}

/* A call whose arguments are a stream and nothing else. */
static cudaError_t stream_op(int op, cudaStream_t s, int ptds) {
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptds, &h);
    if (e) return gs_ret(e);
    if (gs_capture_stream_op(h, op, &e)) return gs_ret(e);
    gs_call c;
    gs_call_begin(&c, op, 1);
    gs_w_uint(c.w, h);
    e = gs_call_run(&c);
    gs_call_end(&c);
    /* cudaErrorNotReady from a query is an answer, not an error: it does not become the last error. */
    return e == cudaErrorNotReady ? e : gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaStreamDestroy(cudaStream_t s) {
    if (s == NULL || s == GS_STREAM_LEGACY || s == GS_STREAM_PER_THREAD) return gs_ret(cudaErrorInvalidResourceHandle);
    cudaError_t e = stream_op(GS_OP_STREAM_DESTROY, s, 0);
    if (!e) gs_handle_remove(GS_HANDLE_STREAM, (uintptr_t)s);
    return e;
}
GS_IMPL cudaError_t gs_cudaStreamSynchronize(cudaStream_t s) { return stream_op(GS_OP_STREAM_SYNC, s, 0); }
GS_IMPL cudaError_t gs_cudaStreamSynchronize_ptsz(cudaStream_t s) { return stream_op(GS_OP_STREAM_SYNC, s, 1); }
GS_IMPL cudaError_t gs_cudaStreamQuery(cudaStream_t s) { return stream_op(GS_OP_STREAM_QUERY, s, 0); }
GS_IMPL cudaError_t gs_cudaStreamQuery_ptsz(cudaStream_t s) { return stream_op(GS_OP_STREAM_QUERY, s, 1); }

int gs_ipc_event_imported(uint64_t ev); /* api_ipc.c: an event opened from an IPC handle */
cudaError_t gs_ipc_event_wait(uint64_t ev);

static cudaError_t stream_wait_event(cudaStream_t s, cudaEvent_t ev, unsigned flags, int ptds) {
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptds, &h);
    if (e) return gs_ret(e);
    if (!gs_handle_known(GS_HANDLE_EVENT, (uintptr_t)ev)) return gs_ret(cudaErrorInvalidResourceHandle);
    if (flags & ~1u) return gs_ret(cudaErrorInvalidValue);
    if (gs_capture_wait_event(h, (uintptr_t)ev, flags, &e)) return gs_ret(e);
    if (gs_ipc_event_imported((uintptr_t)ev)) { /* another session completes it: wait here (api_ipc.c) */
        e = gs_ipc_event_wait((uintptr_t)ev);
        if (e) return gs_ret(e);
    }
    gs_call c;
    gs_call_begin(&c, GS_OP_STREAM_WAIT_EVENT, 3);
    gs_w_uint(c.w, h);
    gs_w_uint(c.w, (uintptr_t)ev);
    gs_w_uint(c.w, flags);
    return gs_ret(gs_call_post(&c));
}

GS_IMPL cudaError_t gs_cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned f) {
    return stream_wait_event(s, ev, f, 0);
}
GS_IMPL cudaError_t gs_cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t ev, unsigned f) {
    return stream_wait_event(s, ev, f, 1);
}

int gs_stream_attr_priority(uint64_t stream, int *out); /* api_stream_attr.c */

/* A stream query answering one 32-bit value (an int priority or unsigned flags) into *out. */
static cudaError_t stream_get(int op, cudaStream_t s, int ptds, void *out) {
    if (!out) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptds, &h);
    if (e) return gs_ret(e);
    if (op == GS_OP_STREAM_GET_PRIORITY && gs_stream_attr_priority(h, out)) return cudaSuccess; /* set as an attribute */
    gs_call c;
    gs_call_begin(&c, op, 1);
    gs_w_uint(c.w, h);
    e = gs_call_run(&c);
    if (!e) {
        int32_t v = (int32_t)gs_i64(&c);
        memcpy(out, &v, sizeof v);
    }
    gs_call_end(&c);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaStreamGetPriority(cudaStream_t s, int *p) { return stream_get(GS_OP_STREAM_GET_PRIORITY, s, 0, p); }
GS_IMPL cudaError_t gs_cudaStreamGetPriority_ptsz(cudaStream_t s, int *p) {
    return stream_get(GS_OP_STREAM_GET_PRIORITY, s, 1, p);
}
GS_IMPL cudaError_t gs_cudaStreamGetFlags(cudaStream_t s, unsigned *f) { return stream_get(GS_OP_STREAM_GET_FLAGS, s, 0, f); }
GS_IMPL cudaError_t gs_cudaStreamGetFlags_ptsz(cudaStream_t s, unsigned *f) {
    return stream_get(GS_OP_STREAM_GET_FLAGS, s, 1, f);
}

static cudaError_t host_func(cudaStream_t s, void *fn, void *data, int is_stream_callback, int ptds) {
    if (!fn) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptds, &h);
    if (e) return gs_ret(e);
    if (gs_capture_host_func(h, fn, data, is_stream_callback, &e)) return gs_ret(e);
    uint64_t id = gs_callback_register(is_stream_callback, fn, data, s);
    if (!id) return gs_ret(cudaErrorMemoryAllocation);
    gs_call c;
    gs_call_begin(&c, GS_OP_STREAM_HOST_FUNC, 2);
    gs_w_uint(c.w, h);
    gs_w_uint(c.w, id);
    return gs_ret(gs_call_post(&c));
}

GS_IMPL cudaError_t gs_cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data) {
    return host_func(s, (void *)fn, data, 0, 0);
}
GS_IMPL cudaError_t gs_cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void *data) {
    return host_func(s, (void *)fn, data, 0, 1);
}
GS_IMPL cudaError_t gs_cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void *data, unsigned flags) {
    if (flags) return gs_ret(cudaErrorInvalidValue);
    return host_func(s, (void *)cb, data, 1, 0);
}
GS_IMPL cudaError_t gs_cudaStreamAddCallback_ptsz(cudaStream_t s, cudaStreamCallback_t cb, void *data,
                                                  unsigned flags) {
    if (flags) return gs_ret(cudaErrorInvalidValue);
    return host_func(s, (void *)cb, data, 1, 1);
}

/* ---- events ---- */

static cudaError_t event_create(cudaEvent_t *ev, unsigned flags) {
    if (!ev || (flags & ~0x0fu)) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_call c;
    gs_call_begin(&c, GS_OP_EVENT_CREATE, 2);
    gs_w_int(c.w, gs_thread()->device);
    gs_w_uint(c.w, flags);
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        *ev = (cudaEvent_t)(uintptr_t)gs_u64(&c);
        gs_handle_add(GS_HANDLE_EVENT, (uintptr_t)*ev);
    }
    gs_call_end(&c);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaEventCreate(cudaEvent_t *ev) { return event_create(ev, 0); }
GS_IMPL cudaError_t gs_cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned f) { return event_create(ev, f); }

static cudaError_t event_record(cudaEvent_t ev, cudaStream_t s, unsigned flags, int ptds) {
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptds, &h);
    if (e) return gs_ret(e);
    if (!gs_handle_known(GS_HANDLE_EVENT, (uintptr_t)ev)) return gs_ret(cudaErrorInvalidResourceHandle);
    if (gs_capture_event_record((uintptr_t)ev, h, &e)) return gs_ret(e);
    gs_call c;
    gs_call_begin(&c, GS_OP_EVENT_RECORD, 3);
    gs_w_uint(c.w, (uintptr_t)ev);
    gs_w_uint(c.w, h);
    gs_w_uint(c.w, flags);
    return gs_ret(gs_call_post(&c));
}

GS_IMPL cudaError_t gs_cudaEventRecord(cudaEvent_t ev, cudaStream_t s) { return event_record(ev, s, 0, 0); }
GS_IMPL cudaError_t gs_cudaEventRecord_ptsz(cudaEvent_t ev, cudaStream_t s) { return event_record(ev, s, 0, 1); }
GS_IMPL cudaError_t gs_cudaEventRecordWithFlags(cudaEvent_t ev, cudaStream_t s, unsigned f) {
    return event_record(ev, s, f, 0);
}
GS_IMPL cudaError_t gs_cudaEventRecordWithFlags_ptsz(cudaEvent_t ev, cudaStream_t s, unsigned f) {
    return event_record(ev, s, f, 1);
}

static cudaError_t event_op(int op, cudaEvent_t ev) {
    GS_ENTER();
    if (op == GS_OP_EVENT_SYNC && gs_ipc_event_imported((uintptr_t)ev)) return gs_ret(gs_ipc_event_wait((uintptr_t)ev));
    gs_call c;
    gs_call_begin(&c, op, 1);
    gs_w_uint(c.w, (uintptr_t)ev);
    cudaError_t e = gs_call_run(&c);
    gs_call_end(&c);
    return e == cudaErrorNotReady ? e : gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaEventSynchronize(cudaEvent_t ev) { return event_op(GS_OP_EVENT_SYNC, ev); }
GS_IMPL cudaError_t gs_cudaEventQuery(cudaEvent_t ev) { return event_op(GS_OP_EVENT_QUERY, ev); }
GS_IMPL cudaError_t gs_cudaEventDestroy(cudaEvent_t ev) {
    cudaError_t e = event_op(GS_OP_EVENT_DESTROY, ev);
    if (!e) gs_handle_remove(GS_HANDLE_EVENT, (uintptr_t)ev);
    return e;
}

GS_IMPL cudaError_t gs_cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    if (!ms) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_call c;
    gs_call_begin(&c, GS_OP_EVENT_ELAPSED, 2);
    gs_w_uint(c.w, (uintptr_t)start);
    gs_w_uint(c.w, (uintptr_t)end);
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        double v = 0;
        gs_r_double(&c.r, &v);
        *ms = (float)v;
    }
    gs_call_end(&c);
    return gs_ret(e);
}
