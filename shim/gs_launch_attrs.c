/* Launch attributes (cuLaunchKernelEx / cudaLaunchKernelEx) read from the caller's array and encoded for
 * LAUNCH_EX, so the server applies them (the cuda backend passes them to cuLaunchKernelEx; the emulator
 * checks the cluster shape and ignores the rest, gpushim/backends/launch_attrs.py). */
#include <string.h>

#include "gs_launch_attrs.h"
#include "gs_state.h"

enum {
    A_IGNORE = 0, A_ACCESS_POLICY_WINDOW = 1, A_CLUSTER_DIMENSION = 4, A_PROGRAMMATIC_EVENT = 7, A_PRIORITY = 8,
    A_MEM_SYNC_DOMAIN_MAP = 9, A_PREFERRED_CLUSTER_DIMENSION = 11, A_LAUNCH_COMPLETION_EVENT = 12,
    A_DEVICE_UPDATABLE_KERNEL_NODE = 13, A_LAST = 18,
    ATTR_SIZE = 72, /* id (4 bytes), padding to 8, a 64-byte value union */
    ERR_INVALID_VALUE = 1, ERR_INVALID_HANDLE = 400, ERR_NOT_SUPPORTED = 801, ERR_INVALID_CLUSTER_SIZE = 912,
};

static uint32_t u32_at(const unsigned char *p, size_t off) {
    uint32_t v;
    memcpy(&v, p + off, sizeof v);
    return v;
}
static uint64_t u64_at(const unsigned char *p, size_t off) {
    uint64_t v;
    memcpy(&v, p + off, sizeof v);
    return v;
}

cudaError_t gs_launch_attrs_read(const void *attrs, unsigned nattrs, gs_launch_attrs *out) {
    memset(out, 0, sizeof *out);
    if (nattrs && !attrs) return ERR_INVALID_VALUE;
    for (unsigned i = 0; i < nattrs; i++) {
        const unsigned char *a = (const unsigned char *)attrs + (size_t)i * ATTR_SIZE, *v = a + 8;
        uint32_t id = u32_at(a, 0);
        uint64_t x = 0, y = 0, z = 0;
        switch (id) {
        case A_IGNORE: continue;
        case A_ACCESS_POLICY_WINDOW: /* base_ptr, num_bytes, float hitRatio, hitProp, missProp */
            x = u64_at(v, 0);
            y = u64_at(v, 8);
            z = u32_at(v, 16) | (uint64_t)(u32_at(v, 20) & 0xffff) << 32 | (uint64_t)(u32_at(v, 24) & 0xffff) << 48;
            break;
        case A_CLUSTER_DIMENSION:
        case A_PREFERRED_CLUSTER_DIMENSION:
            x = u32_at(v, 0), y = u32_at(v, 4), z = u32_at(v, 8);
            if (id == A_CLUSTER_DIMENSION) {
                out->cluster[0] = (unsigned)x, out->cluster[1] = (unsigned)y, out->cluster[2] = (unsigned)z;
                out->has_cluster = 1;
            }
            break;
        case A_PROGRAMMATIC_EVENT: /* CUevent, int flags, int triggerAtBlockStart */
        case A_LAUNCH_COMPLETION_EVENT:
            x = u64_at(v, 0), y = u32_at(v, 8), z = id == A_PROGRAMMATIC_EVENT ? u32_at(v, 12) : 0;
            if (!gs_handle_known(GS_HANDLE_EVENT, x)) return ERR_INVALID_HANDLE;
            break;
        case A_MEM_SYNC_DOMAIN_MAP: x = v[0], y = v[1]; break;
        case A_DEVICE_UPDATABLE_KERNEL_NODE:
            /* cuda.h: "graphs-only, and passing it to a launch in a non-capturing stream will result in an
             * error" */
            return ERR_INVALID_VALUE;
        default:
            if (id > A_LAST || id == 15) {
                char key[48];
                snprintf(key, sizeof key, "launch-attr-%u", id);
                gs_warn_once(key, "launch attribute %u is not one gpushim knows (cudaErrorInvalidValue)", id);
                return ERR_INVALID_VALUE;
            }
            x = u32_at(v, 0); /* an int or enum: priority, cooperative, domains, carveout, ... */
        }
        if (out->n == GS_MAX_LAUNCH_ATTRS) return ERR_INVALID_VALUE;
        uint64_t *o = out->v + 4 * out->n++;
        o[0] = id, o[1] = x, o[2] = y, o[3] = z;
    }
    return 0;
}

/* CUDA Programming Guide, "Thread Block Clusters": the grid is a multiple of the cluster in each dimension;
 * 8 blocks is the portable cluster size, 16 where the kernel allows a non-portable size (compute capability
 * 9.0); a kernel with required cluster dimensions launches only with those. */
cudaError_t gs_launch_attrs_check_cluster(const gs_launch_attrs *a, gs_entry *k, dim3 grid) {
    if (!a->has_cluster) return 0;
    int clusters = 0;
    cudaError_t e = gs_cudaDeviceGetAttribute(&clusters, 120, gs_thread()->device); /* cudaDevAttrClusterLaunch */
    if (e) return e;
    if (!clusters) return ERR_NOT_SUPPORTED;
    const unsigned *d = a->cluster, g[3] = {grid.x, grid.y, grid.z};
    for (int i = 0; i < 3; i++)
        if (!d[i] || g[i] % d[i]) return ERR_INVALID_CLUSTER_SIZE;
    unsigned long size = (unsigned long)d[0] * d[1] * d[2];
    int nonportable = k->nonportable_cluster || gs_entry_attr(k, "nonPortableClusterSizeAllowed");
    if (size > (nonportable ? 16u : 8u)) return ERR_INVALID_CLUSTER_SIZE;
    int req[3] = {gs_entry_attr(k, "requiredClusterWidth"), gs_entry_attr(k, "requiredClusterHeight"),
                  gs_entry_attr(k, "requiredClusterDepth")};
    if (req[0] > 0 && (d[0] != (unsigned)req[0] || d[1] != (unsigned)req[1] || d[2] != (unsigned)req[2]))
        return ERR_INVALID_CLUSTER_SIZE;
    return 0;
}
