/* The driver face: memory. CUdeviceptr is the runtime's device pointer, so every call here is the
 * runtime face's implementation with the driver's arguments, error codes and context rule. */
#include <string.h>

#include "drv_api.h"
#include "gs_capture.h"

#define PTR(d) ((void *)(uintptr_t)(d))
enum { MT_HOST = 1, MT_DEVICE = 2, MT_ARRAY = 3, MT_UNIFIED = 4 };

/* Enters a call that needs a current context. */
#define DRV_ENTER()                          \
    do {                                     \
        CUresult gs_r_ = gs_drv_enter(NULL); \
        if (gs_r_) return gs_r_;             \
    } while (0)

/* ---- allocation ---- */

GS_DRV CUresult gs_cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    if (!p || !n) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    void *d = NULL;
    CUresult r = GS_DRV_CALL(gs_cudaMalloc(&d, n));
    if (!r) *p = (uintptr_t)d;
    return r;
}

GS_DRV CUresult gs_cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t width, size_t height, unsigned elem) {
    if (!p || !pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16)) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    void *d = NULL;
    CUresult r = GS_DRV_CALL(gs_cudaMallocPitch(&d, pitch, width, height));
    if (!r) *p = (uintptr_t)d;
    return r;
}

GS_DRV CUresult gs_cuMemFree_v2(CUdeviceptr p) {
    DRV_ENTER();
    return GS_DRV_CALL(gs_cudaFree(PTR(p)));
}

GS_DRV CUresult gs_cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned flags) {
    if (!p || !n) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    void *d = NULL;
    CUresult r = GS_DRV_CALL(gs_cudaMallocManaged(&d, n, flags));
    if (!r) *p = (uintptr_t)d;
    return r;
}

GS_DRV CUresult gs_cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    void *d = NULL;
    CUresult r = GS_DRV_CALL(gs_cudaMallocAsync(&d, n, s));
    if (!r) *p = (uintptr_t)d;
    return r;
}
GS_DRV CUresult gs_cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    void *d = NULL;
    CUresult r = GS_DRV_CALL(gs_cudaMallocAsync_ptsz(&d, n, s));
    if (!r) *p = (uintptr_t)d;
    return r;
}
GS_DRV CUresult gs_cuMemFreeAsync(CUdeviceptr p, CUstream s) {
    DRV_ENTER();
    return GS_DRV_CALL(gs_cudaFreeAsync(PTR(p), s));
}
GS_DRV CUresult gs_cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) {
    DRV_ENTER();
    return GS_DRV_CALL(gs_cudaFreeAsync_ptsz(PTR(p), s));
}

GS_DRV CUresult gs_cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    return GS_DRV_CALL(gs_cudaMemGetInfo(free_bytes, total));
}

GS_DRV CUresult gs_cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
    DRV_ENTER();
    gs_range r;
    /* mapped pinned memory counts: its device pointer is the host pointer (numba sizes mapped arrays so) */
    if (!gs_ranges_find((uintptr_t)p, &r) || !(r.kind == cudaMemoryTypeDevice || gs_range_mapped_host(&r)))
        return CUDA_ERROR_NOT_FOUND;
    if (base) *base = r.base;
    if (size) *size = r.size;
    return CUDA_SUCCESS;
}

/* ---- host memory ---- */

GS_DRV CUresult gs_cuMemAllocHost_v2(void **p, size_t n) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    return GS_DRV_CALL(gs_cudaMallocHost(p, n));
}

GS_DRV CUresult gs_cuMemHostAlloc(void **p, size_t n, unsigned flags) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    return GS_DRV_CALL(gs_cudaHostAlloc(p, n, flags)); /* CU_MEMHOSTALLOC_* == cudaHostAlloc* */
}

GS_DRV CUresult gs_cuMemFreeHost(void *p) {
    DRV_ENTER();
    return GS_DRV_CALL(gs_cudaFreeHost(p));
}

GS_DRV CUresult gs_cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
    DRV_ENTER();
    return GS_DRV_CALL(gs_cudaHostRegister(p, n, flags)); /* CU_MEMHOSTREGISTER_* == cudaHostRegister* */
}
GS_DRV CUresult gs_cuMemHostRegister(void *p, size_t n, unsigned flags) { return gs_cuMemHostRegister_v2(p, n, flags); }

GS_DRV CUresult gs_cuMemHostUnregister(void *p) {
    DRV_ENTER();
    return GS_DRV_CALL(gs_cudaHostUnregister(p));
}

GS_DRV CUresult gs_cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *h, unsigned flags) {
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    void *p = NULL;
    CUresult r = GS_DRV_CALL(gs_cudaHostGetDevicePointer(&p, h, flags));
    if (!r) *d = (uintptr_t)p;
    return r;
}

GS_DRV CUresult gs_cuMemHostGetFlags(unsigned *flags, void *p) {
    DRV_ENTER();
    return GS_DRV_CALL(gs_cudaHostGetFlags(flags, p));
}

/* ---- pointer attributes ---- */

enum {
    PA_CONTEXT = 1, PA_MEMORY_TYPE = 2, PA_DEVICE_POINTER = 3, PA_HOST_POINTER = 4, PA_SYNC_MEMOPS = 6,
    PA_BUFFER_ID = 7, PA_IS_MANAGED = 8, PA_DEVICE_ORDINAL = 9, PA_IS_LEGACY_IPC = 10, PA_RANGE_START = 11,
    PA_RANGE_SIZE = 12, PA_MAPPED = 13, PA_ALLOWED_HANDLE_TYPES = 14, PA_GPU_DIRECT_RDMA = 15,
    PA_ACCESS_FLAGS = 16, PA_MEMPOOL = 17, PA_MAPPING_SIZE = 18, PA_MAPPING_BASE = 19, PA_BLOCK_ID = 20,
};

/* What the client knows of p: its range, or (a module variable, say) what the server says. */
static CUresult classify(CUdeviceptr p, gs_range *out) {
    if (gs_ranges_find((uintptr_t)p, out)) return CUDA_SUCCESS;
    const gs_layout *l = gs_layout_for("cudaPointerAttributes", 13);
    uint8_t attr[128] = {0};
    if (!l || l->size > sizeof attr) return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = GS_DRV_CALL(gs_cudaPointerGetAttributes__13(attr, PTR(p)));
    if (r) return r;
    int type = 0, dev = 0;
    for (unsigned i = 0; i < l->nfields; i++) {
        if (strcmp(l->fields[i].name, "type") == 0) memcpy(&type, attr + l->fields[i].offset, sizeof type);
        if (strcmp(l->fields[i].name, "device") == 0) memcpy(&dev, attr + l->fields[i].offset, sizeof dev);
    }
    if (type != cudaMemoryTypeDevice) return CUDA_ERROR_INVALID_VALUE; /* not memory CUDA knows */
    *out = (gs_range){.base = (uintptr_t)p, .size = 0, .device = dev, .kind = cudaMemoryTypeDevice};
    return CUDA_SUCCESS;
}

static CUresult pointer_attribute(void *data, int attr, CUdeviceptr p) {
    gs_range r;
    CUresult e = classify(p, &r);
    if (e) return e;
    /* managed memory is device memory to the driver (CU_MEMORYTYPE_DEVICE, IS_MANAGED) that the host may use */
    int managed = r.kind == cudaMemoryTypeManaged, device = r.kind == cudaMemoryTypeDevice || managed;
    uint64_t v = 0;
    switch (attr) {
    case PA_CONTEXT: *(void **)data = gs_drv_primary(r.device); return CUDA_SUCCESS;
    case PA_MEMORY_TYPE: *(unsigned *)data = device ? MT_DEVICE : MT_HOST; return CUDA_SUCCESS;
    case PA_DEVICE_POINTER: v = p; break;
    case PA_HOST_POINTER:
        if (device && !managed) return CUDA_ERROR_INVALID_VALUE; /* device memory has no host address */
        v = p;
        break;
    case PA_SYNC_MEMOPS: case PA_IS_MANAGED: case PA_IS_LEGACY_IPC: case PA_GPU_DIRECT_RDMA: case PA_MAPPED:
        /* every allocation is mapped; managed ones say so; the rest are off */
        *(int *)data = attr == PA_MAPPED || (attr == PA_IS_MANAGED && managed);
        return CUDA_SUCCESS;
    case PA_BUFFER_ID: *(unsigned long long *)data = r.base; return CUDA_SUCCESS;
    case PA_BLOCK_ID: *(unsigned long long *)data = r.base; return CUDA_SUCCESS;
    case PA_DEVICE_ORDINAL: *(int *)data = r.device; return CUDA_SUCCESS;
    case PA_RANGE_START: case PA_MAPPING_BASE: v = r.base; break;
    case PA_RANGE_SIZE: case PA_MAPPING_SIZE: v = r.size; break;
    case PA_ALLOWED_HANDLE_TYPES: *(unsigned long long *)data = 0; return CUDA_SUCCESS;
    case PA_ACCESS_FLAGS: *(unsigned *)data = 3; return CUDA_SUCCESS; /* CU_POINTER_ACCESS_FLAG_READWRITE... */
    case PA_MEMPOOL: *(void **)data = NULL; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(data, &v, sizeof v);
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    return pointer_attribute(data, attr, p);
}

GS_DRV CUresult gs_cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr p) {
    if (!attrs || !data) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    gs_range r;
    int known = classify(p, &r) == CUDA_SUCCESS;
    for (unsigned i = 0; i < n; i++) {
        if (!data[i]) continue;
        if (known) {
            CUresult e = pointer_attribute(data[i], attrs[i], p);
            if (e && attrs[i] != PA_HOST_POINTER) return e;
            if (e) *(void **)data[i] = NULL;
        } else if (attrs[i] == PA_MEMORY_TYPE) {
            *(unsigned *)data[i] = 0; /* CUDA: unknown memory reads as type 0 here, not an error */
        } else if (attrs[i] == PA_DEVICE_ORDINAL) {
            *(int *)data[i] = -2;
        } else {
            memset(data[i], 0, attrs[i] == PA_CONTEXT || attrs[i] >= PA_DEVICE_POINTER ? 8 : 4);
        }
    }
    return CUDA_SUCCESS;
}

/* ---- copies ---- */

#define COPY(dst, src, n, kind, fn) \
    DRV_ENTER();                    \
    return GS_DRV_CALL(fn((void *)(dst), (const void *)(src), n, kind))
#define COPY_ASYNC(dst, src, n, kind, s, fn) \
    DRV_ENTER();                             \
    return GS_DRV_CALL(fn((void *)(dst), (const void *)(src), n, kind, s))

GS_DRV CUresult gs_cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) { COPY(d, s, n, 4, gs_cudaMemcpy); }
GS_DRV CUresult gs_cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) { COPY(d, s, n, 4, gs_cudaMemcpy_ptds); }
GS_DRV CUresult gs_cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
    COPY_ASYNC(d, s, n, 4, st, gs_cudaMemcpyAsync);
}
GS_DRV CUresult gs_cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
    COPY_ASYNC(d, s, n, 4, st, gs_cudaMemcpyAsync_ptsz);
}

GS_DRV CUresult gs_cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) { COPY(d, h, n, 1, gs_cudaMemcpy); }
GS_DRV CUresult gs_cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void *h, size_t n) { COPY(d, h, n, 1, gs_cudaMemcpy_ptds); }
GS_DRV CUresult gs_cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) { COPY(h, d, n, 2, gs_cudaMemcpy); }
GS_DRV CUresult gs_cuMemcpyDtoH_v2_ptds(void *h, CUdeviceptr d, size_t n) { COPY(h, d, n, 2, gs_cudaMemcpy_ptds); }
GS_DRV CUresult gs_cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { COPY(d, s, n, 3, gs_cudaMemcpy); }
GS_DRV CUresult gs_cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) { COPY(d, s, n, 3, gs_cudaMemcpy_ptds); }
GS_DRV CUresult gs_cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, CUstream s) {
    COPY_ASYNC(d, h, n, 1, s, gs_cudaMemcpyAsync);
}
GS_DRV CUresult gs_cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *h, size_t n, CUstream s) {
    COPY_ASYNC(d, h, n, 1, s, gs_cudaMemcpyAsync_ptsz);
}
GS_DRV CUresult gs_cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, CUstream s) {
    COPY_ASYNC(h, d, n, 2, s, gs_cudaMemcpyAsync);
}
GS_DRV CUresult gs_cuMemcpyDtoHAsync_v2_ptsz(void *h, CUdeviceptr d, size_t n, CUstream s) {
    COPY_ASYNC(h, d, n, 2, s, gs_cudaMemcpyAsync_ptsz);
}
GS_DRV CUresult gs_cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
    COPY_ASYNC(d, s, n, 3, st, gs_cudaMemcpyAsync);
}
GS_DRV CUresult gs_cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
    COPY_ASYNC(d, s, n, 3, st, gs_cudaMemcpyAsync_ptsz);
}
/* One device: a peer copy is a device-to-device copy (contexts share the session's address space). */
GS_DRV CUresult gs_cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
    if (!gs_drv_ctx_known(dc) || !gs_drv_ctx_known(sc)) return CUDA_ERROR_INVALID_CONTEXT;
    COPY(d, s, n, 4, gs_cudaMemcpy);
}
GS_DRV CUresult gs_cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st) {
    if (!gs_drv_ctx_known(dc) || !gs_drv_ctx_known(sc)) return CUDA_ERROR_INVALID_CONTEXT;
    COPY_ASYNC(d, s, n, 4, st, gs_cudaMemcpyAsync);
}
GS_DRV CUresult gs_cuMemcpyPeer_ptds(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
    if (!gs_drv_ctx_known(dc) || !gs_drv_ctx_known(sc)) return CUDA_ERROR_INVALID_CONTEXT;
    COPY(d, s, n, 4, gs_cudaMemcpy_ptds);
}
GS_DRV CUresult gs_cuMemcpyPeerAsync_ptsz(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n,
                                         CUstream st) {
    if (!gs_drv_ctx_known(dc) || !gs_drv_ctx_known(sc)) return CUDA_ERROR_INVALID_CONTEXT;
    COPY_ASYNC(d, s, n, 4, st, gs_cudaMemcpyAsync_ptsz);
}

/* CUDA_MEMCPY2D and CUDA_MEMCPY3D (cuda.h; the same layout since CUDA 3.2). */
typedef struct {
    size_t srcXInBytes, srcY;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    void *srcArray;
    size_t srcPitch;
    size_t dstXInBytes, dstY;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    void *dstArray;
    size_t dstPitch;
    size_t WidthInBytes, Height;
} drv_memcpy2d;

typedef struct {
    size_t srcXInBytes, srcY, srcZ, srcLOD;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    void *srcArray;
    void *reserved0;
    size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    void *dstArray;
    void *reserved1;
    size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} drv_memcpy3d;

/* The start address of one side of a copy, and whether it is on the device. A CUDA array is device memory
 * with a packed layout (api_texture.c): its pitch and rows per slice replace the caller's (*pitch, *rows). */
static CUresult side(int type, const void *host, CUdeviceptr dev, void *array, uintptr_t *addr, int *on_device,
                     size_t *pitch, size_t *rows) {
    void *base;
    size_t elem;
    switch (type) {
    case MT_HOST: *addr = (uintptr_t)host; *on_device = 0; return CUDA_SUCCESS;
    case MT_DEVICE: *addr = (uintptr_t)dev; *on_device = 1; return CUDA_SUCCESS;
    case MT_UNIFIED: *addr = (uintptr_t)dev; *on_device = -1; return CUDA_SUCCESS;
    case MT_ARRAY:
        if (!gs_array_layout(array, &base, pitch, rows, &elem)) return CUDA_ERROR_INVALID_VALUE;
        *addr = (uintptr_t)base;
        *on_device = 1;
        return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* An array side must hold the copied box: x + width within a row, y + height within its rows. */
static int array_fits(int type, size_t x, size_t y, size_t width, size_t height, size_t pitch, size_t rows) {
    return type != MT_ARRAY || (x + width <= pitch && y + height <= rows);
}

static int copy_kind(int src_dev, int dst_dev) {
    if (src_dev < 0 || dst_dev < 0) return cudaMemcpyDefault;
    return src_dev ? (dst_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                   : (dst_dev ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
}

/* 2D copy of height rows; async with stream s when async, per-thread default stream when ptds. */
static CUresult copy_2d(uintptr_t dst, size_t dpitch, uintptr_t src, size_t spitch, size_t width, size_t height,
                        int kind, CUstream s, int async, int ptds) {
    cudaError_t (*sync_fn)(void *, size_t, const void *, size_t, size_t, size_t, int) =
        ptds ? gs_cudaMemcpy2D_ptds : gs_cudaMemcpy2D;
    cudaError_t (*async_fn)(void *, size_t, const void *, size_t, size_t, size_t, int, cudaStream_t) =
        ptds ? gs_cudaMemcpy2DAsync_ptsz : gs_cudaMemcpy2DAsync;
    if (async) return GS_DRV_CALL(async_fn((void *)dst, dpitch, (const void *)src, spitch, width, height, kind, s));
    return GS_DRV_CALL(sync_fn((void *)dst, dpitch, (const void *)src, spitch, width, height, kind));
}

static CUresult memcpy_2d(const drv_memcpy2d *p, CUstream s, int async, int ptds) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    uintptr_t src, dst;
    int sd, dd;
    size_t spitch = p->srcPitch ? p->srcPitch : p->WidthInBytes, dpitch = p->dstPitch ? p->dstPitch : p->WidthInBytes;
    size_t srows = (size_t)-1, drows = (size_t)-1;
    CUresult r = side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, &src, &sd, &spitch, &srows);
    if (!r) r = side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, &dst, &dd, &dpitch, &drows);
    if (r) return r;
    if (!array_fits(p->srcMemoryType, p->srcXInBytes, p->srcY, p->WidthInBytes, p->Height, spitch, srows) ||
        !array_fits(p->dstMemoryType, p->dstXInBytes, p->dstY, p->WidthInBytes, p->Height, dpitch, drows))
        return CUDA_ERROR_INVALID_VALUE;
    src += p->srcY * spitch + p->srcXInBytes;
    dst += p->dstY * dpitch + p->dstXInBytes;
    return copy_2d(dst, dpitch, src, spitch, p->WidthInBytes, p->Height, copy_kind(sd, dd), s, async, ptds);
}

GS_DRV CUresult gs_cuMemcpy2D_v2(const drv_memcpy2d *p) { return memcpy_2d(p, NULL, 0, 0); }
GS_DRV CUresult gs_cuMemcpy2D_v2_ptds(const drv_memcpy2d *p) { return memcpy_2d(p, NULL, 0, 1); }
GS_DRV CUresult gs_cuMemcpy2DUnaligned_v2(const drv_memcpy2d *p) { return memcpy_2d(p, NULL, 0, 0); }
GS_DRV CUresult gs_cuMemcpy2DUnaligned_v2_ptds(const drv_memcpy2d *p) { return memcpy_2d(p, NULL, 0, 1); }
GS_DRV CUresult gs_cuMemcpy2DAsync_v2(const drv_memcpy2d *p, CUstream s) { return memcpy_2d(p, s, 1, 0); }
GS_DRV CUresult gs_cuMemcpy2DAsync_v2_ptsz(const drv_memcpy2d *p, CUstream s) { return memcpy_2d(p, s, 1, 1); }

static CUresult memcpy_3d(const drv_memcpy3d *p, CUstream s, int async, int ptds) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    if (p->srcLOD || p->dstLOD) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t src, dst;
    int sd, dd;
    size_t spitch = p->srcPitch ? p->srcPitch : p->WidthInBytes, dpitch = p->dstPitch ? p->dstPitch : p->WidthInBytes;
    size_t sheight = p->srcHeight ? p->srcHeight : p->Height, dheight = p->dstHeight ? p->dstHeight : p->Height;
    CUresult r = side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, &src, &sd, &spitch, &sheight);
    if (!r) r = side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, &dst, &dd, &dpitch, &dheight);
    if (r) return r;
    if (!array_fits(p->srcMemoryType, p->srcXInBytes, p->srcY, p->WidthInBytes, p->Height, spitch, sheight) ||
        !array_fits(p->dstMemoryType, p->dstXInBytes, p->dstY, p->WidthInBytes, p->Height, dpitch, dheight))
        return CUDA_ERROR_INVALID_VALUE;
    int kind = copy_kind(sd, dd);
    for (size_t z = 0; z < p->Depth && !r; z++) { /* one 2D copy per slice, in order on the stream */
        uintptr_t s0 = src + ((p->srcZ + z) * sheight + p->srcY) * spitch + p->srcXInBytes;
        uintptr_t d0 = dst + ((p->dstZ + z) * dheight + p->dstY) * dpitch + p->dstXInBytes;
        r = copy_2d(d0, dpitch, s0, spitch, p->WidthInBytes, p->Height, kind, s, async, ptds);
    }
    return r;
}

GS_DRV CUresult gs_cuMemcpy3D_v2(const drv_memcpy3d *p) { return memcpy_3d(p, NULL, 0, 0); }
GS_DRV CUresult gs_cuMemcpy3D_v2_ptds(const drv_memcpy3d *p) { return memcpy_3d(p, NULL, 0, 1); }
GS_DRV CUresult gs_cuMemcpy3DAsync_v2(const drv_memcpy3d *p, CUstream s) { return memcpy_3d(p, s, 1, 0); }
GS_DRV CUresult gs_cuMemcpy3DAsync_v2_ptsz(const drv_memcpy3d *p, CUstream s) { return memcpy_3d(p, s, 1, 1); }

/* ---- memsets: 8-bit values (and wider ones whose bytes are all equal) are the runtime's byte memset;
 * other 16/32-bit patterns go to the server as MEMSET_WIDE ---- */

static CUresult memset_wide(CUdeviceptr d, size_t pitch, unsigned value, size_t width, size_t height, int elem,
                            CUstream s, int async, int ptds) {
    DRV_ENTER();
    if (!width || !height) return CUDA_SUCCESS;
    unsigned byte = value & 0xff;
    int uniform = elem == 1 || (elem == 2 && (value & 0xffff) == byte * 0x101u) ||
                  (elem == 4 && value == byte * 0x01010101u);
    size_t row = width * (size_t)elem;
    if (uniform) {
        if (height == 1 && !async) return GS_DRV_CALL((ptds ? gs_cudaMemset_ptds : gs_cudaMemset)(PTR(d), (int)byte, row));
        if (height == 1) return GS_DRV_CALL((ptds ? gs_cudaMemsetAsync_ptsz : gs_cudaMemsetAsync)(PTR(d), (int)byte, row, s));
        if (!async) return GS_DRV_CALL((ptds ? gs_cudaMemset2D_ptds : gs_cudaMemset2D)(PTR(d), pitch, (int)byte, row, height));
        return GS_DRV_CALL((ptds ? gs_cudaMemset2DAsync_ptsz : gs_cudaMemset2DAsync)(PTR(d), pitch, (int)byte, row, height, s));
    }
    if ((uintptr_t)d % (uintptr_t)elem || (height > 1 && pitch % (size_t)elem) || (height > 1 && pitch < row))
        return CUDA_ERROR_INVALID_VALUE;
    cudaError_t e = gs_check_device_range(PTR(d), height > 1 ? pitch * (height - 1) + row : row);
    if (e) return gs_drv_err(e);
    uint64_t stream;
    e = gs_stream_handle(s, ptds, &stream);
    if (e) return gs_drv_err(e);
    gs_call c;
    gs_call_begin(&c, GS_OP_MEMSET_WIDE, 7);
    gs_w_uint(c.w, d);
    gs_w_uint(c.w, height > 1 ? pitch : row);
    gs_w_uint(c.w, value);
    gs_w_uint(c.w, width);
    gs_w_uint(c.w, height);
    gs_w_uint(c.w, (uint64_t)elem);
    gs_w_uint(c.w, stream);
    if (gs_capture_record(stream, &c, &e)) return gs_drv_err(e); /* a stream being captured records it */
    if (async) return gs_drv_err(gs_call_post(&c));
    e = gs_call_run(&c); /* like CUDA's memsets of device memory, it need not be complete on return */
    gs_call_end(&c);
    return gs_drv_err(e);
}

GS_DRV CUresult gs_cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
    return memset_wide(d, 0, v, n, 1, 1, NULL, 0, 0);
}
GS_DRV CUresult gs_cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n) {
    return memset_wide(d, 0, v, n, 1, 1, NULL, 0, 1);
}
GS_DRV CUresult gs_cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
    return memset_wide(d, 0, v, n, 1, 1, s, 1, 0);
}
GS_DRV CUresult gs_cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
    return memset_wide(d, 0, v, n, 1, 1, s, 1, 1);
}
GS_DRV CUresult gs_cuMemsetD2D8_v2(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h) {
    return memset_wide(d, p, v, w, h, 1, NULL, 0, 0);
}
GS_DRV CUresult gs_cuMemsetD2D8_v2_ptds(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h) {
    return memset_wide(d, p, v, w, h, 1, NULL, 0, 1);
}
GS_DRV CUresult gs_cuMemsetD2D8Async(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream s) {
    return memset_wide(d, p, v, w, h, 1, s, 1, 0);
}
GS_DRV CUresult gs_cuMemsetD2D8Async_ptsz(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream s) {
    return memset_wide(d, p, v, w, h, 1, s, 1, 1);
}
GS_DRV CUresult gs_cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) {
    return memset_wide(d, 0, v, n, 1, 2, NULL, 0, 0);
}
GS_DRV CUresult gs_cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n) {
    return memset_wide(d, 0, v, n, 1, 2, NULL, 0, 1);
}
GS_DRV CUresult gs_cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) {
    return memset_wide(d, 0, v, n, 1, 2, s, 1, 0);
}
GS_DRV CUresult gs_cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short v, size_t n, CUstream s) {
    return memset_wide(d, 0, v, n, 1, 2, s, 1, 1);
}
GS_DRV CUresult gs_cuMemsetD2D16_v2(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h) {
    return memset_wide(d, p, v, w, h, 2, NULL, 0, 0);
}
GS_DRV CUresult gs_cuMemsetD2D16_v2_ptds(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h) {
    return memset_wide(d, p, v, w, h, 2, NULL, 0, 1);
}
GS_DRV CUresult gs_cuMemsetD2D16Async(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, CUstream s) {
    return memset_wide(d, p, v, w, h, 2, s, 1, 0);
}
GS_DRV CUresult gs_cuMemsetD2D16Async_ptsz(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, CUstream s) {
    return memset_wide(d, p, v, w, h, 2, s, 1, 1);
}
GS_DRV CUresult gs_cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n) {
    return memset_wide(d, 0, v, n, 1, 4, NULL, 0, 0);
}
GS_DRV CUresult gs_cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned v, size_t n) {
    return memset_wide(d, 0, v, n, 1, 4, NULL, 0, 1);
}
GS_DRV CUresult gs_cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream s) {
    return memset_wide(d, 0, v, n, 1, 4, s, 1, 0);
}
GS_DRV CUresult gs_cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned v, size_t n, CUstream s) {
    return memset_wide(d, 0, v, n, 1, 4, s, 1, 1);
}
GS_DRV CUresult gs_cuMemsetD2D32_v2(CUdeviceptr d, size_t p, unsigned v, size_t w, size_t h) {
    return memset_wide(d, p, v, w, h, 4, NULL, 0, 0);
}
GS_DRV CUresult gs_cuMemsetD2D32_v2_ptds(CUdeviceptr d, size_t p, unsigned v, size_t w, size_t h) {
    return memset_wide(d, p, v, w, h, 4, NULL, 0, 1);
}
GS_DRV CUresult gs_cuMemsetD2D32Async(CUdeviceptr d, size_t p, unsigned v, size_t w, size_t h, CUstream s) {
    return memset_wide(d, p, v, w, h, 4, s, 1, 0);
}
GS_DRV CUresult gs_cuMemsetD2D32Async_ptsz(CUdeviceptr d, size_t p, unsigned v, size_t w, size_t h, CUstream s) {
    return memset_wide(d, p, v, w, h, 4, s, 1, 1);
}

/* ---- memory pools: each device's default pool is the runtime's stream-ordered allocator ---- */

typedef struct {
    uint32_t magic;
    int device;
    int reuse[3];          /* CU_MEMPOOL_ATTR_REUSE_* (1..3) */
    uint64_t threshold;    /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */
    uint64_t high[2];      /* reserved / used high watermarks, reset by setting them to 0 */
} drv_pool;
#define POOL_MAGIC 0x4c4f4f50u /* "POOL" */
static drv_pool pools[GS_MAX_DEVICES];

static drv_pool *default_pool(int dev) {
    drv_pool *p = &pools[dev];
    if (!p->magic) *p = (drv_pool){.magic = POOL_MAGIC, .device = dev, .reuse = {1, 1, 1}};
    return p;
}
static drv_pool *as_pool(void *h) {
    drv_pool *p = h;
    return p >= pools && p < pools + GS_MAX_DEVICES && p->magic == POOL_MAGIC ? p : NULL;
}

GS_DRV CUresult gs_cuDeviceGetDefaultMemPool(drv_pool **pool, CUdevice dev) {
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    int n = 0;
    DRV_ENTER();
    CUresult r = gs_drv_err(gs_device_count(&n));
    if (r) return r;
    if (dev < 0 || dev >= n || dev >= GS_MAX_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
    *pool = default_pool(dev);
    return CUDA_SUCCESS;
}
GS_DRV CUresult gs_cuDeviceGetMemPool(drv_pool **pool, CUdevice dev) { return gs_cuDeviceGetDefaultMemPool(pool, dev); }
GS_DRV CUresult gs_cuDeviceSetMemPool(CUdevice dev, drv_pool *pool) {
    drv_pool *p = as_pool(pool);
    if (!p || p->device != dev) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS; /* only the default pool exists */
}

GS_DRV CUresult gs_cuMemPoolGetAttribute(drv_pool *pool, int attr, void *value) {
    drv_pool *p = as_pool(pool);
    if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    uint64_t used = 0;
    if (attr >= 5) {
        size_t free_b = 0, total = 0;
        CUresult r = GS_DRV_CALL(gs_cudaMemGetInfo(&free_b, &total));
        if (r) return r;
        used = total - free_b; /* the session's device memory: the pool is the device's whole allocator */
    }
    switch (attr) {
    case 1: case 2: case 3: *(int *)value = p->reuse[attr - 1]; return CUDA_SUCCESS;
    case 4: *(uint64_t *)value = p->threshold; return CUDA_SUCCESS;
    case 5: case 7: *(uint64_t *)value = used; return CUDA_SUCCESS;
    case 6: case 8:
        if (used > p->high[attr == 8]) p->high[attr == 8] = used;
        *(uint64_t *)value = p->high[attr == 8];
        return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

GS_DRV CUresult gs_cuMemPoolSetAttribute(drv_pool *pool, int attr, void *value) {
    drv_pool *p = as_pool(pool);
    if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case 1: case 2: case 3: p->reuse[attr - 1] = *(int *)value != 0; return CUDA_SUCCESS;
    case 4: p->threshold = *(uint64_t *)value; return CUDA_SUCCESS;
    case 6: case 8:
        if (*(uint64_t *)value) return CUDA_ERROR_INVALID_VALUE; /* high watermarks can only be reset */
        p->high[attr == 8] = 0;
        return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Freed stream-ordered memory goes back to the server at once: there is nothing to trim. */
GS_DRV CUresult gs_cuMemPoolTrimTo(drv_pool *pool, size_t keep) {
    (void)keep;
    return as_pool(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Every device of the session reads and writes the default pool's memory. */
GS_DRV CUresult gs_cuMemPoolSetAccess(drv_pool *pool, const void *descs, size_t count) {
    if (!as_pool(pool) || (count && !descs)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}
GS_DRV CUresult gs_cuMemPoolGetAccess(int *flags, drv_pool *pool, const void *location) {
    if (!flags || !as_pool(pool) || !location) return CUDA_ERROR_INVALID_VALUE;
    *flags = 3; /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE */
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t n, drv_pool *pool, CUstream s) {
    drv_pool *p = as_pool(pool);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    int dev;
    CUresult r = gs_drv_enter(&dev);
    if (r) return r;
    if (p->device != dev) return CUDA_ERROR_INVALID_VALUE;
    return gs_cuMemAllocAsync(dptr, n, s);
}
GS_DRV CUresult gs_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t n, drv_pool *pool, CUstream s) {
    drv_pool *p = as_pool(pool);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    int dev;
    CUresult r = gs_drv_enter(&dev);
    if (r) return r;
    if (p->device != dev) return CUDA_ERROR_INVALID_VALUE;
    return gs_cuMemAllocAsync_ptsz(dptr, n, s);
}
