/* Launch attributes of cuLaunchKernelEx / cudaLaunchKernelEx (shim/gs_launch_attrs.c): encoded for the
 * LAUNCH_EX operation, four integers each (layout: gpushim/backends/launch_attrs.py). */
#ifndef GS_LAUNCH_ATTRS_H
#define GS_LAUNCH_ATTRS_H
#include <stdint.h>

#include "gs_api.h"
#include "gs_registry.h"

/* CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED == cudaFuncAttributeNonPortableClusterSizeAllowed */
enum { GS_MAX_LAUNCH_ATTRS = 32, FUNC_ATTR_NON_PORTABLE_CLUSTER = 14 };
struct gs_launch_attrs;

cudaError_t gs_cudaDeviceGetAttribute(int *v, int attr, int dev);
/* shim/api_kernel.c: gs_launch_entry with launch attributes (NULL: none) */
cudaError_t gs_launch_entry_ex(gs_entry *k, dim3 grid, dim3 block, void **args, const void *packed,
                               size_t packed_len, size_t shmem, cudaStream_t s, int ptsz, const struct gs_launch_attrs *la);
int gs_entry_attr(gs_entry *k, const char *name);

typedef struct gs_launch_attrs {
    unsigned n;                                 /* attributes encoded (IGNORE entries are dropped) */
    uint64_t v[4 * GS_MAX_LAUNCH_ATTRS];        /* [id, a, b, c] each */
    unsigned cluster[3];                        /* CLUSTER_DIMENSION, or zeros */
    int has_cluster;
} gs_launch_attrs;

/* Reads nattrs CUlaunchAttribute / cudaLaunchAttribute (72 bytes each, the same ids and layout) into out.
 * Errors as CUDA gives them: an unknown id or a graphs-only attribute cudaErrorInvalidValue, an unknown
 * event cudaErrorInvalidResourceHandle. */
cudaError_t gs_launch_attrs_read(const void *attrs, unsigned nattrs, gs_launch_attrs *out);

/* CUDA's rules for the cluster shape of a launch of k with this grid (cudaErrorInvalidClusterSize). */
cudaError_t gs_launch_attrs_check_cluster(const gs_launch_attrs *a, gs_entry *k, dim3 grid);

#endif
