/* The driver face: initialisation, versions, devices, contexts and error strings.
 *
 * A device's primary context is the runtime's context on it: making it current sets the thread's runtime
 * device, and a thread that chose a device through the runtime has that primary context current. Contexts
 * from cuCtxCreate are kept as handles of their own (flags, the current-context stack), but share the
 * device's memory, modules and streams with its primary context: the server keeps one context per device
 * and session. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drv_api.h"
#include "gen/drv_errors.h"
#include "gs_transport.h"

#define GS_CTX_MAGIC 0x43545847u /* "GXTC" */
#define GS_CTX_STACK 32

/* A context on a thread's stack: its handle and its id. cuCtxDestroy frees a created context while other
 * threads may still have it current; the id tells such a stale entry from a new context made at the same
 * address. */
typedef struct {
    gs_ctx *c;
    uint64_t id;
} ctx_ref;

static gs_ctx primaries[GS_MAX_DEVICES];
static _Atomic int initialised;
static _Atomic uint64_t next_id = GS_MAX_DEVICES + 1; /* primary contexts have ids 1..GS_MAX_DEVICES */
static _Thread_local ctx_ref stack[GS_CTX_STACK];
static _Thread_local int depth;        /* contexts on this thread's stack */
static _Thread_local int explicit_none; /* cuCtxSetCurrent(NULL) / pops emptied the stack */
/* Held while a created context is read through a handle, and while one is freed: a handle is looked up and
 * read under it, never read once cuCtxDestroy has freed it. */
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;

/* cuInit was called, or the process uses the runtime face, which initialises the driver itself (a
 * runtime program may call driver functions, or ones cudaGetDriverEntryPoint gave it, without cuInit). */
static int driver_ready(void) {
    if (initialised) return 1;
    if (gs_runtime_detecting()) return 0; /* a real libcudart asking, inside the shim's detection */
    if (gs_runtime_soname()[0]) initialised = 1;
    return initialised;
}

void gs_drv_mark_initialised(void) { initialised = 1; }

CUresult gs_drv_err(cudaError_t e) {
    switch (e) {
    case 0: case 1: case 2: case 3: case 4: case 46: return e;
    case 7: return 701;                     /* launch out of resources */
    case 13: return CUDA_ERROR_NOT_FOUND;   /* invalid symbol */
    case 35: return 803; /* CUDA_ERROR_SYSTEM_DRIVER_MISMATCH */
    case 36: return CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE;
    case 98: return CUDA_ERROR_INVALID_HANDLE; /* invalid device function */
    default: return e >= 100 ? e : CUDA_ERROR_INVALID_VALUE;
    }
}

gs_ctx *gs_drv_primary(int dev) {
    gs_ctx *c = &primaries[dev];
    if (!c->magic) *c = (gs_ctx){.magic = GS_CTX_MAGIC, .device = dev, .primary = 1, .id = (uint64_t)dev + 1};
    return c;
}

static int is_primary(const gs_ctx *c) {
    return (uintptr_t)c >= (uintptr_t)primaries && (uintptr_t)c < (uintptr_t)(primaries + GS_MAX_DEVICES) &&
           ((uintptr_t)c - (uintptr_t)primaries) % sizeof *c == 0;
}

/* A copy of the context handle h names: a primary context handed out (never freed), or a live context from
 * cuCtxCreate. The handle is looked up before it is read: a garbage or destroyed (freed) one is refused. */
static int ctx_get(const gs_ctx *h, gs_ctx *out) {
    if (!h) return 0;
    if (is_primary(h)) {
        *out = *h;
        return h->magic == GS_CTX_MAGIC;
    }
    pthread_mutex_lock(&ctx_lock);
    int ok = gs_ptr_known(GS_HANDLE_CTX, h);
    if (ok) *out = *h;
    pthread_mutex_unlock(&ctx_lock);
    return ok;
}

/* The same for a stack entry: the context must still be the one pushed. */
static int ref_get(ctx_ref r, gs_ctx *out) { return ctx_get(r.c, out) && out->id == r.id; }

int gs_drv_ctx_known(const gs_ctx *h) {
    gs_ctx c;
    return ctx_get(h, &c);
}

/* The thread's current context: its stack's top, else the primary context of a device the runtime face
 * selected or used on this thread. It may have been destroyed by another thread since it was made current. */
static ctx_ref top(void) {
    if (depth) return stack[depth - 1];
    if (!explicit_none && (gs_thread()->device_set || gs_thread()->runtime_ctx)) {
        gs_ctx *p = gs_drv_primary(gs_thread()->device);
        return (ctx_ref){p, p->id};
    }
    return (ctx_ref){0};
}

static void make_current(int dev) {
    gs_thread()->device = dev;
    gs_thread()->device_set = 1;
}

/* After the stack changed: the runtime's device follows the new current context, if it is alive. */
static void follow_top(void) {
    gs_ctx c;
    if (ref_get(top(), &c)) make_current(c.device);
}

/* The current context (a copy), or why there is none. */
static CUresult current_ctx(gs_ctx *out) {
    ctx_ref t = top();
    if (!t.c) return CUDA_ERROR_INVALID_CONTEXT;
    /* destroyed by another thread while current here (CUDA Driver API, cuCtxDestroy: "attempting to access
     * ctx from those threads will result in the error CUDA_ERROR_CONTEXT_IS_DESTROYED") */
    return ref_get(t, out) ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

CUresult gs_drv_enter(int *dev) {
    if (!driver_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    cudaError_t e = gs_sticky();
    if (!e) e = gs_ensure_connected();
    if (e) return gs_drv_err(e);
    gs_ctx c;
    CUresult r = current_ctx(&c);
    if (r) return r;
    make_current(c.device);
    if (dev) *dev = c.device;
    return CUDA_SUCCESS;
}

static CUresult check_device(CUdevice dev) {
    if (!driver_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    cudaError_t e = gs_ensure_connected();
    if (e) return gs_drv_err(e);
    int n = 0;
    e = gs_device_count(&n);
    if (e) return gs_drv_err(e);
    return dev >= 0 && dev < n && dev < GS_MAX_DEVICES ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* ---- initialisation, versions, devices ---- */

GS_DRV CUresult gs_cuInit(unsigned flags) {
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    if (gs_runtime_detecting()) return CUDA_ERROR_NO_DEVICE;
    cudaError_t e = gs_ensure_connected();
    /* the server refused this client's version: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH; else no device */
    if (e) return e == cudaErrorInsufficientDriver ? 803 : CUDA_ERROR_NO_DEVICE;
    initialised = 1;
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuDriverGetVersion(int *v) {
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    if (gs_runtime_detecting()) return CUDA_ERROR_NOT_INITIALIZED;
    return GS_DRV_CALL(gs_cudaDriverGetVersion(v));
}

GS_DRV CUresult gs_cuDeviceGetCount(int *n) {
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    if (!driver_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    return GS_DRV_CALL(gs_cudaGetDeviceCount(n));
}

GS_DRV CUresult gs_cuDeviceGet(CUdevice *dev, int ordinal) {
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_device(ordinal);
    if (!r) *dev = ordinal;
    return r;
}

/* Attributes only the driver API has (cudaDeviceAttr lacks these values): virtual memory management is
 * supported (drv_vmm.c), and sharing it as a POSIX file descriptor when the client reaches one server over a
 * Unix socket (the descriptor passes with the frame); Windows handles, compression and GPUDirect RDMA with it
 * are not. */
static int driver_only_attribute(int attr, int *value) {
    switch (attr) {
    case 102: *value = 1; return 1; /* CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
    case 103: *value = gs_transport_is_unix(); return 1; /* HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED */
    case 104: case 105:             /* HANDLE_TYPE_WIN32 / WIN32_KMT_SUPPORTED */
    case 107:                       /* GENERIC_COMPRESSION_SUPPORTED */
    case 110:                       /* GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED */
        *value = 0;
        return 1;
    default: return 0;
    }
}

GS_DRV CUresult gs_cuDeviceGetAttribute(int *value, int attr, CUdevice dev) {
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_device(dev);
    if (r) return r;
    if (driver_only_attribute(attr, value)) return CUDA_SUCCESS;
    return GS_DRV_CALL(gs_cudaDeviceGetAttribute(value, attr, dev)); /* same enum values */
}

/* One field of the device's cudaDeviceProp (CUDA 13 layout), copied raw. */
static CUresult prop_field(CUdevice dev, const char *name, void *out, size_t n) {
    CUresult r = check_device(dev);
    if (r) return r;
    const gs_layout *l = gs_layout_for("cudaDeviceProp", 13);
    if (!l) return CUDA_ERROR_NOT_SUPPORTED;
    uint8_t *buf = calloc(1, l->size);
    if (!buf) return CUDA_ERROR_OUT_OF_MEMORY;
    r = GS_DRV_CALL(gs_cudaGetDeviceProperties__13(buf, dev));
    if (!r) {
        r = CUDA_ERROR_NOT_SUPPORTED;
        for (unsigned i = 0; i < l->nfields; i++) {
            if (strcmp(l->fields[i].name, name) == 0) {
                memcpy(out, buf + l->fields[i].offset, n < l->fields[i].size ? n : l->fields[i].size);
                r = CUDA_SUCCESS;
                break;
            }
        }
    }
    free(buf);
    return r;
}

GS_DRV CUresult gs_cuDeviceGetName(char *name, int len, CUdevice dev) {
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    char full[256] = "";
    CUresult r = prop_field(dev, "name", full, sizeof full);
    if (!r) snprintf(name, (size_t)len, "%s", full);
    return r;
}

GS_DRV CUresult gs_cuDeviceGetUuid(void *uuid, CUdevice dev) {
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    return prop_field(dev, "uuid", uuid, 16);
}
GS_DRV CUresult gs_cuDeviceGetUuid_v2(void *uuid, CUdevice dev) { return gs_cuDeviceGetUuid(uuid, dev); }

GS_DRV CUresult gs_cuDeviceGetLuid(char *luid, unsigned *mask, CUdevice dev) {
    (void)luid;
    (void)mask;
    CUresult r = check_device(dev);
    return r ? r : CUDA_ERROR_NOT_SUPPORTED; /* LUIDs exist on Windows only */
}

GS_DRV CUresult gs_cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    return prop_field(dev, "totalGlobalMem", bytes, sizeof *bytes);
}
GS_DRV CUresult gs_cuDeviceTotalMem(unsigned *bytes, CUdevice dev) {
    size_t b = 0;
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = gs_cuDeviceTotalMem_v2(&b, dev);
    if (!r) *bytes = b > 0xffffffffu ? 0xffffffffu : (unsigned)b;
    return r;
}

GS_DRV CUresult gs_cuDeviceComputeCapability(int *major, int *minor, CUdevice dev) {
    if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = gs_cuDeviceGetAttribute(major, 75, dev);
    return r ? r : gs_cuDeviceGetAttribute(minor, 76, dev);
}

GS_DRV CUresult gs_cuDeviceGetPCIBusId(char *bus, int len, CUdevice dev) {
    if (!bus || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_device(dev);
    return r ? r : GS_DRV_CALL(gs_cudaDeviceGetPCIBusId(bus, len, dev));
}

GS_DRV CUresult gs_cuDeviceGetByPCIBusId(CUdevice *dev, const char *bus) {
    if (!dev || !bus) return CUDA_ERROR_INVALID_VALUE;
    if (!driver_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    return GS_DRV_CALL(gs_cudaDeviceGetByPCIBusId(dev, bus));
}

GS_DRV CUresult gs_cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
    if (!can) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_device(dev);
    if (!r) r = check_device(peer);
    return r ? r : GS_DRV_CALL(gs_cudaDeviceCanAccessPeer(can, dev, peer));
}

/* ---- primary contexts ---- */

GS_DRV CUresult gs_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_device(dev);
    if (r) return r;
    pthread_mutex_lock(&ctx_lock);
    gs_ctx *c = gs_drv_primary(dev);
    c->refs++;
    pthread_mutex_unlock(&ctx_lock);
    *pctx = c;
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    CUresult r = check_device(dev);
    if (r) return r;
    pthread_mutex_lock(&ctx_lock);
    gs_ctx *c = gs_drv_primary(dev);
    r = c->refs > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (c->refs > 0) c->refs--;
    pthread_mutex_unlock(&ctx_lock);
    return r; /* the runtime's context lives on: its resources are freed with the session */
}
GS_DRV CUresult gs_cuDevicePrimaryCtxRelease(CUdevice dev) { return gs_cuDevicePrimaryCtxRelease_v2(dev); }

GS_DRV CUresult gs_cuDevicePrimaryCtxGetState(CUdevice dev, unsigned *flags, int *active) {
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_device(dev);
    if (r) return r;
    gs_ctx *c = gs_drv_primary(dev);
    *active = c->refs > 0 || (gs_thread()->device_set && gs_thread()->device == dev);
    unsigned f = 0;
    if (GS_DRV_CALL(gs_cudaGetDeviceFlags(&f)) == CUDA_SUCCESS && gs_thread()->device == dev) c->flags = f & 0xff;
    *flags = c->flags & ~0x8u; /* cudaDeviceMapHost is not a context flag */
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned flags) {
    CUresult r = check_device(dev);
    if (r) return r;
    if (flags & ~0x1fu) return CUDA_ERROR_INVALID_VALUE;
    gs_drv_primary(dev)->flags = flags;
    int saved = gs_thread()->device;
    gs_thread()->device = dev;
    r = GS_DRV_CALL(gs_cudaSetDeviceFlags(flags));
    gs_thread()->device = saved;
    return r;
}
GS_DRV CUresult gs_cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned flags) {
    return gs_cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

GS_DRV CUresult gs_cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    CUresult r = check_device(dev);
    if (r) return r;
    gs_drv_cls_destroy(gs_drv_primary(dev)); /* the static runtime's state for the context goes with it */
    int saved = gs_thread()->device;
    gs_thread()->device = dev;
    r = GS_DRV_CALL(gs_cudaDeviceReset());
    gs_thread()->device = saved;
    return r;
}
GS_DRV CUresult gs_cuDevicePrimaryCtxReset(CUdevice dev) { return gs_cuDevicePrimaryCtxReset_v2(dev); }

/* ---- contexts ---- */

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev) {
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_device(dev);
    if (r) return r;
    if (depth == GS_CTX_STACK) return CUDA_ERROR_OUT_OF_MEMORY;
    gs_ctx *c = calloc(1, sizeof *c);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    *c = (gs_ctx){.magic = GS_CTX_MAGIC, .device = dev, .flags = flags, .id = atomic_fetch_add(&next_id, 1)};
    stack[depth++] = (ctx_ref){c, c->id}; /* a new context is pushed onto the thread's stack */
    gs_handle_add(GS_HANDLE_CTX, (uintptr_t)c);
    explicit_none = 0;
    make_current(dev);
    *pctx = c;
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuCtxCreate_v2(CUcontext *pctx, unsigned flags, CUdevice dev) { return ctx_create(pctx, flags, dev); }
GS_DRV CUresult gs_cuCtxCreate(CUcontext *pctx, unsigned flags, CUdevice dev) { return ctx_create(pctx, flags, dev); }
GS_DRV CUresult gs_cuCtxCreate_v3(CUcontext *pctx, void *affinity, int n, unsigned flags, CUdevice dev) {
    if (affinity && n > 0) return CUDA_ERROR_NOT_SUPPORTED; /* execution affinity (MPS SM partitions) */
    return ctx_create(pctx, flags, dev);
}
GS_DRV CUresult gs_cuCtxCreate_v4(CUcontext *pctx, void *params, unsigned flags, CUdevice dev) {
    if (params) {
        gs_warn_once("cuCtxCreate_v4", "cuCtxCreate_v4 with CUctxCreateParams (affinity, CIG) is not supported");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return ctx_create(pctx, flags, dev);
}

/* What contexts made with cuCtxCreate allocated: device, managed and pinned host memory made, and host
 * memory registered, while one was current on the allocating thread; streams, events and modules made in
 * the driver face while one was current (kind GS_OWN_*). */
typedef struct owned_range {
    uintptr_t base;
    int kind, owned;
    gs_ctx *ctx;
    struct owned_range *next;
} owned_range;
static owned_range *owned_ranges;
static pthread_mutex_t owned_lock = PTHREAD_MUTEX_INITIALIZER;

/* Remembers something made while a created (not primary) context was current, for cuCtxDestroy. Checked
 * and recorded under ctx_lock: once cuCtxDestroy has taken the handle, nothing more is recorded for it. */
static void remember_owned(uintptr_t base, int kind, int owned) {
    ctx_ref t = depth ? stack[depth - 1] : (ctx_ref){0};
    if (!t.c || is_primary(t.c)) return;
    owned_range *o = malloc(sizeof *o);
    if (!o) return;
    pthread_mutex_lock(&ctx_lock);
    if (gs_ptr_known(GS_HANDLE_CTX, t.c) && t.c->id == t.id) {
        pthread_mutex_lock(&owned_lock);
        *o = (owned_range){base, kind, owned, t.c, owned_ranges};
        owned_ranges = o;
        pthread_mutex_unlock(&owned_lock);
        o = NULL;
    }
    pthread_mutex_unlock(&ctx_lock);
    free(o);
}

void gs_drv_range_added(const gs_range *r) { remember_owned(r->base, r->kind, r->owned); }

void gs_drv_own(uintptr_t handle, int kind) { remember_owned(handle, kind, 0); }

static void forget_owned(uintptr_t base, int kind) { /* kind 0: any memory range */
    pthread_mutex_lock(&owned_lock);
    for (owned_range **p = &owned_ranges; *p; p = &(*p)->next) {
        if ((*p)->base != base || (kind ? (*p)->kind != kind : (*p)->kind >= GS_OWN_STREAM)) continue;
        owned_range *o = *p;
        *p = o->next;
        free(o);
        break;
    }
    pthread_mutex_unlock(&owned_lock);
}

gs_ctx *gs_drv_owner(uintptr_t handle, int kind) {
    gs_ctx *c = NULL;
    pthread_mutex_lock(&owned_lock);
    for (owned_range *o = owned_ranges; o && !c; o = o->next)
        if (o->base == handle && o->kind == kind) c = o->ctx;
    pthread_mutex_unlock(&owned_lock);
    return c;
}

void gs_drv_range_removed(uintptr_t base) { forget_owned(base, 0); }
void gs_drv_disown(uintptr_t handle, int kind) { forget_owned(handle, kind); }

/* cuCtxDestroy: "all resources allocated in the context are freed": its memory, and the streams, events
 * and modules the driver face made in it (the server destroys them; their handles are then invalid).
 * Objects made through the runtime face while the context was current are not tracked and stay. */
static void free_context_resources(gs_ctx *ctx) {
    for (;;) {
        owned_range o = {0};
        pthread_mutex_lock(&owned_lock);
        owned_range **p = &owned_ranges;
        while (*p && (*p)->ctx != ctx) p = &(*p)->next;
        if (*p) {
            owned_range *found = *p;
            o = *found;
            *p = found->next; /* taken off first: a free that fails (not an allocation) is not retried */
            free(found);
        }
        pthread_mutex_unlock(&owned_lock);
        if (!o.ctx) break;
        void *ptr = (void *)o.base;
        if (o.kind == GS_OWN_STREAM)
            (void)GS_DRV_CALL(gs_cudaStreamDestroy(ptr)); /* its queued work still completes, as CUDA's does */
        else if (o.kind == GS_OWN_EVENT)
            (void)GS_DRV_CALL(gs_cudaEventDestroy(ptr));
        else if (o.kind == GS_OWN_MODULE)
            (void)gs_drv_module_unload(ptr);
        else if (o.kind == cudaMemoryTypeHost)
            (void)GS_DRV_CALL(o.owned ? gs_cudaFreeHost(ptr) : gs_cudaHostUnregister(ptr));
        else
            (void)GS_DRV_CALL(gs_cudaFree(ptr)); /* a cuMemAddressReserve range is refused: not the context's */
    }
}

/* A destroyed or never-valid context is CUDA_ERROR_INVALID_CONTEXT (CUDA Driver API, CUresult: "the context
 * passed to an API call is not a valid handle (such as a context that has had cuCtxDestroy() invoked on it)");
 * none at all is CUDA_ERROR_INVALID_VALUE. The context is freed: other threads that still have it current
 * get CUDA_ERROR_CONTEXT_IS_DESTROYED (their stack entries' ids match no live context). */
GS_DRV CUresult gs_cuCtxDestroy_v2(CUcontext ctx) {
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    gs_ctx c;
    if (!ctx_get(ctx, &c) || c.primary) return CUDA_ERROR_INVALID_CONTEXT;
    free_context_resources(ctx); /* while it is alive: unloading its modules runs in it */
    pthread_mutex_lock(&ctx_lock);
    int mine = gs_ptr_known(GS_HANDLE_CTX, ctx); /* a racing cuCtxDestroy of the same context frees it once */
    gs_handle_remove(GS_HANDLE_CTX, (uintptr_t)ctx);
    pthread_mutex_unlock(&ctx_lock);
    if (!mine) return CUDA_ERROR_INVALID_CONTEXT;
    free_context_resources(ctx); /* what another thread made in it meanwhile */
    for (int i = 0; i < depth; i++) {
        if (stack[i].c == ctx) {
            memmove(&stack[i], &stack[i + 1], (size_t)(depth - i - 1) * sizeof *stack);
            depth--;
            i--;
        }
    }
    follow_top();
    gs_drv_cls_destroy(ctx);
    free(ctx);
    return CUDA_SUCCESS;
}
GS_DRV CUresult gs_cuCtxDestroy(CUcontext ctx) { return gs_cuCtxDestroy_v2(ctx); }

GS_DRV CUresult gs_cuCtxPushCurrent_v2(CUcontext ctx) {
    gs_ctx c;
    if (!ctx_get(ctx, &c)) return CUDA_ERROR_INVALID_CONTEXT;
    if (depth == GS_CTX_STACK) return CUDA_ERROR_OUT_OF_MEMORY;
    stack[depth++] = (ctx_ref){ctx, c.id};
    explicit_none = 0;
    make_current(c.device);
    return CUDA_SUCCESS;
}
GS_DRV CUresult gs_cuCtxPushCurrent(CUcontext ctx) { return gs_cuCtxPushCurrent_v2(ctx); }

GS_DRV CUresult gs_cuCtxPopCurrent_v2(CUcontext *pctx) {
    ctx_ref t = top();
    if (!t.c) return CUDA_ERROR_INVALID_CONTEXT;
    if (depth) depth--;
    else explicit_none = 1; /* popping the runtime's implicit current context */
    if (!depth) explicit_none = 1;
    if (pctx) *pctx = t.c;
    follow_top();
    return CUDA_SUCCESS;
}
GS_DRV CUresult gs_cuCtxPopCurrent(CUcontext *pctx) { return gs_cuCtxPopCurrent_v2(pctx); }

GS_DRV CUresult gs_cuCtxSetCurrent(CUcontext ctx) {
    if (!ctx) {
        if (depth) depth--;
        explicit_none = depth == 0;
        return CUDA_SUCCESS;
    }
    gs_ctx c;
    if (!ctx_get(ctx, &c)) return CUDA_ERROR_INVALID_CONTEXT;
    if (depth) stack[depth - 1] = (ctx_ref){ctx, c.id};
    else stack[depth++] = (ctx_ref){ctx, c.id};
    explicit_none = 0;
    make_current(c.device);
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuCtxGetCurrent(CUcontext *pctx) {
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (!driver_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    *pctx = top().c;
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuCtxGetDevice(CUdevice *dev) {
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    return gs_drv_enter(dev);
}

/* CUDA 13: the context as an argument; NULL means the current one. Every context of a device shares its
 * device and its work here. */
GS_DRV CUresult gs_cuCtxGetDevice_v2(CUdevice *dev, CUcontext ctx) {
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    if (!ctx) return gs_drv_enter(dev);
    gs_ctx c;
    if (!ctx_get(ctx, &c)) return CUDA_ERROR_INVALID_CONTEXT;
    *dev = c.device;
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuCtxGetFlags(unsigned *flags) {
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = gs_drv_enter(NULL);
    gs_ctx c;
    if (!r) r = current_ctx(&c);
    if (!r) *flags = c.flags;
    return r;
}

GS_DRV CUresult gs_cuCtxSetFlags(unsigned flags) {
    CUresult r = gs_drv_enter(NULL);
    if (r) return r;
    if (flags & ~0x1fu) return CUDA_ERROR_INVALID_VALUE;
    ctx_ref t = top();
    pthread_mutex_lock(&ctx_lock); /* written only while it lives */
    if (is_primary(t.c) || (gs_ptr_known(GS_HANDLE_CTX, t.c) && t.c->id == t.id)) t.c->flags = flags;
    else r = CUDA_ERROR_CONTEXT_IS_DESTROYED;
    pthread_mutex_unlock(&ctx_lock);
    return r;
}

/* Peer access of the current context to peer's memory. Every context of a device shares that device here, so
 * this is the runtime's cudaDeviceEnablePeerAccess between the two devices (CuPy's static runtime implements
 * cudaDeviceEnablePeerAccess with these calls): the same checks and error codes (driver API, "Peer Context
 * Memory Access": CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED / _NOT_ENABLED / _UNSUPPORTED, INVALID_CONTEXT). */
GS_DRV CUresult gs_cuCtxEnablePeerAccess(CUcontext peer, unsigned flags) {
    CUresult r = gs_drv_enter(NULL);
    if (r) return r;
    gs_ctx p;
    if (!ctx_get(peer, &p)) return CUDA_ERROR_INVALID_CONTEXT;
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    return GS_DRV_CALL(gs_cudaDeviceEnablePeerAccess(p.device, 0));
}

GS_DRV CUresult gs_cuCtxDisablePeerAccess(CUcontext peer) {
    CUresult r = gs_drv_enter(NULL);
    if (r) return r;
    gs_ctx p;
    if (!ctx_get(peer, &p)) return CUDA_ERROR_INVALID_CONTEXT;
    return GS_DRV_CALL(gs_cudaDeviceDisablePeerAccess(p.device));
}

GS_DRV CUresult gs_cuCtxGetApiVersion(CUcontext ctx, unsigned *version) {
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    if (ctx && !gs_drv_ctx_known(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    if (!ctx && gs_drv_enter(NULL)) return CUDA_ERROR_INVALID_CONTEXT;
    *version = 3020; /* what every context created through the v2 API reports */
    return CUDA_SUCCESS;
}

/* The id is unique in the process ("unique ID for the context"): a context made after one was destroyed has
 * another even at the same address (libcublasLt keys its per-context state by it). */
GS_DRV CUresult gs_cuCtxGetId(CUcontext ctx, unsigned long long *id) {
    if (!id) return CUDA_ERROR_INVALID_VALUE;
    gs_ctx c;
    if (!ctx) {
        CUresult r = gs_drv_enter(NULL);
        if (!r) r = current_ctx(&c);
        if (r) return r;
    } else if (!ctx_get(ctx, &c)) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *id = c.id;
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuCtxSynchronize(void) {
    CUresult r = gs_drv_enter(NULL);
    return r ? r : GS_DRV_CALL(gs_cudaDeviceSynchronize());
}

GS_DRV CUresult gs_cuCtxSynchronize_v2(CUcontext ctx) {
    if (!ctx) return gs_cuCtxSynchronize();
    gs_ctx c;
    if (!ctx_get(ctx, &c)) return CUDA_ERROR_INVALID_CONTEXT;
    CUresult r = gs_drv_enter(NULL);
    if (r) return r;
    int saved = gs_thread()->device;
    gs_thread()->device = c.device;
    r = GS_DRV_CALL(gs_cudaDeviceSynchronize());
    gs_thread()->device = saved;
    return r;
}

GS_DRV CUresult gs_cuCtxGetLimit(size_t *value, int limit) {
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = gs_drv_enter(NULL);
    return r ? r : GS_DRV_CALL(gs_cudaDeviceGetLimit(value, limit)); /* CUlimit == cudaLimit */
}

GS_DRV CUresult gs_cuCtxSetLimit(int limit, size_t value) {
    CUresult r = gs_drv_enter(NULL);
    return r ? r : GS_DRV_CALL(gs_cudaDeviceSetLimit(limit, value));
}

GS_DRV CUresult gs_cuCtxGetStreamPriorityRange(int *least, int *greatest) {
    CUresult r = gs_drv_enter(NULL);
    return r ? r : GS_DRV_CALL(gs_cudaDeviceGetStreamPriorityRange(least, greatest));
}

GS_DRV CUresult gs_cuCtxGetCacheConfig(int *cfg) {
    if (!cfg) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = gs_drv_enter(NULL);
    return r ? r : GS_DRV_CALL(gs_cudaDeviceGetCacheConfig(cfg));
}

GS_DRV CUresult gs_cuCtxSetCacheConfig(int cfg) {
    CUresult r = gs_drv_enter(NULL);
    return r ? r : GS_DRV_CALL(gs_cudaDeviceSetCacheConfig(cfg));
}

/* In a forked child only the forking thread runs: a lock another thread held is reset. */
static void ctx_after_fork(void) {
    pthread_mutex_init(&ctx_lock, NULL);
    pthread_mutex_init(&owned_lock, NULL);
}
__attribute__((constructor)) static void ctx_init(void) { pthread_atfork(NULL, NULL, ctx_after_fork); }

/* ---- errors ---- */

GS_DRV CUresult gs_cuGetErrorString(CUresult e, const char **str) {
    if (!str) return CUDA_ERROR_INVALID_VALUE;
    const gs_drv_error_entry *x = gs_drv_error_lookup(e);
    *str = x ? x->message : NULL;
    return x ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

GS_DRV CUresult gs_cuGetErrorName(CUresult e, const char **str) {
    if (!str) return CUDA_ERROR_INVALID_VALUE;
    const gs_drv_error_entry *x = gs_drv_error_lookup(e);
    *str = x ? x->name : NULL;
    return x ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
