/* cuGetExportTable: the driver's private tables, which the statically linked CUDA runtime (nvcc's
 * default, and the runtime inside CuPy's and other wheels' extension modules) refuses to start without.
 *
 * Which tables, their ids and slots are data (adapters/cudadrv/export_tables.json -> gen/drv_export_tables.h);
 * this file implements the slots' roles: the runtime's fat binaries become driver modules, its primary
 * context is the driver face's, a context-local key/value store, the tools hooks' buffers and the checks.
 * A slot gpushim cannot honour is a function that logs the table and slot and returns
 * CUDA_ERROR_NOT_SUPPORTED; no slot is NULL. The integrity check is in drv_export_integrity.c. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "drv_api.h"
#include "drv_export_tools.h" /* the slots cuBLAS needs */

struct drv_module;
CUresult gs_cuModuleLoadData(struct drv_module **m, const void *image);

static CUresult gs_export_refuse(int table, int slot);
static CUresult gs_export_module_from_fatbin(struct drv_module **m, const void *wrapper);
static CUresult gs_export_primary_context(CUcontext *pctx, CUdevice dev);
static CUresult gs_export_module_from_fatbin_ex(struct drv_module **m, const void *wrapper, void *a3, void *a4,
                                                unsigned a5);
static CUresult gs_export_notify(uintptr_t arg);
static CUresult gs_export_module_from_fatbin_header(const void *header, struct drv_module **m, void *a3, void *a4,
                                                    unsigned a5);
static void gs_export_hooks_buffer(void **buf, size_t *size);
static void gs_export_hooks_flags(void **buf, size_t *size);
typedef void (*gs_cls_dtor)(CUcontext, void *, void *);
static CUresult gs_export_cls_put(CUcontext ctx, void *key, void *value, gs_cls_dtor dtor);
static CUresult gs_export_cls_delete(CUcontext ctx, void *key);
static CUresult gs_export_cls_get(void **value, CUcontext ctx, void *key);
static CUresult gs_export_context_check(CUcontext ctx, uint32_t *flags, const void **extra);
static uint32_t gs_export_check_flags(void);
static CUresult gs_export_integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t result[2]);

#include "gen/drv_export_tables.h"

static CUresult gs_export_refuse(int table, int slot) {
    char key[64];
    snprintf(key, sizeof key, "export-slot-%d-%d", table, slot);
    gs_warn_once(key, "cuGetExportTable: %s slot %d is not supported by gpushim; it returns CUDA_ERROR_NOT_SUPPORTED",
                 gs_export_names[table], slot);
    return CUDA_ERROR_NOT_SUPPORTED;
}

static void uuid_text(const void *id, char out[33]) {
    const unsigned char *u = id;
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", u[i]);
}

GS_DRV CUresult gs_cuGetExportTable(const void **table, const void *id) {
    if (!table || !id) return CUDA_ERROR_INVALID_VALUE;
    *table = NULL;
    char text[33];
    uuid_text(id, text);
    for (int t = 0; t < GS_EXPORT_NTABLES; t++) {
        if (memcmp(id, gs_export_tables[t].id, 16) == 0) {
            gs_log(2, "cuGetExportTable(%s): %s", text, gs_export_names[t]);
            *table = gs_export_tables[t].slots;
            return CUDA_SUCCESS;
        }
    }
    for (size_t i = 0; i < sizeof gs_export_not_found / sizeof *gs_export_not_found; i++) {
        if (memcmp(id, gs_export_not_found[i], 16) == 0) {
            gs_log(2, "cuGetExportTable(%s): no such table (CUDA_ERROR_NOT_FOUND, as the driver answers)", text);
            return CUDA_ERROR_NOT_FOUND;
        }
    }
    char key[48];
    snprintf(key, sizeof key, "export-table-%s", text);
    gs_warn_once(key, "cuGetExportTable(%s): gpushim offers no such table (CUDA_ERROR_NOT_FOUND)", text);
    return CUDA_ERROR_NOT_FOUND;
}

/* ---- CUDART_INTERFACE ---- */

/* The runtime's __cudaRegisterFatBinary: the fat binary wrapper (or its header) becomes a driver module. */
static CUresult gs_export_module_from_fatbin(struct drv_module **m, const void *wrapper) {
    if (!m || !wrapper) return CUDA_ERROR_INVALID_VALUE;
    return gs_cuModuleLoadData(m, wrapper);
}

static CUresult refuse_extras(const char *slot, const void *a3, const void *a4, unsigned a5) {
    if (!a3 && !a4 && !a5) return CUDA_SUCCESS;
    gs_log(0, "cuGetExportTable: CUDART_INTERFACE %s with extra arguments (%p, %p, %u) is not supported by gpushim "
           "(CUDA_ERROR_NOT_SUPPORTED)", slot, a3, a4, a5);
    return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult gs_export_module_from_fatbin_ex(struct drv_module **m, const void *wrapper, void *a3, void *a4,
                                                unsigned a5) {
    if (!m || !wrapper) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = refuse_extras("slot 6 (module from fat binary)", a3, a4, a5);
    return r ? r : gs_cuModuleLoadData(m, wrapper);
}

static CUresult gs_export_module_from_fatbin_header(const void *header, struct drv_module **m, void *a3, void *a4,
                                                    unsigned a5) {
    if (!m || !header) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = refuse_extras("slot 8 (module from fat binary header)", a3, a4, a5);
    return r ? r : gs_cuModuleLoadData(m, header);
}

/* The runtime asks for the primary context of a device (it retains it through cuDevicePrimaryCtxRetain). */
static CUresult gs_export_primary_context(CUcontext *pctx, CUdevice dev) {
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    int n = 0;
    CUresult r = gs_cuDeviceGetCount(&n);
    if (r) return r;
    if (dev < 0 || dev >= n) return CUDA_ERROR_INVALID_DEVICE;
    *pctx = gs_drv_primary(dev);
    return CUDA_SUCCESS;
}

/* Called with a small integer during start-up; nothing for gpushim to do. */
static CUresult gs_export_notify(uintptr_t arg) {
    gs_log(3, "cuGetExportTable: CUDART_INTERFACE slot 7 (%lu)", (unsigned long)arg);
    return CUDA_SUCCESS;
}

/* ---- TOOLS_RUNTIME_CALLBACK_HOOKS: buffers the runtime writes its tool-callback state into ---- */

static _Alignas(16) unsigned char hooks_buffer[8192];
static _Alignas(16) unsigned char hooks_flags[64];

static void gs_export_hooks_buffer(void **buf, size_t *size) {
    gs_log(3, "cuGetExportTable: TOOLS_RUNTIME_CALLBACK_HOOKS slot 2");
    if (buf) *buf = hooks_buffer;
    if (size) *size = 4096;
}

static void gs_export_hooks_flags(void **buf, size_t *size) {
    gs_log(3, "cuGetExportTable: TOOLS_RUNTIME_CALLBACK_HOOKS slot 6");
    if (buf) *buf = hooks_flags;
    if (size) *size = 56;
}

/* ---- CONTEXT_LOCAL_STORAGE: per-context values the runtime keeps (its state for each context) ---- */

typedef struct cls_entry {
    CUcontext ctx;
    void *key, *value;
    gs_cls_dtor dtor;
    struct cls_entry *next;
} cls_entry;

static cls_entry *cls_head;
static pthread_mutex_t cls_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult cls_context(CUcontext *ctx) {
    /* a destroyed context's values went with it; none are kept for a stale handle (a new context may take its
     * address) */
    if (*ctx) return gs_drv_ctx_known(*ctx) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    CUresult r = gs_cuCtxGetCurrent(ctx);
    if (r) return r;
    return *ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static cls_entry **cls_find(CUcontext ctx, void *key) {
    cls_entry **p = &cls_head;
    while (*p && ((*p)->ctx != ctx || (*p)->key != key)) p = &(*p)->next;
    return p;
}

static CUresult gs_export_cls_put(CUcontext ctx, void *key, void *value, gs_cls_dtor dtor) {
    CUresult r = cls_context(&ctx);
    if (r) return r;
    pthread_mutex_lock(&cls_lock);
    cls_entry **p = cls_find(ctx, key);
    if (!*p) {
        *p = calloc(1, sizeof **p);
        if (!*p) {
            pthread_mutex_unlock(&cls_lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    **p = (cls_entry){.ctx = ctx, .key = key, .value = value, .dtor = dtor, .next = (*p)->next};
    pthread_mutex_unlock(&cls_lock);
    return CUDA_SUCCESS;
}

static CUresult gs_export_cls_delete(CUcontext ctx, void *key) {
    CUresult r = cls_context(&ctx);
    if (r) return r;
    pthread_mutex_lock(&cls_lock);
    cls_entry **p = cls_find(ctx, key), *e = *p;
    if (e) *p = e->next;
    pthread_mutex_unlock(&cls_lock);
    free(e);
    return CUDA_SUCCESS;
}

/* A key never stored is CUDA_ERROR_INVALID_HANDLE: the runtime then creates its state and puts it. */
static CUresult gs_export_cls_get(void **value, CUcontext ctx, void *key) {
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cls_context(&ctx);
    if (r) return r;
    pthread_mutex_lock(&cls_lock);
    cls_entry *e = *cls_find(ctx, key);
    if (e) *value = e->value;
    pthread_mutex_unlock(&cls_lock);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* cuDevicePrimaryCtxReset / cuCtxDestroy: the runtime's values for the context die with it; their
 * destructors run (without the lock: they may call back into the driver). */
void gs_drv_cls_destroy(CUcontext ctx) {
    for (;;) {
        pthread_mutex_lock(&cls_lock);
        cls_entry **p = &cls_head;
        while (*p && (*p)->ctx != ctx) p = &(*p)->next;
        cls_entry *e = *p;
        if (e) *p = e->next;
        pthread_mutex_unlock(&cls_lock);
        if (!e) return;
        if (e->dtor) e->dtor(ctx, e->key, e->value);
        free(e);
    }
}

/* ---- CONTEXT_CHECKS: no context of gpushim's carries the properties these ask about ---- */

static CUresult gs_export_context_check(CUcontext ctx, uint32_t *flags, const void **extra) {
    (void)ctx;
    (void)extra;
    if (flags) *flags = 0;
    return CUDA_SUCCESS;
}

static uint32_t gs_export_check_flags(void) { return 0; }
