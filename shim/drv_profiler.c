/* Profiler control (cudaProfiler.h): no profiler runs under gpushim; starting and stopping it succeed and do
 * nothing, as the runtime face's cudaProfilerStart/Stop. cuProfilerInitialize (deprecated) stays a stub. */
#include "drv_api.h"

GS_DRV CUresult gs_cuProfilerStart(void) { return CUDA_SUCCESS; }
GS_DRV CUresult gs_cuProfilerStop(void) { return CUDA_SUCCESS; }
