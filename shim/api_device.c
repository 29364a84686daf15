/* Device management. Properties and attributes never change, so the client caches them. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gs_api.h"
#include "gs_capture.h"

cudaError_t gs_check_device(int dev) {
    int n = 0;
    cudaError_t e = gs_device_count(&n);
    if (e) return e;
    return dev >= 0 && dev < n ? cudaSuccess : cudaErrorInvalidDevice;
}

GS_IMPL cudaError_t gs_cudaGetDeviceCount(int *count) {
    if (!count) return gs_ret(cudaErrorInvalidValue);
    cudaError_t e = gs_sticky();
    if (!e) e = gs_ensure_connected();
    if (!e) e = gs_device_count(count);
    if (e) *count = 0;
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaSetDevice(int dev) {
    GS_ENTER();
    cudaError_t e = gs_check_device(dev);
    if (!e) { gs_thread()->device = dev; gs_thread()->device_set = 1; }
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaGetDevice(int *dev) {
    if (!dev) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    *dev = gs_thread()->device;
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaRuntimeGetVersion(int *v) {
    if (!v) return gs_ret(cudaErrorInvalidValue);
    *v = gs_runtime_version();
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaDriverGetVersion(int *v) {
    static int cached;
    if (!v) return gs_ret(cudaErrorInvalidValue);
    if (cached) { *v = cached; return cudaSuccess; }
    /* CUDA answers 0 (and success) when no driver is installed; a missing server is the same case. */
    if (gs_ensure_connected()) { *v = 0; return cudaSuccess; }
    gs_call c;
    gs_call_begin(&c, GS_OP_DRIVER_VERSION, 0);
    cudaError_t e = gs_call_run(&c);
    if (!e) cached = *v = (int)gs_i64(&c);
    gs_call_end(&c);
    return gs_ret(e);
}

/* ---- properties: the server sends {field: value}; the shim lays them out in the caller's ABI ---- */

typedef struct {
    uint8_t *frame; /* the reply holding the property map, kept for the process's lifetime */
    gs_reader map;
} props_cache;

static props_cache props[GS_MAX_DEVICES];
static pthread_mutex_t props_lock = PTHREAD_MUTEX_INITIALIZER;

static cudaError_t fetch_props(int dev, gs_reader *out) {
    pthread_mutex_lock(&props_lock);
    cudaError_t e = cudaSuccess;
    if (!props[dev].frame) {
        gs_call c;
        gs_call_begin(&c, GS_OP_DEVICE_PROPS, 1);
        gs_w_int(c.w, dev);
        e = gs_call_run(&c);
        if (!e) {
            props[dev].frame = c.frame;
            props[dev].map = c.r;
            c.frame = NULL;
        }
        gs_call_end(&c);
    }
    if (!e) *out = props[dev].map;
    pthread_mutex_unlock(&props_lock);
    return e;
}

static cudaError_t get_props(void *prop, int dev, int major) {
    if (!prop) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    cudaError_t e = gs_check_device(dev);
    if (e) return gs_ret(e);
    const gs_layout *l = gs_layout_for("cudaDeviceProp", major);
    if (!l) {
        gs_warn_once("props-layout", "no cudaDeviceProp layout for CUDA %d; cannot fill properties", major);
        return gs_ret(cudaErrorNotSupported);
    }
    gs_reader r;
    e = fetch_props(dev, &r);
    if (e) return gs_ret(e);
    gs_fill_struct(prop, l, r); /* exactly the caller's struct size, never more */
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaGetDeviceProperties__11(void *prop, int dev) { return get_props(prop, dev, 11); }
GS_IMPL cudaError_t gs_cudaGetDeviceProperties__12(void *prop, int dev) { return get_props(prop, dev, 12); }
GS_IMPL cudaError_t gs_cudaGetDeviceProperties_v2__12(void *prop, int dev) { return get_props(prop, dev, 12); }
GS_IMPL cudaError_t gs_cudaGetDeviceProperties__13(void *prop, int dev) { return get_props(prop, dev, 13); }

GS_IMPL cudaError_t gs_cudaDeviceGetAttribute(int *value, int attr, int dev) {
    enum { MAX_ATTR = 512 };
    static int cache[GS_MAX_DEVICES][MAX_ATTR];
    static unsigned char known[GS_MAX_DEVICES][MAX_ATTR];
    if (!value) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    cudaError_t e = gs_check_device(dev);
    if (e) return gs_ret(e);
    if (attr >= 0 && attr < MAX_ATTR && known[dev][attr]) { *value = cache[dev][attr]; return cudaSuccess; }
    gs_call c;
    gs_call_begin(&c, GS_OP_DEVICE_ATTR, 2);
    gs_w_int(c.w, attr);
    gs_w_int(c.w, dev);
    e = gs_call_run(&c);
    if (!e) {
        *value = (int)gs_i64(&c);
        if (attr >= 0 && attr < MAX_ATTR) { cache[dev][attr] = *value; known[dev][attr] = 1; }
    }
    gs_call_end(&c);
    return gs_ret(e);
}

static cudaError_t dev_call(int op, int dev) {
    gs_call c;
    gs_call_begin(&c, op, 1);
    gs_w_int(c.w, dev);
    return gs_run_simple(&c);
}

GS_IMPL cudaError_t gs_cudaDeviceSynchronize(void) {
    GS_ENTER();
    cudaError_t e;
    if (gs_capture_device_sync(&e)) return gs_ret(e); /* it would wait for a stream that is capturing */
    return dev_call(GS_OP_DEVICE_SYNC, gs_thread()->device);
}

GS_IMPL cudaError_t gs_cudaDeviceReset(void) {
    /* Reset destroys the device's context and with it even a sticky error (as CUDA's primary context reset
     * does); the server starts this device afresh for the session and the next call works again. */
    cudaError_t e = gs_ensure_connected();
    if (e) return gs_ret(e);
    gs_thread_state *t = gs_thread();
    e = dev_call(GS_OP_DEVICE_RESET, t->device);
    if (!e) {
        gs_clear_sticky(); /* the context, and with it a sticky error, is gone (docs/semantics.md) */
        gs_ranges_drop_device(t->device);
        memset(t->per_thread_stream, 0, sizeof t->per_thread_stream);
        t->last_error = cudaSuccess;
    }
    return e;
}

GS_IMPL cudaError_t gs_cudaSetDeviceFlags(unsigned flags) {
    GS_ENTER();
    gs_call c;
    gs_call_begin(&c, GS_OP_SET_DEVICE_FLAGS, 2);
    gs_w_int(c.w, gs_thread()->device);
    gs_w_uint(c.w, flags);
    return gs_run_simple(&c);
}

GS_IMPL cudaError_t gs_cudaGetDeviceFlags(unsigned *flags) {
    if (!flags) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_call c;
    gs_call_begin(&c, GS_OP_GET_DEVICE_FLAGS, 1);
    gs_w_int(c.w, gs_thread()->device);
    cudaError_t e = gs_call_run(&c);
    if (!e) *flags = (unsigned)gs_u64(&c);
    gs_call_end(&c);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    if (!free_bytes || !total) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_call c;
    gs_call_begin(&c, GS_OP_MEM_INFO, 1);
    gs_w_int(c.w, gs_thread()->device);
    cudaError_t e = gs_call_run(&c);
    if (!e) { *free_bytes = gs_u64(&c); *total = gs_u64(&c); }
    gs_call_end(&c);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
    GS_ENTER();
    gs_call c;
    gs_call_begin(&c, GS_OP_STREAM_PRIORITY_RANGE, 1);
    gs_w_int(c.w, gs_thread()->device);
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        int64_t l = gs_i64(&c), g = gs_i64(&c);
        if (least) *least = (int)l;
        if (greatest) *greatest = (int)g;
    }
    gs_call_end(&c);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaDeviceGetPCIBusId(char *bus, int len, int dev) {
    if (!bus || len <= 0) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    cudaError_t e = gs_check_device(dev);
    if (e) return gs_ret(e);
    gs_call c;
    gs_call_begin(&c, GS_OP_DEVICE_PCI_BUS_ID, 1);
    gs_w_int(c.w, dev);
    e = gs_call_run(&c);
    if (!e) {
        const char *s;
        uint32_t n;
        gs_r_str(&c.r, &s, &n);
        snprintf(bus, (size_t)len, "%.*s", (int)n, s);
    }
    gs_call_end(&c);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaDeviceGetByPCIBusId(int *dev, const char *bus) {
    if (!dev || !bus) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_call c;
    gs_call_begin(&c, GS_OP_DEVICE_BY_PCI_BUS_ID, 1);
    gs_w_cstr(c.w, bus);
    cudaError_t e = gs_call_run(&c);
    if (!e) *dev = (int)gs_i64(&c);
    gs_call_end(&c);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaDeviceCanAccessPeer(int *can, int dev, int peer) {
    if (!can) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    cudaError_t e = gs_check_device(dev);
    if (!e) e = gs_check_device(peer);
    if (e) return gs_ret(e);
    gs_call c;
    gs_call_begin(&c, GS_OP_CAN_ACCESS_PEER, 2);
    gs_w_int(c.w, dev);
    gs_w_int(c.w, peer);
    e = gs_call_run(&c);
    if (!e) *can = (int)gs_i64(&c);
    gs_call_end(&c);
    return gs_ret(e);
}

/* cudaChooseDevice: the device whose compute capability is closest to the requested one (major and
 * minor sit at the same offsets, 360/364, in every cudaDeviceProp ABI). */
static cudaError_t choose_device(int *dev, const void *prop) {
    if (!dev || !prop) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    int n = 0, want_major, want_minor;
    memcpy(&want_major, (const char *)prop + 360, 4);
    memcpy(&want_minor, (const char *)prop + 364, 4);
    cudaError_t e = gs_device_count(&n);
    if (e) return gs_ret(e);
    int best = 0, best_score = 1 << 30;
    for (int d = 0; d < n; d++) {
        int ma = 0, mi = 0;
        if (gs_cudaDeviceGetAttribute(&ma, 75, d) || gs_cudaDeviceGetAttribute(&mi, 76, d)) continue;
        int score = abs((ma * 10 + mi) - (want_major * 10 + want_minor));
        if (score < best_score) { best_score = score; best = d; }
    }
    *dev = best;
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaChooseDevice__11(int *dev, const void *prop) { return choose_device(dev, prop); }
GS_IMPL cudaError_t gs_cudaChooseDevice__12(int *dev, const void *prop) { return choose_device(dev, prop); }
GS_IMPL cudaError_t gs_cudaChooseDevice__13(int *dev, const void *prop) { return choose_device(dev, prop); }
