/* cudaStreamSetAttribute / cudaStreamGetAttribute, kept in the client per stream.
 *
 * Stream attributes are hints for the hardware (an L2 access policy window, the synchronisation policy of
 * host waits, a priority, memory synchronisation domains): gpushim checks them as CUDA does, keeps them
 * and reports them back. The access policy window and memory sync domains change nothing on gpushim's
 * devices (there is no L2 to steer); a priority set here is what cudaStreamGetPriority reports (the
 * emulator does not order streams by priority either way). Attributes that are not stream attributes
 * (cooperative, cluster dimensions, ...) are refused with cudaErrorInvalidValue. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gs_api.h"

enum { ATTR_ACCESS_POLICY_WINDOW = 1, ATTR_SYNC_POLICY = 3, ATTR_PRIORITY = 8, ATTR_MEM_SYNC_DOMAIN_MAP = 9,
       ATTR_MEM_SYNC_DOMAIN = 10 };
#define ATTR_VALUE_SIZE 64 /* cudaLaunchAttributeValue */
#define DEV_ATTR_MAX_ACCESS_POLICY_WINDOW 109

typedef struct {
    uint64_t stream;
    int attr;
    unsigned char value[ATTR_VALUE_SIZE];
} stream_attr;

static pthread_mutex_t attr_lock = PTHREAD_MUTEX_INITIALIZER;
static stream_attr *attrs;
static size_t nattrs, attrs_cap;

cudaError_t gs_cudaDeviceGetAttribute(int *v, int attr, int dev);
cudaError_t gs_cudaDeviceGetStreamPriorityRange(int *least, int *greatest);

static stream_attr *attr_find_locked(uint64_t stream, int attr) {
    for (size_t i = 0; i < nattrs; i++)
        if (attrs[i].stream == stream && attrs[i].attr == attr) return &attrs[i];
    return NULL;
}

/* The priority set through cudaStreamSetAttribute, if any (for cudaStreamGetPriority). */
int gs_stream_attr_priority(uint64_t stream, int *out) {
    pthread_mutex_lock(&attr_lock);
    stream_attr *a = attr_find_locked(stream, ATTR_PRIORITY);
    if (a) memcpy(out, a->value, sizeof *out);
    pthread_mutex_unlock(&attr_lock);
    return a != NULL;
}

static cudaError_t attr_check_value(int attr, unsigned char *v) {
    switch (attr) {
    case ATTR_ACCESS_POLICY_WINDOW: {
        size_t num_bytes;
        float hit;
        int hit_prop, miss_prop, max = 0;
        memcpy(&num_bytes, v + 8, sizeof num_bytes);
        memcpy(&hit, v + 16, sizeof hit);
        memcpy(&hit_prop, v + 20, sizeof hit_prop);
        memcpy(&miss_prop, v + 24, sizeof miss_prop);
        cudaError_t e = gs_cudaDeviceGetAttribute(&max, DEV_ATTR_MAX_ACCESS_POLICY_WINDOW, gs_thread()->device);
        if (e) return e;
        /* cudaAccessProperty: Normal 0, Streaming 1, Persisting 2 */
        if (num_bytes > (size_t)max || !(hit >= 0.0f && hit <= 1.0f) || (unsigned)hit_prop > 2 ||
            (unsigned)miss_prop > 2)
            return cudaErrorInvalidValue;
        return cudaSuccess;
    }
    case ATTR_SYNC_POLICY: { /* cudaSynchronizationPolicy: Auto 1, Spin 2, Yield 3, BlockingSync 4 */
        int p;
        memcpy(&p, v, sizeof p);
        return p >= 1 && p <= 4 ? cudaSuccess : cudaErrorInvalidValue;
    }
    case ATTR_PRIORITY: { /* clamped into the device's range, as cudaStreamCreateWithPriority does */
        int p, least = 0, greatest = 0;
        memcpy(&p, v, sizeof p);
        cudaError_t e = gs_cudaDeviceGetStreamPriorityRange(&least, &greatest);
        if (e) return e;
        if (p > least) p = least;
        if (p < greatest) p = greatest;
        memcpy(v, &p, sizeof p);
        return cudaSuccess;
    }
    case ATTR_MEM_SYNC_DOMAIN: {
        int d;
        memcpy(&d, v, sizeof d);
        return d == 0 || d == 1 ? cudaSuccess : cudaErrorInvalidValue; /* Default, Remote */
    }
    case ATTR_MEM_SYNC_DOMAIN_MAP: return cudaSuccess;
    default: return cudaErrorInvalidValue;
    }
}

static cudaError_t stream_set_attr(cudaStream_t s, int attr, const void *value, int ptsz) {
    if (!value) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptsz, &h);
    if (e) return gs_ret(e);
    unsigned char v[ATTR_VALUE_SIZE];
    memcpy(v, value, sizeof v);
    e = attr_check_value(attr, v);
    if (e) return gs_ret(e);
    pthread_mutex_lock(&attr_lock);
    stream_attr *a = attr_find_locked(h, attr);
    if (!a && nattrs == attrs_cap) {
        size_t cap = attrs_cap ? attrs_cap * 2 : 8;
        stream_attr *p = realloc(attrs, cap * sizeof *p);
        if (p) { attrs = p; attrs_cap = cap; }
    }
    if (!a && nattrs < attrs_cap) {
        a = &attrs[nattrs++];
        a->stream = h;
        a->attr = attr;
    }
    if (a) memcpy(a->value, v, sizeof v);
    pthread_mutex_unlock(&attr_lock);
    return a ? cudaSuccess : gs_ret(cudaErrorMemoryAllocation);
}

cudaError_t gs_cudaStreamGetPriority(cudaStream_t s, int *p);
cudaError_t gs_cudaStreamGetPriority_ptsz(cudaStream_t s, int *p);

static cudaError_t stream_get_attr(cudaStream_t s, int attr, void *out, int ptsz) {
    if (!out) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    uint64_t h;
    cudaError_t e = gs_stream_handle(s, ptsz, &h);
    if (e) return gs_ret(e);
    if (attr != ATTR_ACCESS_POLICY_WINDOW && attr != ATTR_SYNC_POLICY && attr != ATTR_PRIORITY &&
        attr != ATTR_MEM_SYNC_DOMAIN && attr != ATTR_MEM_SYNC_DOMAIN_MAP)
        return gs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&attr_lock);
    stream_attr *a = attr_find_locked(h, attr);
    unsigned char v[ATTR_VALUE_SIZE] = {0};
    if (a) memcpy(v, a->value, sizeof v);
    pthread_mutex_unlock(&attr_lock);
    if (!a && attr == ATTR_SYNC_POLICY) v[0] = 1; /* cudaSyncPolicyAuto */
    if (!a && attr == ATTR_PRIORITY) {
        int p = 0;
        e = ptsz ? gs_cudaStreamGetPriority_ptsz(s, &p) : gs_cudaStreamGetPriority(s, &p);
        if (e) return e;
        memcpy(v, &p, sizeof p);
    }
    memcpy(out, v, sizeof v);
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaStreamSetAttribute(cudaStream_t s, int attr, const void *value) {
    return stream_set_attr(s, attr, value, 0);
}
GS_IMPL cudaError_t gs_cudaStreamSetAttribute_ptsz(cudaStream_t s, int attr, const void *value) {
    return stream_set_attr(s, attr, value, 1);
}
GS_IMPL cudaError_t gs_cudaStreamGetAttribute(cudaStream_t s, int attr, void *value) {
    return stream_get_attr(s, attr, value, 0);
}
GS_IMPL cudaError_t gs_cudaStreamGetAttribute_ptsz(cudaStream_t s, int attr, void *value) {
    return stream_get_attr(s, attr, value, 1);
}
