/* Driver API virtual memory management (CUDA Driver API reference, "Virtual Memory Management"): the
 * granularity, a reservation with two physical allocations mapped side by side, access, copies across the
 * boundary, a kernel writing the mapped range, one allocation mapped at two addresses, release while
 * mapped, unmap, and the documented refusals. usage: drv_vmm KERNEL_DIR */
#include "drv_common.h"

static CUmemAllocationProp device_prop(CUdevice dev) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    return prop;
}

static void allow(CUdeviceptr p, size_t n, CUdevice dev, CUmemAccess_flags flags) {
    CUmemAccessDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = dev;
    desc.flags = flags;
    CU_CHECK(cuMemSetAccess(p, n, &desc, 1));
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    CUdevice dev;
    use_primary_context(&dev);

    int vmm = 0;
    CU_CHECK(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
    REQUIRE(vmm == 1);

    /* cuMemGetAllocationGranularity: sizes passed to cuMemCreate/cuMemMap/cuMemAddressReserve must be
     * multiples of the minimum granularity; the recommended one is a multiple of it. */
    CUmemAllocationProp prop = device_prop(dev);
    size_t g = 0, rec = 0;
    CU_CHECK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CU_CHECK(cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    REQUIRE(g > 0 && rec >= g && rec % g == 0);
    CUmemAllocationProp bad = prop;
    bad.location.id = 4096;
    CU_EXPECT(cuMemGetAllocationGranularity(&g, &bad, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_DEVICE);
    printf("granularity %zu recommended %zu\n", g, rec);

    /* cuMemCreate: size must be a multiple of the granularity; flags are for future use and must be 0. */
    CUmemGenericAllocationHandle h1, h2;
    CU_EXPECT(cuMemCreate(&h1, g + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CU_EXPECT(cuMemCreate(&h1, g, &prop, 1), CUDA_ERROR_INVALID_VALUE);
    size_t free0 = 0, total = 0;
    CU_CHECK(cuMemGetInfo(&free0, &total));
    CU_CHECK(cuMemCreate(&h1, g, &prop, 0));
    CU_CHECK(cuMemCreate(&h2, g, &prop, 0));
    size_t free1 = 0;
    CU_CHECK(cuMemGetInfo(&free1, &total));
    REQUIRE(free1 <= free0 - 2 * g); /* physical memory is device memory in use */
    CUmemAllocationProp got;
    CU_CHECK(cuMemGetAllocationPropertiesFromHandle(&got, h1));
    REQUIRE(got.type == CU_MEM_ALLOCATION_TYPE_PINNED && got.location.id == dev);

    /* cuMemAddressReserve: a virtual range of 4 granules, aligned as asked; nothing is mapped there yet */
    CUdeviceptr va = 0;
    CU_EXPECT(cuMemAddressReserve(&va, 4 * g, 0, 0, 1), CUDA_ERROR_INVALID_VALUE); /* flags must be 0 */
    CU_CHECK(cuMemAddressReserve(&va, 4 * g, 4 * g, 0, 0));
    REQUIRE(va != 0 && va % (4 * g) == 0);

    /* cuMemMap: h1 at va, h2 right after it; the same range cannot be mapped twice */
    CU_CHECK(cuMemMap(va, g, 0, h1, 0));
    CU_CHECK(cuMemMap(va + g, g, 0, h2, 0));
    CU_EXPECT(cuMemMap(va, g, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);
    /* cuMemSetAccess: "all mappings start with no accessibility setup": a copy into the range fails until
     * access is granted */
    float probe = 1.0f;
    REQUIRE(cuMemcpyHtoD(va, &probe, sizeof probe) != CUDA_SUCCESS);
    allow(va, 2 * g, dev, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

    /* copies across the boundary of the two allocations: the virtual range is contiguous */
    size_t n = 2 * g / sizeof(float);
    float *host = malloc(2 * g), *back = malloc(2 * g);
    for (size_t i = 0; i < n; i++) host[i] = (float)i;
    CU_CHECK(cuMemcpyHtoD(va, host, 2 * g));
    memset(back, 0, 2 * g);
    CU_CHECK(cuMemcpyDtoH(back, va + g - 64, 128));
    REQUIRE(memcmp(back, (char *)host + g - 64, 128) == 0);

    /* a kernel reads and writes the mapped range: c = a + b over both allocations */
    size_t size;
    void *image = read_kernel(argv[1], "vecadd.ptx", &size);
    CUmodule mod;
    CU_CHECK(cuModuleLoadData(&mod, image));
    free(image);
    CUfunction add;
    CU_CHECK(cuModuleGetFunction(&add, mod, "vecadd"));
    int count = (int)n;
    CUdeviceptr a = va, b = va, c = va;
    void *args[] = {&a, &b, &c, &count};
    CU_CHECK(cuLaunchKernel(add, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CU_CHECK(cuCtxSynchronize());
    CU_CHECK(cuMemcpyDtoH(back, va, 2 * g));
    for (size_t i = 0; i < n; i++) REQUIRE(back[i] == 2.0f * (float)i);
    printf("kernel over the mapped range ok\n");

    /* one allocation mapped at two addresses is one memory: h2 again at va + 2g */
    CU_CHECK(cuMemMap(va + 2 * g, g, 0, h2, 0));
    allow(va + 2 * g, g, dev, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    float x = 0;
    CU_CHECK(cuMemcpyDtoH(&x, va + 2 * g + 4 * sizeof(float), sizeof x));
    REQUIRE(x == 2.0f * (float)(n / 2 + 4));
    probe = 42.0f;
    CU_CHECK(cuMemcpyHtoD(va + 2 * g, &probe, sizeof probe));
    CU_CHECK(cuMemcpyDtoH(&x, va + g, sizeof x));
    REQUIRE(x == 42.0f);

    /* cuMemFree only frees cuMemAlloc's memory */
    REQUIRE(cuMemFree(va) != CUDA_SUCCESS);
    /* cuMemUnmap: "cuMemUnmap cannot unmap a sub-range of an address range mapped by cuMemCreate / cuMemMap" */
    CU_EXPECT(cuMemUnmap(va, g / 2), CUDA_ERROR_INVALID_VALUE);
    /* cuMemRelease: "The memory allocation will be freed when all outstanding mappings to the memory are
     * unmapped": released while mapped, h2's bytes are still there through its other mapping */
    CU_CHECK(cuMemRelease(h2));
    CU_CHECK(cuMemUnmap(va + g, g));
    CU_CHECK(cuMemcpyDtoH(&x, va + 2 * g, sizeof x));
    REQUIRE(x == 42.0f);
    /* an unmapped range is no longer accessible */
    REQUIRE(cuMemcpyDtoH(&x, va + g, sizeof x) != CUDA_SUCCESS);
    CU_CHECK(cuMemUnmap(va + 2 * g, g));
    CU_CHECK(cuMemUnmap(va, g));
    CU_CHECK(cuMemRelease(h1));
    size_t free2 = 0;
    CU_CHECK(cuMemGetInfo(&free2, &total));
    REQUIRE(free2 >= free1 + 2 * g); /* both allocations are freed */

    /* cuMemAddressFree: the size must be the reserved one; the range can be reserved again */
    CU_EXPECT(cuMemAddressFree(va, g), CUDA_ERROR_INVALID_VALUE);
    CU_CHECK(cuMemAddressFree(va, 4 * g));
    CUdeviceptr again = 0;
    CU_CHECK(cuMemAddressReserve(&again, 4 * g, 0, va, 0));
    CU_CHECK(cuMemAddressFree(again, 4 * g));
    free(host);
    free(back);
    printf("vmm ok\n");
    return 0;
}
