/* CUDA arrays, texture and surface objects in the driver face: the driver's descriptors translated to the
 * runtime face's (api_texture.c), which makes the same server calls (TEX_CREATE / TEX_DESTROY) and keeps the
 * same arrays. Copies to and from arrays are cuMemcpy2D/3D's (drv_memory.c).
 *
 * Formats: the 8/16/32-bit signed and unsigned integer formats, half and float, with 1, 2 or 4 channels
 * (the runtime's channel descriptions); other CUarray_format values are CUDA_ERROR_NOT_SUPPORTED, named. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "drv_api.h"

#define TEX_ENTER()                          \
    do {                                     \
        CUresult gs_r_ = gs_drv_enter(NULL); \
        if (gs_r_) return gs_r_;             \
    } while (0)

/* CUarray_format */
enum { AD_U8 = 0x01, AD_U16 = 0x02, AD_U32 = 0x03, AD_S8 = 0x08, AD_S16 = 0x09, AD_S32 = 0x0a, AD_HALF = 0x10,
       AD_FLOAT = 0x20 };
#define TRSF_READ_AS_INTEGER 0x01u
#define TRSF_NORMALIZED_COORDINATES 0x02u
#define TRSF_SRGB 0x10u

typedef struct { size_t Width, Height; int Format; unsigned NumChannels; } drv_array_desc;
typedef struct { size_t Width, Height, Depth; int Format; unsigned NumChannels, Flags; } drv_array3d_desc;

/* CUDA_RESOURCE_DESC: resType, then a 128-byte union at 8, flags at 136 (144 bytes) */
typedef struct { unsigned char b[144]; } drv_res_desc;
/* CUDA_TEXTURE_DESC: addressMode[3], filterMode, flags, maxAnisotropy, mipmap fields, borderColor[4] at 40 */
typedef struct { unsigned char b[104]; } drv_tex_desc;

/* bits per channel and cudaChannelFormatKind of a CUarray_format */
static CUresult drv_format_of(int f, int *bits, int *kind) {
    switch (f) {
    case AD_U8: *bits = 8; *kind = 1; return CUDA_SUCCESS;
    case AD_U16: *bits = 16; *kind = 1; return CUDA_SUCCESS;
    case AD_U32: *bits = 32; *kind = 1; return CUDA_SUCCESS;
    case AD_S8: *bits = 8; *kind = 0; return CUDA_SUCCESS;
    case AD_S16: *bits = 16; *kind = 0; return CUDA_SUCCESS;
    case AD_S32: *bits = 32; *kind = 0; return CUDA_SUCCESS;
    case AD_HALF: *bits = 16; *kind = 2; return CUDA_SUCCESS;
    case AD_FLOAT: *bits = 32; *kind = 2; return CUDA_SUCCESS;
    default:
        gs_warn_once("cuarray-format", "CUarray_format %#x is not supported by gpushim (8/16/32-bit integers, half "
                     "and float are): CUDA_ERROR_NOT_SUPPORTED", f);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

static int drv_format_from(int bits, int kind) {
    if (kind == 2) return bits == 16 ? AD_HALF : AD_FLOAT;
    int base = kind == 0 ? AD_S8 : AD_U8;
    return base + (bits == 8 ? 0 : bits == 16 ? 1 : 2);
}

static CUresult drv_channel_desc(int format, unsigned channels, gs_channel_desc *d) {
    int bits, kind;
    CUresult r = drv_format_of(format, &bits, &kind);
    if (r) return r;
    if (channels != 1 && channels != 2 && channels != 4) return CUDA_ERROR_INVALID_VALUE;
    *d = (gs_channel_desc){bits, channels > 1 ? bits : 0, channels > 2 ? bits : 0, channels > 2 ? bits : 0, kind};
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuArrayCreate_v2(void **out, const drv_array_desc *d) {
    if (!out || !d) return CUDA_ERROR_INVALID_VALUE;
    TEX_ENTER();
    gs_channel_desc cd;
    CUresult r = drv_channel_desc(d->Format, d->NumChannels, &cd);
    if (r) return r;
    return GS_DRV_CALL(gs_cudaMalloc3DArray(out, &cd, (gs_extent){d->Width, d->Height, 0}, 0));
}

GS_DRV CUresult gs_cuArray3DCreate_v2(void **out, const drv_array3d_desc *d) {
    if (!out || !d) return CUDA_ERROR_INVALID_VALUE;
    TEX_ENTER();
    gs_channel_desc cd;
    CUresult r = drv_channel_desc(d->Format, d->NumChannels, &cd);
    if (r) return r;
    return GS_DRV_CALL(gs_cudaMalloc3DArray(out, &cd, (gs_extent){d->Width, d->Height, d->Depth}, d->Flags));
}

GS_DRV CUresult gs_cuArrayDestroy(void *arr) {
    if (!arr) return CUDA_ERROR_INVALID_VALUE;
    return GS_DRV_CALL(gs_cudaFreeArray(arr));
}

static CUresult drv_array_info(void *arr, gs_channel_desc *cd, gs_extent *ext, unsigned *flags, int *format,
                           unsigned *channels) {
    gs_array a;
    if (!arr || !find_array(arr, &a)) return CUDA_ERROR_INVALID_HANDLE;
    *cd = a.desc;
    *ext = a.extent;
    *flags = a.flags;
    *format = drv_format_from(cd->x, cd->f);
    *channels = cd->w ? 4 : cd->y ? 2 : 1;
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuArrayGetDescriptor_v2(drv_array_desc *d, void *arr) {
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    gs_channel_desc cd;
    gs_extent ext;
    unsigned flags, ch;
    int fmt;
    CUresult r = drv_array_info(arr, &cd, &ext, &flags, &fmt, &ch);
    if (r) return r;
    if (ext.depth) return CUDA_ERROR_INVALID_VALUE; /* a 3D or layered array: cuArray3DGetDescriptor */
    *d = (drv_array_desc){ext.width, ext.height, fmt, ch};
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuArray3DGetDescriptor_v2(drv_array3d_desc *d, void *arr) {
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    gs_channel_desc cd;
    gs_extent ext;
    unsigned flags, ch;
    int fmt;
    CUresult r = drv_array_info(arr, &cd, &ext, &flags, &fmt, &ch);
    if (r) return r;
    *d = (drv_array3d_desc){ext.width, ext.height, ext.depth, fmt, ch, flags};
    return CUDA_SUCCESS;
}

/* ---- texture and surface objects ---- */

/* The driver's descriptions of each object, for the GetResourceDesc / GetTextureDesc queries */
typedef struct drv_texobj {
    uint64_t handle;
    int surface;
    drv_res_desc res;
    drv_tex_desc tex;
    struct drv_texobj *next;
} drv_texobj;

static pthread_mutex_t drv_tex_lock = PTHREAD_MUTEX_INITIALIZER;
static drv_texobj *drv_objects;

/* CUDA_RESOURCE_DESC -> cudaResourceDesc (api_texture.c's describe reads its first 64 bytes) */
static CUresult drv_runtime_res(const drv_res_desc *d, unsigned char rt[64]) {
    int type;
    memcpy(&type, d->b, 4);
    memset(rt, 0, 64);
    memcpy(rt, &type, 4);
    if (type == 0) { /* CU_RESOURCE_TYPE_ARRAY: hArray at 8 */
        memcpy(rt + 8, d->b + 8, 8);
        return CUDA_SUCCESS;
    }
    if (type != 2 && type != 3) { /* mipmapped arrays */
        gs_warn_once("cu-restype", "gpushim: CUresourcetype %d is not supported for texture objects", type);
        return type == 1 ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
    }
    int format;
    unsigned channels;
    memcpy(&format, d->b + 16, 4);
    memcpy(&channels, d->b + 20, 4);
    gs_channel_desc cd;
    CUresult r = drv_channel_desc(format, channels, &cd);
    if (r) return r;
    memcpy(rt + 8, d->b + 8, 8); /* devPtr */
    memcpy(rt + 16, &cd, sizeof cd);
    if (type == 2) {
        memcpy(rt + 40, d->b + 24, 8); /* sizeInBytes */
    } else {
        memcpy(rt + 40, d->b + 24, 24); /* width, height, pitchInBytes */
    }
    return CUDA_SUCCESS;
}

/* Whether the resource's elements are 8/16-bit integers (read as normalized floats unless
 * CU_TRSF_READ_AS_INTEGER: Driver API, cuTexObjectCreate). */
static int drv_small_ints(const drv_res_desc *d) {
    int type, format;
    memcpy(&type, d->b, 4);
    if (type == 0) {
        gs_array a;
        void *arr;
        memcpy(&arr, d->b + 8, sizeof arr);
        if (!find_array(arr, &a)) return 0;
        return a.desc.f != 2 && a.desc.x < 32;
    }
    memcpy(&format, d->b + 16, 4);
    return format == AD_U8 || format == AD_U16 || format == AD_S8 || format == AD_S16;
}

/* CUDA_TEXTURE_DESC -> cudaTextureDesc (addressMode, filterMode, readMode, sRGB, borderColor, normalizedCoords) */
static void drv_runtime_tex(const drv_tex_desc *d, int small, unsigned char rt[64]) {
    unsigned flags;
    memcpy(&flags, d->b + 16, 4);
    memset(rt, 0, 64);
    memcpy(rt, d->b, 16); /* addressMode[3], filterMode */
    int read = small && !(flags & TRSF_READ_AS_INTEGER), srgb = !!(flags & TRSF_SRGB),
        norm = !!(flags & TRSF_NORMALIZED_COORDINATES);
    memcpy(rt + 16, &read, 4);
    memcpy(rt + 20, &srgb, 4);
    memcpy(rt + 24, d->b + 40, 16); /* borderColor */
    memcpy(rt + 40, &norm, 4);
}

static void drv_remember(uint64_t h, int surface, const drv_res_desc *res, const drv_tex_desc *tex) {
    drv_texobj *o = calloc(1, sizeof *o);
    if (!o) return; /* the queries then answer CUDA_ERROR_INVALID_VALUE */
    o->handle = h;
    o->surface = surface;
    o->res = *res;
    if (tex) o->tex = *tex;
    pthread_mutex_lock(&drv_tex_lock);
    o->next = drv_objects;
    drv_objects = o;
    pthread_mutex_unlock(&drv_tex_lock);
}

static void drv_forget(uint64_t h, int surface) {
    pthread_mutex_lock(&drv_tex_lock);
    for (drv_texobj **p = &drv_objects; *p; p = &(*p)->next)
        if ((*p)->handle == h && (*p)->surface == surface) {
            drv_texobj *o = *p;
            *p = o->next;
            free(o);
            break;
        }
    pthread_mutex_unlock(&drv_tex_lock);
}

GS_DRV CUresult gs_cuTexObjectCreate(uint64_t *out, const drv_res_desc *res, const drv_tex_desc *tex,
                                     const void *view) {
    if (!out || !res || !tex) return CUDA_ERROR_INVALID_VALUE;
    if (view) {
        gs_warn_once("cu-texview", "gpushim does not support resource views (CUDA_RESOURCE_VIEW_DESC) yet");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    TEX_ENTER();
    unsigned char rres[64], rtex[64];
    CUresult r = drv_runtime_res(res, rres);
    if (r) return r;
    drv_runtime_tex(tex, drv_small_ints(res), rtex);
    uint64_t h;
    r = GS_DRV_CALL(object_create(&h, rres, rtex, 0));
    if (r) return r;
    drv_remember(h, 0, res, tex);
    *out = h;
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuSurfObjectCreate(uint64_t *out, const drv_res_desc *res) {
    if (!out || !res) return CUDA_ERROR_INVALID_VALUE;
    int type;
    memcpy(&type, res->b, 4);
    if (type != 0) return CUDA_ERROR_INVALID_VALUE; /* surfaces are CUDA arrays */
    TEX_ENTER();
    unsigned char rres[64];
    CUresult r = drv_runtime_res(res, rres);
    if (r) return r;
    uint64_t h;
    r = GS_DRV_CALL(object_create(&h, rres, NULL, 1));
    if (r) return r;
    drv_remember(h, 1, res, NULL);
    *out = h;
    return CUDA_SUCCESS;
}

static CUresult drv_object_destroy(uint64_t h, int surface) {
    CUresult r = GS_DRV_CALL(object_destroy(h, surface));
    if (!r) drv_forget(h, surface);
    return r;
}

GS_DRV CUresult gs_cuTexObjectDestroy(uint64_t h) { return drv_object_destroy(h, 0); }
GS_DRV CUresult gs_cuSurfObjectDestroy(uint64_t h) { return drv_object_destroy(h, 1); }

static CUresult drv_object_query(uint64_t h, int surface, drv_res_desc *res, drv_tex_desc *tex) {
    if (!res && !tex) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&drv_tex_lock);
    for (drv_texobj *o = drv_objects; o; o = o->next)
        if (o->handle == h && o->surface == surface) {
            if (res) *res = o->res;
            if (tex) *tex = o->tex;
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&drv_tex_lock);
    return r;
}

GS_DRV CUresult gs_cuTexObjectGetResourceDesc(drv_res_desc *res, uint64_t h) { return drv_object_query(h, 0, res, NULL); }
GS_DRV CUresult gs_cuTexObjectGetTextureDesc(drv_tex_desc *tex, uint64_t h) { return drv_object_query(h, 0, NULL, tex); }
GS_DRV CUresult gs_cuSurfObjectGetResourceDesc(drv_res_desc *res, uint64_t h) { return drv_object_query(h, 1, res, NULL); }
