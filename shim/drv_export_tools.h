/* Slots of the driver's private tables that cuBLAS/cuBLASLt (through the CUDA runtime linked into them)
 * call: shim/drv_export_tools.c. Declared here because gen/drv_export_tables.h, included by drv_export.c,
 * binds them before the unity build reaches their definitions. */
#ifndef GS_DRV_EXPORT_TOOLS_H
#define GS_DRV_EXPORT_TOOLS_H
#include "drv_api.h"

static CUresult gs_export_tls_current(CUcontext *pctx);
static CUresult gs_export_context_id(CUcontext ctx, unsigned long long *id);
static CUresult gs_export_context_info_51(uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3);

#endif
