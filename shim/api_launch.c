/* Kernel registration and launch configuration. nvcc-generated code registers every fatbin, kernel and
 * device variable at program start; the shim only records them here (DESIGN decision 6: modules are
 * uploaded lazily, at first use). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gs_api.h"
#include "gs_registry.h"

#define FATBIN_WRAPPER_MAGIC 0x466243B1u
#define FATBIN_MAGIC 0xBA55ED50u

typedef struct {
    int magic;
    int version;
    const unsigned long long *data;
    void *filename_or_fatbins;
} fatbin_wrapper;

GS_IMPL void **gs___cudaRegisterFatBinary(void *fat_cubin) {
    gs_module *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    const fatbin_wrapper *w = fat_cubin;
    if (w && (unsigned)w->magic == FATBIN_WRAPPER_MAGIC && w->data) {
        const uint8_t *d = (const uint8_t *)w->data;
        size_t n = gs_fatbin_len(d);
        if (n) {
            size_t total;
            uint8_t *rdc = gs_rdc_image(w, d, n, &total);
            m->data = rdc ? rdc : d; /* rdc: kept for the process's life, like the registration itself */
            m->size = rdc ? total : n;
        }
    }
    if (!m->data) gs_warn_once("fatbin", "a registered fat binary has an unknown format; its kernels cannot run");
    gs_registry_add_module(m);
    return &m->handle;
}

GS_IMPL void gs___cudaRegisterFatBinaryEnd(void **handle) { (void)handle; }

GS_IMPL void gs___cudaUnregisterFatBinary(void **handle) {
    /* Called from the application's destructors at exit; the module stays recorded (the server frees
     * it with the session), so late calls from other destructors still find their kernels. */
    (void)handle;
}

GS_IMPL char gs___cudaInitModule(void **handle) {
    (void)handle;
    return 1;
}

GS_IMPL void gs___cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun,
                                        const char *device_name, int thread_limit, void *tid, void *bid,
                                        void *bdim, void *gdim, int *wsize) {
    (void)device_fun;
    (void)thread_limit;
    (void)tid;
    (void)bid;
    (void)bdim;
    (void)gdim;
    (void)wsize;
    gs_registry_add_function(gs_module_of(handle), host_fun, device_name);
}

GS_IMPL void gs___cudaRegisterVar(void **handle, char *host_var, char *device_address, const char *device_name,
                                   int ext, size_t size, int constant, int global) {
    (void)device_address;
    (void)ext;
    (void)global;
    gs_registry_add_var(gs_module_of(handle), host_var, device_name, size, constant);
}

GS_IMPL void gs___cudaRegisterManagedVar(void **handle, void **host_var_ptr, char *device_address,
                                          const char *device_name, int ext, size_t size, int constant,
                                          int global) {
    (void)handle;
    (void)host_var_ptr;
    (void)device_address;
    (void)ext;
    (void)size;
    (void)constant;
    (void)global;
    gs_warn_once("managed", "__managed__ variable %s: managed memory is not supported by gpushim yet; "
                 "kernels using it fail", device_name);
}

/* ---- <<<>>> launch configuration, kept in the client ---- */

typedef struct {
    dim3 grid, block;
    size_t shmem;
    void *stream;
} call_config;

static _Thread_local call_config config_stack[16];
static _Thread_local int config_depth;

GS_IMPL unsigned gs___cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, void *stream) {
    if (config_depth >= 16) return 1;
    config_stack[config_depth++] = (call_config){grid, block, shmem, stream};
    return 0;
}

GS_IMPL cudaError_t gs___cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem, void *stream) {
    if (config_depth <= 0) return cudaErrorInvalidConfiguration;
    call_config c = config_stack[--config_depth];
    *grid = c.grid;
    *block = c.block;
    *shmem = c.shmem;
    *(void **)stream = c.stream;
    return cudaSuccess;
}
