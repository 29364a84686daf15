/* The driver face: virtual memory management (CUDA driver API, "Virtual Memory Management"):
 * cuMemGetAllocationGranularity, cuMemAddressReserve/Free, cuMemCreate/Release, cuMemMap/Unmap, cuMemSetAccess,
 * cuMemGetAllocationPropertiesFromHandle. The server reserves, creates and maps (gpushim/server/ops_vmm.py);
 * here the arguments are checked, and a reservation is a device range of the pointer table (cudaMemcpyDefault
 * and pointer attributes see device memory there). cuMemGetAccess and cuMemRetainAllocationHandle ask the
 * server; shareable handles are POSIX file descriptors only: exporting opens the server's file of the
 * allocation through /proc (the server must be on this host), importing passes the descriptor to the server
 * with the frame (a Unix socket to one server). Other handle types are refused with a logged reason. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gs_transport.h"

#include "drv_api.h"

#define VMM_GRANULARITY ((size_t)2 << 20) /* minimum and recommended, as current GPUs report */

enum { VMM_ALLOC_PINNED = 1, VMM_LOCATION_DEVICE = 1, VMM_HANDLE_TYPE_MAX = 0x10, VMM_HANDLE_POSIX_FD = 1 };

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

/* Handles the server made, with what cuMemGetAllocationPropertiesFromHandle reports, and how many references
 * this process holds (cuMemCreate / import: one; each cuMemRetainAllocationHandle: one more). */
typedef struct {
    uint64_t handle;
    vmm_prop prop;
    unsigned refs;
} vmm_handle_entry;
static vmm_handle_entry *vmm_handles;
static size_t vmm_nhandles, vmm_handles_cap;
static pthread_mutex_t vmm_handles_lock = PTHREAD_MUTEX_INITIALIZER;

static void vmm_handle_add(uint64_t h, const vmm_prop *prop) {
    pthread_mutex_lock(&vmm_handles_lock);
    for (size_t i = 0; i < vmm_nhandles; i++)
        if (vmm_handles[i].handle == h) {
            vmm_handles[i].refs++;
            pthread_mutex_unlock(&vmm_handles_lock);
            return;
        }
    if (vmm_nhandles == vmm_handles_cap) {
        size_t ncap = vmm_handles_cap ? vmm_handles_cap * 2 : 64;
        vmm_handle_entry *n = realloc(vmm_handles, ncap * sizeof *n);
        if (n) {
            vmm_handles = n;
            vmm_handles_cap = ncap;
        }
    }
    if (vmm_nhandles < vmm_handles_cap) vmm_handles[vmm_nhandles++] = (vmm_handle_entry){h, *prop, 1};
    pthread_mutex_unlock(&vmm_handles_lock);
}

/* Copies the handle's properties to *out (when out is not NULL); drop gives back one reference, and the
 * handle is forgotten with its last. */
static int vmm_handle_find(uint64_t h, vmm_prop *out, int drop) {
    int found = 0;
    pthread_mutex_lock(&vmm_handles_lock);
    for (size_t i = 0; i < vmm_nhandles; i++) {
        if (vmm_handles[i].handle != h) continue;
        found = 1;
        if (out) *out = vmm_handles[i].prop;
        if (drop && --vmm_handles[i].refs == 0) vmm_handles[i] = vmm_handles[--vmm_nhandles];
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
    if (prop->requestedHandleTypes & VMM_HANDLE_POSIX_FD) { /* memory cuMemExportToShareableHandle can share */
        gs_call_begin(&c, GS_OP_VMM_CREATE_SHAREABLE, 3);
        gs_w_int(c.w, prop->location.id);
        gs_w_uint(c.w, size);
        gs_w_uint(c.w, (unsigned)prop->requestedHandleTypes);
    } else {
        gs_call_begin(&c, GS_OP_VMM_CREATE, 2);
        gs_w_int(c.w, prop->location.id);
        gs_w_uint(c.w, size);
    }
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

typedef struct {
    int type, id;
} vmm_location; /* CUmemLocation */

GS_DRV CUresult gs_cuMemGetAccess(unsigned long long *flags, const vmm_location *location, CUdeviceptr ptr) {
    if (!flags || !location || location->type != VMM_LOCATION_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = gs_drv_enter(NULL);
    if (r) return r;
    gs_call c;
    gs_call_begin(&c, GS_OP_VMM_GET_ACCESS, 2);
    gs_w_uint(c.w, ptr);
    gs_w_int(c.w, location->id);
    cudaError_t e = gs_call_run(&c);
    if (!e) *flags = gs_u64(&c);
    gs_call_end(&c);
    return gs_drv_err(e);
}

GS_DRV CUresult gs_cuMemRetainAllocationHandle(uint64_t *handle, void *addr) {
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = gs_drv_enter(NULL);
    if (r) return r;
    gs_call c;
    gs_call_begin(&c, GS_OP_VMM_RETAIN, 1);
    gs_w_uint(c.w, (uintptr_t)addr);
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        *handle = gs_u64(&c);
        vmm_prop prop = {.type = VMM_ALLOC_PINNED, .location = {VMM_LOCATION_DEVICE, (int)gs_u64(&c)}};
        (void)gs_u64(&c); /* the size */
        prop.requestedHandleTypes = (int)gs_u64(&c);
        vmm_handle_add(*handle, &prop); /* known already: one more reference */
    }
    gs_call_end(&c);
    return gs_drv_err(e);
}

static CUresult vmm_handle_type_refused(const char *fn, int type) {
    gs_warn_once(fn, "%s: handle type %d is not supported by gpushim (only CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR); "
                 "it returns CUDA_ERROR_NOT_SUPPORTED", fn, type);
    return CUDA_ERROR_NOT_SUPPORTED;
}

GS_DRV CUresult gs_cuMemExportToShareableHandle(void *shareable, uint64_t handle, int type, unsigned long long flags) {
    if (!shareable || flags) return CUDA_ERROR_INVALID_VALUE;
    if (type != VMM_HANDLE_POSIX_FD) return vmm_handle_type_refused("cuMemExportToShareableHandle", type);
    CUresult r = gs_drv_enter(NULL);
    if (r) return r;
    gs_call c;
    gs_call_begin(&c, GS_OP_VMM_EXPORT, 1);
    gs_w_uint(c.w, handle);
    cudaError_t e = gs_call_run(&c);
    long pid = 0;
    int sfd = -1;
    if (!e) {
        pid = (long)gs_u64(&c);
        sfd = (int)gs_u64(&c);
    }
    gs_call_end(&c);
    if (e) return gs_drv_err(e);
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/fd/%d", pid, sfd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        gs_log(1, "cuMemExportToShareableHandle: cannot open the server's file of the allocation %s: %s (the "
               "server must run on this host, as the same user)", path, strerror(errno));
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    *(int *)shareable = fd;
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuMemImportFromShareableHandle(uint64_t *handle, void *os_handle, int type) {
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    if (type != VMM_HANDLE_POSIX_FD) return vmm_handle_type_refused("cuMemImportFromShareableHandle", type);
    int fd = (int)(intptr_t)os_handle; /* the descriptor itself, cast to a pointer, as CUDA documents */
    if (fd < 0 || fcntl(fd, F_GETFD) < 0) return CUDA_ERROR_INVALID_VALUE;
    if (!gs_transport_is_unix()) {
        gs_warn_once("cuMemImportFromShareableHandle", "cuMemImportFromShareableHandle needs a Unix socket to one "
                     "server (a descriptor cannot travel over TCP or through several servers); it returns "
                     "CUDA_ERROR_NOT_SUPPORTED");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    int dev = 0;
    CUresult r = gs_drv_enter(&dev);
    if (r) return r;
    gs_call c;
    gs_call_begin(&c, GS_OP_VMM_IMPORT, 1);
    gs_w_int(c.w, dev);
    c.pass_fd = fd; /* the server gets its own copy; the caller still owns fd */
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        *handle = gs_u64(&c);
        vmm_prop prop = {.type = VMM_ALLOC_PINNED, .requestedHandleTypes = VMM_HANDLE_POSIX_FD,
                         .location = {VMM_LOCATION_DEVICE, dev}};
        vmm_handle_add(*handle, &prop);
    }
    gs_call_end(&c);
    return gs_drv_err(e);
}
