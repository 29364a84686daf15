/* What the application registered: fat binaries, kernels (by host stub address) and device variables. */
#ifndef GS_REGISTRY_H
#define GS_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "gs_msgpack.h"

typedef struct gs_module {
    void *handle; /* first member: the void** handed to the application points here */
    const uint8_t *data;
    size_t size;
    uint8_t hash[32];
    int uploaded; /* the server holds this fatbin */
    int refused;  /* the server refused its content (e.g. no PTX for the emulator): later uses fail alike */
    struct gs_module *next;
} gs_module;

typedef struct {
    const void *host; /* host stub (kernels) or host shadow variable (variables) */
    gs_module *module;
    const char *name; /* mangled device name */
    size_t size;      /* variables */
    int is_var, constant;
    int refusal_logged; /* the kernel's name was printed with its module's refusal */
    /* kernel parameter layout, fetched from the server on first launch */
    int have_layout;
    int nparams;
    uint32_t *param_offsets, *param_sizes;
    uint32_t param_bytes;
    uint8_t *attr_frame; /* the FUNC_INFO reply, kept: its cudaFuncAttributes map feeds GetAttributes */
    gs_reader attrs;
    int nonportable_cluster; /* cudaFuncSetAttribute(NonPortableClusterSizeAllowed, 1) was called */
    /* variables: device address, fetched on first use (for device sym_dev) */
    int sym_dev;
    uintptr_t sym_ptr;
    size_t sym_size;
} gs_entry;

gs_module *gs_module_of(void **handle);
void gs_registry_add_module(gs_module *m);
/* Whether a module the application registered was uploaded with this content hash. */
int gs_registry_uses_hash(const uint8_t hash[32]);
void gs_registry_add_function(gs_module *m, const void *host_fun, const char *name);
void gs_registry_add_var(gs_module *m, const void *host_var, const char *name, size_t size, int constant);
/* Finds a kernel or variable by its host address; NULL if the application never registered it. */
gs_entry *gs_registry_find(const void *host);
/* The kernel behind a cudaKernel_t of a loaded library (shim/drv_module.c); NULL for anything else. */
gs_entry *gs_drv_kernel_entry(const void *kernel);

/* The size of the fat binary at d (header and entries); 0 when d is none. */
size_t gs_fatbin_len(const uint8_t *d);
/* Relocatable device code: image (n bytes) followed by the translation units' fat binaries of a version-2
 * fat binary wrapper, in a new buffer of *total bytes; NULL when the wrapper names no units. */
uint8_t *gs_rdc_image(const void *wrapper, const uint8_t *image, size_t n, size_t *total);

#endif
