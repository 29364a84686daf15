/* TOOLS_TLS and the context table: the slots through which libcublasLt asks the driver which context is
 * current on the calling thread, and that context's id, which it then looks up in its own per-context map
 * (its handle state for each context). Facts from public reports of what the real driver's slots do (a
 * probe comparing them with the documented calls on a GPU): TOOLS_TLS slot 2 answers as cuCtxGetCurrent,
 * slot 4 of table {21318c60-9714-3248-8ca6-41ff7324c8f2} as cuCtxGetId. With gpushim's contexts they are
 * exactly those calls. Table ids and slot positions: adapters/cudadrv/export_tables.json. */
#include "drv_export_tools.h"

/* CUresult slot2(CUcontext *current): the thread's current context, NULL when none (as cuCtxGetCurrent). */
static CUresult gs_export_tls_current(CUcontext *pctx) {
    CUresult r = gs_cuCtxGetCurrent(pctx);
    gs_log(3, "cuGetExportTable: TOOLS_TLS slot 2 -> %d (context %p)", (int)r, pctx ? (void *)*pctx : NULL);
    return r;
}

/* CUresult slot4(CUcontext ctx, u64 *id): the context's unique id (as cuCtxGetId; NULL = the current one). */
static CUresult gs_export_context_id(CUcontext ctx, unsigned long long *id) {
    CUresult r = gs_cuCtxGetId(ctx, id);
    gs_log(3, "cuGetExportTable: CONTEXT_INFO slot 4 (%p) -> %d", (void *)ctx, (int)r);
    return r;
}

/* Slot 51 of the context table: cuBLAS calls it after its kernels failed to load; what it does is not known.
 * A refusal, with the arguments logged for whoever works it out. */
static CUresult gs_export_context_info_51(uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3) {
    gs_warn_once("export-slot-context-info-51", "cuGetExportTable: CONTEXT_INFO slot 51 is not supported by gpushim; "
                 "it returns CUDA_ERROR_NOT_SUPPORTED (arguments %#lx %#lx %#lx %#lx)", (unsigned long)a0,
                 (unsigned long)a1, (unsigned long)a2, (unsigned long)a3);
    return CUDA_ERROR_NOT_SUPPORTED;
}
