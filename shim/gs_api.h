/* Shared by the API implementation files: every exported CUDA function is implemented as gs_<name>
 * (or gs_<name>__<major> where its ABI differs by runtime major); gen/exports.c binds them to the
 * versioned symbols of each libcudart ABI. GS_IMPL marks an implementation for that generator. */
#ifndef GS_API_H
#define GS_API_H

#include "gen/ops.h"
#include "gs_client.h"
#include "gs_cuda.h"
#include "gs_state.h"

#define GS_IMPL __attribute__((used))

/* Runs a call that has no results and returns its error, recorded as CUDA does. */
static inline cudaError_t gs_run_simple(gs_call *c) {
    cudaError_t e = gs_call_run(c);
    gs_call_end(c);
    return gs_ret(e);
}

static inline uint64_t gs_u64(gs_call *c) {
    uint64_t v = 0;
    gs_r_uint(&c->r, &v);
    return v;
}

static inline int64_t gs_i64(gs_call *c) {
    int64_t v = 0;
    gs_r_int(&c->r, &v);
    return v;
}

/* Layout of a runtime struct in one ABI, generated from adapters/ (gen/layouts.h). */
typedef struct {
    const char *name;
    unsigned short offset, size, count; /* count > 1 for arrays; size is the whole field */
    unsigned char kind;                 /* GS_F_* */
} gs_field;
enum { GS_F_INT = 0, GS_F_UINT = 1, GS_F_CHARS = 2, GS_F_BYTES = 3, GS_F_FLOAT = 4, GS_F_PTR = 5 };

typedef struct {
    const gs_field *fields;
    unsigned nfields;
    unsigned size;
} gs_layout;

/* The layout of `type` ("cudaDeviceProp", ...) for a runtime major (11, 12, 13); NULL if unknown. */
const gs_layout *gs_layout_for(const char *type, int major);
/* Writes value (msgpack int/array/str/bin at r) into field f of dst. */
void gs_store_field(void *dst, const gs_field *f, gs_reader *r);
/* Zeroes dst (exactly l->size bytes) and writes every field of the msgpack map at r that the layout has;
 * fields the caller's ABI lacks are skipped. */
void gs_fill_struct(void *dst, const gs_layout *l, gs_reader r);
/* Sets the named integer/pointer field of dst (no-op when the layout lacks it). */
void gs_set_field(void *dst, const gs_layout *l, const char *name, uint64_t value);

/* cudaMemcpy of every kind, in the order of stream s (ptds: stream 0 means this thread's stream; async:
 * a copy into pinned memory need not be complete on return). */
cudaError_t gs_memcpy(void *dst, const void *src, size_t n, int kind, cudaStream_t s, int ptds, int async);
/* cudaStreamSynchronize of a wire stream handle, as part of another call (no capture check, no gs_ret). */
cudaError_t gs_stream_sync(uint64_t stream);

/* Unmaps a managed range's pages (cudaFree of managed memory). */
void gs_unmap_managed(const gs_range *r);
/* Device memory allocated on the server and mapped at its own address here (api_managed.c). */
void *gs_map_device_memory(int dev, size_t size, cudaError_t *err, const char **why);
/* Device memory allocated on the server, not mapped: its address, the server's file opened here and the offset
 * of its pages in that file (api_managed.c). */
uint64_t gs_device_pages(int dev, size_t size, int *fd, off_t *offset, cudaError_t *err, const char **why);

/* Memory pools (api_pool.c): stream-ordered allocation from a pool (NULL: the device's current pool), and
 * the end of an allocation (its pool's account). */
cudaError_t gs_pool_malloc(void **ptr, size_t size, void *pool);
void gs_pool_forget(void *ptr);

/* Device helpers shared by files. */
cudaError_t gs_check_device(int dev);

#endif
