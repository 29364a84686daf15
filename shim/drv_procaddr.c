/* The driver face's entry points by name: cuGetProcAddress (+_v2), the runtime's
 * cudaGetDriverEntryPoint(ByVersion) (api_driver_entry.c); cuGetExportTable is in drv_export.c.
 *
 * The table (gen/drv_table.c, from adapters/cudadrv/) lists every ABI version of every entry point, as
 * cudaTypedefs.h names them (PFN_cuX_vNNNN); a look-up takes the newest version not newer than the
 * caller's cudaVersion, and its per-thread-default-stream variant (_ptds/_ptsz) when the caller asks for
 * one. Names gpushim does not implement resolve to stubs (CUDA_ERROR_NOT_SUPPORTED, logged once), so an
 * unsupported entry point is never the reason a look-up fails. */
#include <stdio.h>
#include <string.h>

#include "drv_api.h"

enum { PROC_SYMBOL_FOUND = 0, PROC_SYMBOL_NOT_FOUND = 1, PROC_VERSION_NOT_SUFFICIENT = 2 };
enum { PROC_DEFAULT = 0, PROC_LEGACY_STREAM = 1, PROC_PER_THREAD = 2 };

static CUresult gs_drv_unsupported(const char *name) {
    gs_warn_once(name, "%s is not supported by gpushim yet; it returns CUDA_ERROR_NOT_SUPPORTED", name);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* The function for `symbol` at cudaVersion; *status tells why there is none. */
static void *lookup(const char *symbol, int cuda_version, int per_thread, int *status) {
    size_t lo = 0, hi = gs_drv_nentries;
    while (lo < hi) { /* first row of the name */
        size_t mid = (lo + hi) / 2;
        if (strcmp(gs_drv_entries[mid].name, symbol) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo == gs_drv_nentries || strcmp(gs_drv_entries[lo].name, symbol) != 0) {
        *status = PROC_SYMBOL_NOT_FOUND;
        return NULL;
    }
    void *plain = NULL, *pt = NULL;
    int plain_v = 0, pt_v = 0;
    for (size_t i = lo; i < gs_drv_nentries && strcmp(gs_drv_entries[i].name, symbol) == 0; i++) {
        const gs_drv_entry *e = &gs_drv_entries[i];
        if (e->version > cuda_version) continue;
        if (e->per_thread && e->version >= pt_v) { pt = e->fn; pt_v = e->version; }
        if (!e->per_thread && e->version >= plain_v) { plain = e->fn; plain_v = e->version; }
    }
    void *fn = per_thread && pt ? pt : plain;
    *status = fn ? PROC_SYMBOL_FOUND : PROC_VERSION_NOT_SUFFICIENT;
    return fn;
}

static CUresult proc_address(const char *symbol, void **pfn, int cuda_version, uint64_t flags, int *status_out) {
    int status = PROC_SYMBOL_NOT_FOUND;
    if (status_out) *status_out = status;
    if (!symbol || !pfn || flags > PROC_PER_THREAD) return CUDA_ERROR_INVALID_VALUE;
    gs_drv_note_version(cuda_version);
    *pfn = lookup(symbol, cuda_version, flags == PROC_PER_THREAD, &status);
    if (status_out) *status_out = status;
    if (!*pfn) gs_log(2, "cuGetProcAddress(%s, %d): %s", symbol, cuda_version,
                      status == PROC_SYMBOL_NOT_FOUND ? "no such entry point" : "newer than that version");
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

GS_DRV CUresult gs_cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version, uint64_t flags,
                                      int *status) {
    return proc_address(symbol, pfn, cuda_version, flags, status);
}

GS_DRV CUresult gs_cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, uint64_t flags) {
    return proc_address(symbol, pfn, cuda_version, flags, NULL);
}

/* For the runtime face: cudaGetDriverEntryPoint(ByVersion). Returns the cudaDriverEntryPointQueryResult. */
int gs_drv_entry_point(const char *symbol, void **pfn, int cuda_version, int per_thread) {
    int status = PROC_SYMBOL_NOT_FOUND;
    *pfn = lookup(symbol, cuda_version, per_thread, &status);
    return status;
}
