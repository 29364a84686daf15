/* The driver face: virtual memory management (CUDA driver API, "Virtual Memory Management"):
 * cuMemGetAllocationGranularity, cuMemAddressReserve/Free, cuMemCreate/Release, cuMemMap/Unmap, cuMemSetAccess,
 * cuMemGetAllocationPropertiesFromHandle. The server reserves, creates and maps (gpushim/server/ops_vmm.py);
 * here the arguments are checked, and a reservation is a device range of the pointer table (cudaMemcpyDefault
 * and pointer attributes see device memory there). cuMemExportToShareableHandle and the other IPC entry points
 * stay NOT_SUPPORTED stubs. */
#include <pthread.h>
#include <stdlib.h>

#include "drv_api.h"

#define VMM_GRANULARITY ((size_t)2 << 20) /* minimum and recommended, as current GPUs report */

enum { VMM_ALLOC_PINNED = 1, VMM_LOCATION_DEVICE = 1, VMM_HANDLE_TYPE_MAX = 0x10 };

typedef struct {
    int type;                 /* CUmemAllocationType */
    int requestedHandleTypes; /* CUmemAllocationHandleType bits */
    struct {
        int type, id;
    } location;
    void *win32HandleMetaData;
    unsigned char compressionType, gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
} vmm_prop; /* CUmemAllocationProp */
_Static_assert(sizeof(vmm_prop) == 32, "CUmemAllocationProp is 32 bytes");

typedef struct {
    struct {
        int type, id;
    } location;
    int flags; /* CUmemAccess_flags */
} vmm_access_desc; /* CUmemAccessDesc */

/* Handles the server made, with what cuMemGetAllocationPropertiesFromHandle reports. */
typedef struct {
    uint64_t handle;
    vmm_prop prop;
} vmm_handle_entry;
static vmm_handle_entry *vmm_handles;
static size_t vmm_nhandles, vmm_handles_cap;
static pthread_mutex_t vmm_handles_lock = PTHREAD_MUTEX_INITIALIZER;

static void vmm_handle_add(uint64_t h, const vmm_prop *prop) {
    pthread_mutex_lock(&vmm_handles_lock);
    if (vmm_nhandles == vmm_handles_cap) {
        size_t ncap = vmm_handles_cap ? vmm_handles_cap * 2 : 64;
        vmm_handle_entry *n = realloc(vmm_handles, ncap * sizeof *n);
        if (n) {
            vmm_handles = n;
            vmm_handles_cap = ncap;
        }
    }
    if (vmm_nhandles < vmm_handles_cap) vmm_handles[vmm_nhandles++] = (vmm_handle_entry){h, *prop};
    pthread_mutex_unlock(&vmm_handles_lock);
}

/* Copies the handle's properties to *out (when out is not NULL) and forgets it when drop is set. */
static int vmm_handle_find(uint64_t h, vmm_prop *out, int drop) {
    int found = 0;
    pthread_mutex_lock(&vmm_handles_lock);
    for (size_t i = 0; i < vmm_nhandles; i++) {
        if (vmm_handles[i].handle != h) continue;
        found = 1;
        if (out) *out = vmm_handles[i].prop;
        if (drop) vmm_handles[i] = vmm_handles[--vmm_nhandles];
        break;
    }
    pthread_mutex_unlock(&vmm_handles_lock);
    return found;
}

/* A device allocation's properties: pinned memory on a device that exists. */
static CUresult vmm_check_prop(const vmm_prop *prop) {
    if (!prop || prop->type != VMM_ALLOC_PINNED || prop->location.type != VMM_LOCATION_DEVICE ||
        (unsigned)prop->requestedHandleTypes >= VMM_HANDLE_TYPE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    int n = 0;
    cudaError_t e = gs_device_count(&n);
    if (e) return gs_drv_err(e);
    return prop->location.id >= 0 && prop->location.id < n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static CUresult vmm_run(gs_call *c) {
    cudaError_t e = gs_call_run(c);
    gs_call_end(c);
    return gs_drv_err(e);
}

GS_DRV CUresult gs_cuMemGetAllocationGranularity(size_t *granularity, const vmm_prop *prop, int option) {
    if (!granularity || (option != 0 && option != 1)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = vmm_check_prop(prop);
    if (r) return r;
    *granularity = VMM_GRANULARITY;
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                       unsigned long long flags) {
    if (!ptr || !size || flags) return CUDA_ERROR_INVALID_VALUE;
    int dev = 0;
    CUresult r = gs_drv_enter(&dev);
    if (r) return r;
    gs_call c;
    gs_call_begin(&c, GS_OP_VMM_RESERVE, 4);
    gs_w_int(c.w, dev);
    gs_w_uint(c.w, size);
    gs_w_uint(c.w, alignment);
    gs_w_uint(c.w, addr);
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        *ptr = gs_u64(&c);
        gs_ranges_add((gs_range){(uintptr_t)*ptr, size, dev, cudaMemoryTypeDevice, 0, 0, 0, 0});
    }
    gs_call_end(&c);
    return gs_drv_err(e);
}

GS_DRV CUresult gs_cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    CUresult r = gs_drv_enter(NULL);
    if (r) return r;
    gs_call c;
    gs_call_begin(&c, GS_OP_VMM_FREE, 3);
    gs_w_uint(c.w, 0);
    gs_w_uint(c.w, ptr);
    gs_w_uint(c.w, size);
    r = vmm_run(&c);
    if (!r) gs_ranges_remove((uintptr_t)ptr, cudaMemoryTypeDevice, NULL);
    return r;
}

GS_DRV CUresult gs_cuMemCreate(uint64_t *handle, size_t size, const vmm_prop *prop, unsigned long long flags) {
    if (!handle || !size || flags) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = vmm_check_prop(prop);
    if (!r) r = gs_drv_enter(NULL);
    if (r) return r;
    gs_call c;
    gs_call_begin(&c, GS_OP_VMM_CREATE, 2);
    gs_w_int(c.w, prop->location.id);
    gs_w_uint(c.w, size);
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        *handle = gs_u64(&c);
        vmm_handle_add(*handle, prop);
    }
    gs_call_end(&c);
    return gs_drv_err(e);
}

GS_DRV CUresult gs_cuMemRelease(uint64_t handle) {
    CUresult r = gs_drv_enter(NULL);
    if (r) return r;
    gs_call c;
    gs_call_begin(&c, GS_OP_VMM_FREE, 3);
    gs_w_uint(c.w, 1);
    gs_w_uint(c.w, handle);
    gs_w_uint(c.w, 0);
    r = vmm_run(&c);
    if (!r) vmm_handle_find(handle, NULL, 1);
    return r;
}

GS_DRV CUresult gs_cuMemGetAllocationPropertiesFromHandle(vmm_prop *prop, uint64_t handle) {
    if (!prop) return CUDA_ERROR_INVALID_VALUE;
    return vmm_handle_find(handle, prop, 0) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

GS_DRV CUresult gs_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, uint64_t handle, unsigned long long flags) {
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = gs_drv_enter(NULL);
    if (r) return r;
    gs_call c;
    gs_call_begin(&c, GS_OP_VMM_MAP, 4);
    gs_w_uint(c.w, ptr);
    gs_w_uint(c.w, size);
    gs_w_uint(c.w, offset);
    gs_w_uint(c.w, handle);
    return vmm_run(&c);
}

GS_DRV CUresult gs_cuMemUnmap(CUdeviceptr ptr, size_t size) {
    CUresult r = gs_drv_enter(NULL);
    if (r) return r;
    gs_call c;
    gs_call_begin(&c, GS_OP_VMM_UNMAP, 2);
    gs_w_uint(c.w, ptr);
    gs_w_uint(c.w, size);
    return vmm_run(&c);
}

GS_DRV CUresult gs_cuMemSetAccess(CUdeviceptr ptr, size_t size, const vmm_access_desc *desc, size_t count) {
    if (!desc || !count) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = gs_drv_enter(NULL);
    if (r) return r;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != VMM_LOCATION_DEVICE) return CUDA_ERROR_INVALID_VALUE;
        gs_call c;
        gs_call_begin(&c, GS_OP_VMM_SET_ACCESS, 4);
        gs_w_uint(c.w, ptr);
        gs_w_uint(c.w, size);
        gs_w_int(c.w, desc[i].location.id);
        gs_w_uint(c.w, (unsigned)desc[i].flags);
        if ((r = vmm_run(&c))) return r;
    }
    return CUDA_SUCCESS;
}
