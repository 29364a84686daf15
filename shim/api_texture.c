/* CUDA arrays, texture objects and surface objects; profiler calls.
 * An array is device memory with a packed layout: element (x, y, z) at base + ((z * rows) + y) * pitch +
 * x * elemsize, pitch = width * elemsize, z the depth or the layer (cubemap faces are layers); its
 * cudaArray_t is that base address, and copies to and from it are pitched 2D copies. Texture and surface
 * objects are descriptors the server keeps in device memory (gpushim/ptx/texdesc.py); the handle is their
 * address, which kernels pass to tex/suld/sust. The client keeps the descriptions it was given, for the
 * cudaGet*Object*Desc queries. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gs_api.h"

#define cudaErrorInvalidChannelDescriptor 20
#define cudaErrorInvalidTexture 18
#define ARRAY_LAYERED 1u
#define ARRAY_SURFACE_LOAD_STORE 2u
#define ARRAY_CUBEMAP 4u
#define ARRAY_TEXTURE_GATHER 8u
#define RES_ARRAY 0
#define RES_MIPMAP 1
#define RES_LINEAR 2
#define RES_PITCH2D 3
#define DESC_FLAG_LAYERED 1u /* texdesc.FLAG_* */
#define DESC_FLAG_CUBEMAP 2u
#define DESC_FLAG_3D 4u
#define DESC_FLAG_1D 8u /* for the cuda backend's mirror CUarray: a 1D array, and the array's flags */
#define DESC_FLAG_SURFACE_LDST 16u
#define DESC_FLAG_GATHER 32u

typedef struct { int x, y, z, w, f; } gs_channel_desc; /* cudaChannelFormatDesc */
typedef struct { size_t width, height, depth; } gs_extent; /* cudaExtent */

/* ---- profiler: no profiler runs under gpushim; starting and stopping it succeed and do nothing ---- */

GS_IMPL cudaError_t gs_cudaProfilerStart(void) { return cudaSuccess; }
GS_IMPL cudaError_t gs_cudaProfilerStop(void) { return cudaSuccess; }

/* ---- the client's tables ---- */

typedef struct gs_array {
    uint64_t base;
    gs_channel_desc desc;
    gs_extent extent; /* as given */
    unsigned flags;
    size_t elem, pitch, rows, slices;
    struct gs_array *next;
} gs_array;

typedef struct gs_texobj {
    uint64_t handle;
    int surface;
    unsigned char res[64], tex[64]; /* the caller's cudaResourceDesc and cudaTextureDesc (stable prefixes) */
    struct gs_texobj *next;
} gs_texobj;

static pthread_mutex_t tables_lock = PTHREAD_MUTEX_INITIALIZER;
static gs_array *arrays;
static gs_texobj *objects;

static int find_array(const void *a, gs_array *out) {
    int found = 0;
    pthread_mutex_lock(&tables_lock);
    for (gs_array *p = arrays; p; p = p->next)
        if (p->base == (uintptr_t)a) { *out = *p; found = 1; break; }
    pthread_mutex_unlock(&tables_lock);
    return found;
}

/* Pitched view of an array, for cudaMemcpy3D in api_memory.c: 0 if a is not an array. */
int gs_array_layout(const void *a, void **base, size_t *pitch, size_t *rows, size_t *elem) {
    gs_array r;
    if (!a || !find_array(a, &r)) return 0;
    *base = (void *)(uintptr_t)r.base;
    *pitch = r.pitch;
    *rows = r.rows;
    *elem = r.elem;
    return 1;
}

/* ---- channel descriptions ---- */

GS_IMPL gs_channel_desc gs_cudaCreateChannelDesc(int x, int y, int z, int w, int f) {
    return (gs_channel_desc){x, y, z, w, f};
}

/* channels, bits per channel and element size of a description gpushim can store, else an error */
static cudaError_t channel_format(const gs_channel_desc *d, int *channels, int *bits) {
    if (!d) return cudaErrorInvalidValue;
    int b[4] = {d->x, d->y, d->z, d->w}, n = 0;
    while (n < 4 && b[n] > 0) n++;
    for (int i = n; i < 4; i++)
        if (b[i] != 0) return cudaErrorInvalidChannelDescriptor;
    if (n == 0 || n == 3) return cudaErrorInvalidChannelDescriptor;
    for (int i = 1; i < n; i++)
        if (b[i] != b[0]) return cudaErrorInvalidChannelDescriptor;
    if (b[0] != 8 && b[0] != 16 && b[0] != 32) return cudaErrorInvalidChannelDescriptor;
    if (d->f < 0 || d->f > 2) {
        gs_warn_once("channelfmt", "gpushim supports signed, unsigned and float channel formats, not kind %d", d->f);
        return cudaErrorNotSupported;
    }
    if (d->f == 2 && b[0] == 8) return cudaErrorInvalidChannelDescriptor;
    *channels = n;
    *bits = b[0];
    return cudaSuccess;
}

/* ---- arrays ---- */

static cudaError_t array_create(void **out, const gs_channel_desc *desc, gs_extent ext, unsigned flags) {
    if (!out || !desc) return gs_ret(cudaErrorInvalidValue);
    int ch, bits;
    cudaError_t e = channel_format(desc, &ch, &bits);
    if (e) return gs_ret(e);
    if (flags & ~(ARRAY_LAYERED | ARRAY_SURFACE_LOAD_STORE | ARRAY_CUBEMAP | ARRAY_TEXTURE_GATHER))
        return gs_ret(cudaErrorInvalidValue);
    if (!ext.width) return gs_ret(cudaErrorInvalidValue);
    if (ext.depth && !ext.height && !(flags & ARRAY_LAYERED)) return gs_ret(cudaErrorInvalidValue);
    if (flags & ARRAY_CUBEMAP) {
        /* Programming Guide, "Cubemap Textures": width == height, depth 6 (6 * layers when layered) */
        if (ext.width != ext.height || !ext.depth || ext.depth % 6 || (!(flags & ARRAY_LAYERED) && ext.depth != 6))
            return gs_ret(cudaErrorInvalidValue);
    }
    if ((flags & ARRAY_LAYERED) && !ext.depth) return gs_ret(cudaErrorInvalidValue);
    gs_array a = {0};
    a.desc = *desc;
    a.extent = ext;
    a.flags = flags;
    a.elem = (size_t)ch * (size_t)bits / 8;
    a.pitch = ext.width * a.elem;
    a.rows = ext.height ? ext.height : 1;
    a.slices = ext.depth ? ext.depth : 1;
    void *p = NULL;
    e = gs_cudaMalloc(&p, a.pitch * a.rows * a.slices);
    if (e) return e;
    a.base = (uintptr_t)p;
    gs_array *n = malloc(sizeof *n);
    if (!n) { gs_cudaFree(p); return gs_ret(cudaErrorMemoryAllocation); }
    *n = a;
    pthread_mutex_lock(&tables_lock);
    n->next = arrays;
    arrays = n;
    pthread_mutex_unlock(&tables_lock);
    *out = p;
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaMallocArray(void **arr, const gs_channel_desc *desc, size_t w, size_t h, unsigned flags) {
    if (flags & (ARRAY_LAYERED | ARRAY_CUBEMAP)) return gs_ret(cudaErrorInvalidValue);
    return array_create(arr, desc, (gs_extent){w, h, 0}, flags);
}

GS_IMPL cudaError_t gs_cudaMalloc3DArray(void **arr, const gs_channel_desc *desc, gs_extent ext, unsigned flags) {
    return array_create(arr, desc, ext, flags);
}

/* cudaFree without its refusal of arrays */
static cudaError_t free_device(void *p) {
    gs_call c;
    gs_call_begin(&c, GS_OP_FREE, 1);
    gs_w_uint(c.w, (uintptr_t)p);
    cudaError_t e = gs_call_run(&c);
    gs_call_end(&c);
    if (!e) gs_ranges_remove((uintptr_t)p, cudaMemoryTypeDevice, NULL);
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaFreeArray(void *arr) {
    GS_ENTER();
    if (!arr) return cudaSuccess;
    gs_array *found = NULL;
    pthread_mutex_lock(&tables_lock);
    for (gs_array **p = &arrays; *p; p = &(*p)->next)
        if ((*p)->base == (uintptr_t)arr) { found = *p; *p = found->next; break; }
    pthread_mutex_unlock(&tables_lock);
    if (!found) return gs_ret(cudaErrorInvalidValue);
    free(found);
    return free_device(arr);
}

GS_IMPL cudaError_t gs_cudaArrayGetInfo(gs_channel_desc *desc, gs_extent *ext, unsigned *flags, void *arr) {
    gs_array a;
    if (!find_array(arr, &a)) return gs_ret(cudaErrorInvalidValue);
    if (desc) *desc = a.desc;
    if (ext) *ext = a.extent;
    if (flags) *flags = a.flags;
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaGetChannelDesc(gs_channel_desc *desc, const void *arr) {
    gs_array a;
    if (!desc || !find_array(arr, &a)) return gs_ret(cudaErrorInvalidValue);
    *desc = a.desc;
    return cudaSuccess;
}

/* ---- copies to and from arrays (offsets: wOffset in bytes, hOffset in rows of the first layer) ---- */

static cudaError_t array_span(const void *arr, size_t woff, size_t hoff, size_t width, size_t height,
                              gs_array *a, char **at) {
    if (!find_array(arr, a)) return cudaErrorInvalidValue;
    if (woff + width > a->pitch || hoff + height > a->rows) return cudaErrorInvalidValue;
    *at = (char *)(uintptr_t)a->base + hoff * a->pitch + woff;
    return cudaSuccess;
}

static cudaError_t to_array(void *dst, size_t wo, size_t ho, const void *src, size_t sp, size_t w, size_t h, int kind,
                            cudaStream_t s, int ptds, int async) {
    gs_array a;
    char *at;
    cudaError_t e = array_span(dst, wo, ho, w, h, &a, &at);
    if (e) return gs_ret(e);
    if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost) return gs_ret(cudaErrorInvalidMemcpyDirection);
    return memcpy2d_any(at, a.pitch, src, sp, w, h, kind, s, ptds, async);
}

static cudaError_t from_array(void *dst, size_t dp, const void *src, size_t wo, size_t ho, size_t w, size_t h, int kind,
                              cudaStream_t s, int ptds, int async) {
    gs_array a;
    char *at;
    cudaError_t e = array_span(src, wo, ho, w, h, &a, &at);
    if (e) return gs_ret(e);
    if (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost) return gs_ret(cudaErrorInvalidMemcpyDirection);
    return memcpy2d_any(dst, dp, at, a.pitch, w, h, kind, s, ptds, async);
}

GS_IMPL cudaError_t gs_cudaMemcpy2DToArray(void *d, size_t wo, size_t ho, const void *s, size_t sp, size_t w, size_t h,
                                           int k) {
    return to_array(d, wo, ho, s, sp, w, h, k, NULL, 0, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpy2DToArray_ptds(void *d, size_t wo, size_t ho, const void *s, size_t sp, size_t w,
                                                size_t h, int k) {
    return to_array(d, wo, ho, s, sp, w, h, k, NULL, 1, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpy2DToArrayAsync(void *d, size_t wo, size_t ho, const void *s, size_t sp, size_t w,
                                                size_t h, int k, cudaStream_t st) {
    return to_array(d, wo, ho, s, sp, w, h, k, st, 0, 1);
}
GS_IMPL cudaError_t gs_cudaMemcpy2DToArrayAsync_ptsz(void *d, size_t wo, size_t ho, const void *s, size_t sp, size_t w,
                                                     size_t h, int k, cudaStream_t st) {
    return to_array(d, wo, ho, s, sp, w, h, k, st, 1, 1);
}
GS_IMPL cudaError_t gs_cudaMemcpy2DFromArray(void *d, size_t dp, const void *s, size_t wo, size_t ho, size_t w,
                                             size_t h, int k) {
    return from_array(d, dp, s, wo, ho, w, h, k, NULL, 0, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpy2DFromArray_ptds(void *d, size_t dp, const void *s, size_t wo, size_t ho, size_t w,
                                                  size_t h, int k) {
    return from_array(d, dp, s, wo, ho, w, h, k, NULL, 1, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpy2DFromArrayAsync(void *d, size_t dp, const void *s, size_t wo, size_t ho, size_t w,
                                                  size_t h, int k, cudaStream_t st) {
    return from_array(d, dp, s, wo, ho, w, h, k, st, 0, 1);
}
GS_IMPL cudaError_t gs_cudaMemcpy2DFromArrayAsync_ptsz(void *d, size_t dp, const void *s, size_t wo, size_t ho,
                                                       size_t w, size_t h, int k, cudaStream_t st) {
    return from_array(d, dp, s, wo, ho, w, h, k, st, 1, 1);
}

/* The deprecated 1D forms: count bytes from (wOffset, hOffset) on, through the packed rows. */
static cudaError_t linear_array(const void *arr, size_t wo, size_t ho, size_t count, char **at) {
    gs_array a;
    if (!find_array(arr, &a)) return cudaErrorInvalidValue;
    size_t start = ho * a.pitch + wo, total = a.pitch * a.rows * a.slices;
    if (wo >= a.pitch || start > total || count > total - start) return cudaErrorInvalidValue;
    *at = (char *)(uintptr_t)a.base + start;
    return cudaSuccess;
}

static cudaError_t to_array_1d(void *d, size_t wo, size_t ho, const void *s, size_t n, int k, cudaStream_t st,
                               int ptds, int async) {
    char *at;
    cudaError_t e = linear_array(d, wo, ho, n, &at);
    if (e) return gs_ret(e);
    return gs_memcpy(at, s, n, k, st, ptds, async);
}

static cudaError_t from_array_1d(void *d, const void *s, size_t wo, size_t ho, size_t n, int k, cudaStream_t st,
                                 int ptds, int async) {
    char *at;
    cudaError_t e = linear_array(s, wo, ho, n, &at);
    if (e) return gs_ret(e);
    return gs_memcpy(d, at, n, k, st, ptds, async);
}

GS_IMPL cudaError_t gs_cudaMemcpyToArray(void *d, size_t wo, size_t ho, const void *s, size_t n, int k) {
    return to_array_1d(d, wo, ho, s, n, k, NULL, 0, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpyToArray_ptds(void *d, size_t wo, size_t ho, const void *s, size_t n, int k) {
    return to_array_1d(d, wo, ho, s, n, k, NULL, 1, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpyToArrayAsync(void *d, size_t wo, size_t ho, const void *s, size_t n, int k,
                                              cudaStream_t st) {
    return to_array_1d(d, wo, ho, s, n, k, st, 0, 1);
}
GS_IMPL cudaError_t gs_cudaMemcpyToArrayAsync_ptsz(void *d, size_t wo, size_t ho, const void *s, size_t n, int k,
                                                   cudaStream_t st) {
    return to_array_1d(d, wo, ho, s, n, k, st, 1, 1);
}
GS_IMPL cudaError_t gs_cudaMemcpyFromArray(void *d, const void *s, size_t wo, size_t ho, size_t n, int k) {
    return from_array_1d(d, s, wo, ho, n, k, NULL, 0, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpyFromArray_ptds(void *d, const void *s, size_t wo, size_t ho, size_t n, int k) {
    return from_array_1d(d, s, wo, ho, n, k, NULL, 1, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpyFromArrayAsync(void *d, const void *s, size_t wo, size_t ho, size_t n, int k,
                                                cudaStream_t st) {
    return from_array_1d(d, s, wo, ho, n, k, st, 0, 1);
}
GS_IMPL cudaError_t gs_cudaMemcpyFromArrayAsync_ptsz(void *d, const void *s, size_t wo, size_t ho, size_t n, int k,
                                                     cudaStream_t st) {
    return from_array_1d(d, s, wo, ho, n, k, st, 1, 1);
}

/* Array to array: device to device (the kind may only be that or cudaMemcpyDefault). */
static cudaError_t array_to_array(void *d, size_t wd, size_t hd, const void *s, size_t ws, size_t hs, size_t w,
                                  size_t h, int kind, int ptds) {
    gs_array da, sa;
    char *dat, *sat;
    cudaError_t e = array_span(d, wd, hd, w, h, &da, &dat);
    if (!e) e = array_span(s, ws, hs, w, h, &sa, &sat);
    if (e) return gs_ret(e);
    if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault) return gs_ret(cudaErrorInvalidMemcpyDirection);
    return memcpy2d_any(dat, da.pitch, sat, sa.pitch, w, h, cudaMemcpyDeviceToDevice, NULL, ptds, 0);
}

GS_IMPL cudaError_t gs_cudaMemcpy2DArrayToArray(void *d, size_t wd, size_t hd, const void *s, size_t ws, size_t hs,
                                                size_t w, size_t h, int k) {
    return array_to_array(d, wd, hd, s, ws, hs, w, h, k, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpy2DArrayToArray_ptds(void *d, size_t wd, size_t hd, const void *s, size_t ws,
                                                     size_t hs, size_t w, size_t h, int k) {
    return array_to_array(d, wd, hd, s, ws, hs, w, h, k, 1);
}

static cudaError_t array_to_array_1d(void *d, size_t wd, size_t hd, const void *s, size_t ws, size_t hs, size_t n,
                                     int kind, int ptds) {
    char *dat, *sat;
    cudaError_t e = linear_array(d, wd, hd, n, &dat);
    if (!e) e = linear_array(s, ws, hs, n, &sat);
    if (e) return gs_ret(e);
    if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault) return gs_ret(cudaErrorInvalidMemcpyDirection);
    return gs_memcpy(dat, sat, n, cudaMemcpyDeviceToDevice, NULL, ptds, 0);
}

GS_IMPL cudaError_t gs_cudaMemcpyArrayToArray(void *d, size_t wd, size_t hd, const void *s, size_t ws, size_t hs,
                                              size_t n, int k) {
    return array_to_array_1d(d, wd, hd, s, ws, hs, n, k, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpyArrayToArray_ptds(void *d, size_t wd, size_t hd, const void *s, size_t ws, size_t hs,
                                                   size_t n, int k) {
    return array_to_array_1d(d, wd, hd, s, ws, hs, n, k, 1);
}

/* ---- texture and surface objects ---- */

static uint64_t rd_u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static int rd_i32(const unsigned char *p) { int v; memcpy(&v, p, 4); return v; }

/* The descriptor fields TEX_CREATE takes (texdesc.Desc from restype on) for a resource and a texture desc. */
static cudaError_t describe(const unsigned char *res, const unsigned char *tex, int surface, uint64_t f[21]) {
    int type = rd_i32(res);
    gs_channel_desc cd;
    int ch, bits;
    cudaError_t e;
    memset(f, 0, 21 * sizeof *f);
    if (type == RES_ARRAY) {
        gs_array a;
        if (!find_array((void *)(uintptr_t)rd_u64(res + 8), &a)) return cudaErrorInvalidResourceHandle;
        if (surface && !(a.flags & ARRAY_SURFACE_LOAD_STORE)) return cudaErrorInvalidValue;
        if ((e = channel_format(&a.desc, &ch, &bits))) return e;
        f[0] = 0;
        f[1] = a.base;
        f[2] = a.pitch;
        f[3] = a.extent.width;
        f[4] = a.rows;
        f[5] = a.slices;
        f[6] = (a.flags & ARRAY_LAYERED ? DESC_FLAG_LAYERED : 0) | (a.flags & ARRAY_CUBEMAP ? DESC_FLAG_CUBEMAP : 0) |
               (a.extent.depth && !(a.flags & (ARRAY_LAYERED | ARRAY_CUBEMAP)) ? DESC_FLAG_3D : 0) |
               (!a.extent.height ? DESC_FLAG_1D : 0) | (a.flags & ARRAY_SURFACE_LOAD_STORE ? DESC_FLAG_SURFACE_LDST : 0) |
               (a.flags & ARRAY_TEXTURE_GATHER ? DESC_FLAG_GATHER : 0);
    } else if (!surface && (type == RES_LINEAR || type == RES_PITCH2D)) {
        memcpy(&cd, res + 16, sizeof cd);
        if ((e = channel_format(&cd, &ch, &bits))) return e;
        size_t es = (size_t)ch * (size_t)bits / 8;
        f[1] = rd_u64(res + 8);
        if (!f[1]) return cudaErrorInvalidValue;
        if (type == RES_LINEAR) {
            f[0] = 1;
            f[3] = rd_u64(res + 40) / es;
            f[2] = f[3] * es;
            f[4] = 1;
        } else {
            f[0] = 2;
            f[3] = rd_u64(res + 40);
            f[4] = rd_u64(res + 48);
            f[2] = rd_u64(res + 56);
        }
        f[5] = 1;
        if (!f[3] || !f[4] || f[2] < f[3] * es) return cudaErrorInvalidValue;
    } else {
        gs_warn_once("restype", "gpushim: resource type %d is not supported for %s objects", type,
                     surface ? "surface" : "texture");
        return type == RES_MIPMAP ? cudaErrorNotSupported : cudaErrorInvalidValue;
    }
    f[7] = (uint64_t)ch;
    f[8] = (uint64_t)bits;
    if (type == RES_ARRAY) {
        gs_array a;
        find_array((void *)(uintptr_t)rd_u64(res + 8), &a);
        f[9] = (uint64_t)a.desc.f;
    } else {
        f[9] = (uint64_t)cd.f;
    }
    if (tex) {
        for (int i = 0; i < 3; i++) {
            int m = rd_i32(tex + 4 * i);
            if (m < 0 || m > 3) return cudaErrorInvalidValue;
            f[10 + i] = (uint64_t)m;
        }
        int filt = rd_i32(tex + 12), read = rd_i32(tex + 16);
        if (filt < 0 || filt > 1 || read < 0 || read > 1) return cudaErrorInvalidValue;
        if (read == 1 && bits == 32 && f[9] != 2) return cudaErrorInvalidValue; /* normalized 32-bit ints */
        f[13] = (uint64_t)filt;
        f[14] = (uint64_t)read;
        f[15] = (uint64_t)(rd_i32(tex + 40) != 0); /* normalizedCoords */
        f[16] = (uint64_t)(rd_i32(tex + 20) != 0); /* sRGB */
        for (int i = 0; i < 4; i++) {
            uint32_t b;
            memcpy(&b, tex + 24 + 4 * i, 4);
            f[17 + i] = b;
        }
    } else {
        f[10] = f[11] = f[12] = 1; /* clamp */
    }
    return cudaSuccess;
}

static cudaError_t object_create(uint64_t *out, const void *res, const void *tex, int surface) {
    if (!out || !res || (!surface && !tex)) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    uint64_t f[21];
    cudaError_t e = describe(res, tex, surface, f);
    if (e) return gs_ret(e);
    gs_call c;
    gs_call_begin(&c, GS_OP_TEX_CREATE, 3);
    gs_w_int(c.w, gs_thread()->device);
    gs_w_int(c.w, surface);
    gs_w_array(c.w, 21);
    for (int i = 0; i < 21; i++) gs_w_uint(c.w, f[i]);
    e = gs_call_run(&c);
    uint64_t h = e ? 0 : gs_u64(&c);
    gs_call_end(&c);
    if (e) return gs_ret(e);
    gs_texobj *o = calloc(1, sizeof *o);
    if (o) {
        o->handle = h;
        o->surface = surface;
        memcpy(o->res, res, sizeof o->res);
        if (tex) memcpy(o->tex, tex, sizeof o->tex);
        pthread_mutex_lock(&tables_lock);
        o->next = objects;
        objects = o;
        pthread_mutex_unlock(&tables_lock);
    }
    *out = h;
    return cudaSuccess;
}

static cudaError_t object_destroy(uint64_t h, int surface) {
    GS_ENTER();
    if (!h) return cudaSuccess;
    gs_texobj *found = NULL;
    pthread_mutex_lock(&tables_lock);
    for (gs_texobj **p = &objects; *p; p = &(*p)->next)
        if ((*p)->handle == h && (*p)->surface == surface) { found = *p; *p = found->next; break; }
    pthread_mutex_unlock(&tables_lock);
    if (!found) return gs_ret(cudaErrorInvalidValue);
    free(found);
    gs_call c;
    gs_call_begin(&c, GS_OP_TEX_DESTROY, 1);
    gs_w_uint(c.w, h);
    cudaError_t e = gs_call_run(&c);
    gs_call_end(&c);
    return gs_ret(e);
}

static cudaError_t object_query(uint64_t h, int surface, void *res, void *tex) {
    if (!res && !tex) return gs_ret(cudaErrorInvalidValue);
    int found = 0;
    pthread_mutex_lock(&tables_lock);
    for (gs_texobj *p = objects; p; p = p->next)
        if (p->handle == h && p->surface == surface) {
            if (res) memcpy(res, p->res, sizeof p->res);
            if (tex) memcpy(tex, p->tex, sizeof p->tex);
            found = 1;
            break;
        }
    pthread_mutex_unlock(&tables_lock);
    return found ? cudaSuccess : gs_ret(cudaErrorInvalidValue);
}

GS_IMPL cudaError_t gs_cudaCreateTextureObject(uint64_t *t, const void *res, const void *tex, const void *view) {
    if (view) {
        gs_warn_once("texview", "gpushim does not support resource views (cudaResourceViewDesc) yet");
        return gs_ret(cudaErrorNotSupported);
    }
    return object_create(t, res, tex, 0);
}
GS_IMPL cudaError_t gs_cudaDestroyTextureObject(uint64_t t) { return object_destroy(t, 0); }
GS_IMPL cudaError_t gs_cudaGetTextureObjectResourceDesc(void *res, uint64_t t) { return object_query(t, 0, res, NULL); }
GS_IMPL cudaError_t gs_cudaGetTextureObjectTextureDesc(void *tex, uint64_t t) { return object_query(t, 0, NULL, tex); }
GS_IMPL cudaError_t gs_cudaCreateSurfaceObject(uint64_t *s, const void *res) { return object_create(s, res, NULL, 1); }
GS_IMPL cudaError_t gs_cudaDestroySurfaceObject(uint64_t s) { return object_destroy(s, 1); }
GS_IMPL cudaError_t gs_cudaGetSurfaceObjectResourceDesc(void *res, uint64_t s) { return object_query(s, 1, res, NULL); }

/* The same calls under the ABIs where cudaTextureDesc or cudaResourceDesc has another size (fields past the
 * stable prefixes this file reads and writes are left as the caller has them). */
GS_IMPL cudaError_t gs_cudaCreateTextureObject__11(uint64_t *t, const void *r, const void *x, const void *v) {
    return gs_cudaCreateTextureObject(t, r, x, v);
}
GS_IMPL cudaError_t gs_cudaCreateTextureObject__13(uint64_t *t, const void *r, const void *x, const void *v) {
    return gs_cudaCreateTextureObject(t, r, x, v);
}
GS_IMPL cudaError_t gs_cudaCreateTextureObject_v2(uint64_t *t, const void *r, const void *x, const void *v) {
    return gs_cudaCreateTextureObject(t, r, x, v);
}
GS_IMPL cudaError_t gs_cudaGetTextureObjectTextureDesc__11(void *x, uint64_t t) { return object_query(t, 0, NULL, x); }
GS_IMPL cudaError_t gs_cudaGetTextureObjectTextureDesc_v2(void *x, uint64_t t) { return object_query(t, 0, NULL, x); }
GS_IMPL cudaError_t gs_cudaGetTextureObjectResourceDesc__13(void *r, uint64_t t) { return object_query(t, 0, r, NULL); }
GS_IMPL cudaError_t gs_cudaCreateSurfaceObject__13(uint64_t *s, const void *r) { return object_create(s, r, NULL, 1); }
GS_IMPL cudaError_t gs_cudaGetSurfaceObjectResourceDesc__13(void *r, uint64_t s) { return object_query(s, 1, r, NULL); }
