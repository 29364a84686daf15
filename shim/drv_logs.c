/* The driver face: error log callbacks (cuLogsRegisterCallback / cuLogsUnregisterCallback, CUDA 12.9+).
 * Registration is real (handles, unregistration, bad handles refused); gpushim's driver delivers no entries
 * through them: its explanations (a refused kernel, an unsupported call) go to stderr, printed by the shim.
 * PyTorch registers one at start-up. cuLogsCurrent / cuLogsDumpTo* stay NOT_SUPPORTED stubs. */
#include <pthread.h>
#include <stdlib.h>

#include "drv_api.h"

typedef void (*logs_callback)(void *data, int level, char *message, size_t length);
typedef struct logs_entry {
    logs_callback fn;
    void *data;
    struct logs_entry *next;
} logs_entry;
static logs_entry *logs_callbacks;
static pthread_mutex_t logs_lock = PTHREAD_MUTEX_INITIALIZER;

GS_DRV CUresult gs_cuLogsRegisterCallback(logs_callback fn, void *data, logs_entry **out) {
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    logs_entry *e = malloc(sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&logs_lock);
    *e = (logs_entry){fn, data, logs_callbacks};
    logs_callbacks = e;
    pthread_mutex_unlock(&logs_lock);
    if (out) *out = e;
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuLogsUnregisterCallback(logs_entry *handle) {
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&logs_lock);
    for (logs_entry **p = &logs_callbacks; *p; p = &(*p)->next) {
        if (*p != handle) continue;
        *p = handle->next;
        free(handle);
        r = CUDA_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&logs_lock);
    return r;
}
