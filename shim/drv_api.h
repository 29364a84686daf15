/* The driver face (libcuda.so.1's functions), shared by the drv_*.c files. Each exported driver function
 * `cuX` is implemented as `GS_DRV CUresult gs_cuX(...)`; shim/generate.py exports it unversioned under its
 * own name (as libcuda.so.1 does), stubs every other name of adapters/cudadrv/ (CUDA_ERROR_NOT_SUPPORTED,
 * logged once) and builds the table cuGetProcAddress answers from.
 *
 * Handles are the runtime face's: CUdeviceptr is the device address, CUstream is the cudaStream_t, CUevent
 * the cudaEvent_t, and a device's primary context is the runtime's context on it. */
#ifndef GS_DRV_API_H
#define GS_DRV_API_H

#include "gs_api.h"
#include "gs_registry.h"

#define GS_DRV __attribute__((used))

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef void *CUstream;
typedef void *CUevent;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_INVALID_SOURCE = 300,
    CUDA_ERROR_FILE_NOT_FOUND = 301,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE = 708,
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_UNKNOWN = 999,
};

/* ---- contexts (drv_context.c) ---- */
typedef struct gs_ctx {
    uint32_t magic;
    int device;
    unsigned flags;
    int primary;
    int refs;    /* primary: cuDevicePrimaryCtxRetain count */
    uint64_t id; /* unique in the process (cuCtxGetId); created contexts are freed by cuCtxDestroy */
} gs_ctx;
typedef gs_ctx *CUcontext;

/* The current context's device (it becomes the runtime's current device of this thread), or
 * CUDA_ERROR_INVALID_CONTEXT when the thread has none. Connects and checks the sticky error. */
CUresult gs_drv_enter(int *dev);
/* The runtime face handed out driver functions: the driver counts as initialised (cuInit). */
void gs_drv_mark_initialised(void);
/* The primary context of dev (never freed). */
gs_ctx *gs_drv_primary(int dev);
/* Whether h is a primary context handed out or a live context from cuCtxCreate (not reading a freed one). */
int gs_drv_ctx_known(const gs_ctx *h);

/* Streams, events and modules made while a context from cuCtxCreate is current belong to it: cuCtxDestroy
 * destroys them (drv_context.c). gs_drv_own records one, gs_drv_disown forgets one destroyed by the program. */
enum { GS_OWN_STREAM = 100, GS_OWN_EVENT, GS_OWN_MODULE };
void gs_drv_own(uintptr_t handle, int kind);
void gs_drv_disown(uintptr_t handle, int kind);
gs_ctx *gs_drv_owner(uintptr_t handle, int kind); /* the cuCtxCreate context it belongs to, or NULL */
CUresult gs_drv_module_unload(void *module); /* cuModuleUnload (drv_module.c) */

/* The context-local values of a context that is destroyed or reset (drv_export.c): their destructors run. */
void gs_drv_cls_destroy(gs_ctx *ctx);

/* A runtime face result as the driver API's code. */
CUresult gs_drv_err(cudaError_t e);

/* Runs a runtime face implementation for the driver face: its error as a CUresult, and the runtime's
 * per-thread last error (cudaGetLastError) and whether the runtime made a context current left as they were. */
#define GS_DRV_CALL(expr)                                         \
    ({                                                            \
        cudaError_t gs_saved_ = gs_thread()->last_error;          \
        int gs_rctx_ = gs_thread()->runtime_ctx;                  \
        cudaError_t gs_r_ = (expr);                               \
        gs_thread()->last_error = gs_saved_;                      \
        gs_thread()->runtime_ctx = gs_rctx_;                      \
        gs_drv_err(gs_r_);                                        \
    })

/* Runtime face helpers from api_kernel.c, used by the driver's modules and launches. */
cudaError_t gs_module_ensure(gs_module *m);
cudaError_t gs_entry_layout(gs_entry *k);
void gs_entry_free_layout(gs_entry *k); /* what gs_entry_layout allocated: for an entry that is freed */
int gs_entry_attr(gs_entry *k, const char *name);
cudaError_t gs_entry_occupancy(gs_entry *k, int *nblocks, int block_size, size_t dyn_smem);
cudaError_t gs_launch_entry(gs_entry *k, dim3 grid, dim3 block, void **args, const void *packed, size_t packed_len,
                            size_t shmem, cudaStream_t s, int ptsz);

/* Libraries and kernels (drv_module.c), for the runtime face's cudaLibrary* (api_library.c). */
struct drv_library;
struct drv_function;
CUresult gs_cuLibraryLoadData(struct drv_library **lib, const void *code, int *jit_opts, void **jit_values,
                              unsigned njit, void *lib_opts, void **lib_values, unsigned nlib);
CUresult gs_cuLibraryLoadFromFile(struct drv_library **lib, const char *path, int *jit_opts, void **jit_values,
                                  unsigned njit, void *lib_opts, void **lib_values, unsigned nlib);
CUresult gs_cuLibraryUnload(struct drv_library *h);
CUresult gs_cuLibraryGetKernel(struct drv_function **k, struct drv_library *h, const char *name);
CUresult gs_cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, struct drv_library *h, const char *name);
CUresult gs_cuKernelSetAttribute(int attr, int value, struct drv_function *k, CUdevice dev);

/* cuGetProcAddress's table (gen/drv_table.c): one row per exported variant, sorted by name then version. */
typedef struct {
    const char *name; /* the entry point's base name, e.g. "cuMemAlloc" */
    int version;      /* the CUDA version that introduced this variant */
    int per_thread;   /* 1: a _ptds/_ptsz variant */
    void *fn;
} gs_drv_entry;
extern const gs_drv_entry gs_drv_entries[];
extern const size_t gs_drv_nentries;

/* Non-zero while the shim asks the application's real libcudart for its version (gs_runtime.c): a real
 * runtime then talks to the driver face, which must answer as if no driver were installed. */
int gs_runtime_detecting(void);

/* The CUDA version a driver-only client announced (cuGetProcAddress's cudaVersion), or 0. */
void gs_drv_note_version(int cuda_version);

#endif
