/* Errors: answered in the client (DESIGN decision 4). */
#include "gen/errors.h"
#include "gs_api.h"

GS_IMPL cudaError_t gs_cudaGetLastError(void) {
    gs_thread_state *t = gs_thread();
    cudaError_t e = gs_sticky() ? gs_sticky() : t->last_error;
    if (!gs_sticky()) t->last_error = cudaSuccess;
    return e;
}

GS_IMPL cudaError_t gs_cudaPeekAtLastError(void) { return gs_sticky() ? gs_sticky() : gs_thread()->last_error; }

GS_IMPL const char *gs_cudaGetErrorString(cudaError_t e) {
    const char *s = gs_error_string(gs_runtime_version() / 1000, e);
    return s ? s : "unrecognized error code";
}

GS_IMPL const char *gs_cudaGetErrorName(cudaError_t e) {
    const char *s = gs_error_name(gs_runtime_version() / 1000, e);
    return s ? s : "unrecognized error code"; /* what libcudart itself answers for a code it does not know */
}
