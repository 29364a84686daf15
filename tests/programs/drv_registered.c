/* Registered host memory through the driver API, as numba-cuda's mempin(mapped=True) uses it: Driver API
 * reference, cuMemHostRegister: CU_MEMHOSTREGISTER_DEVICEMAP "Maps the allocation into the CUDA address space.
 * The device pointer to the memory may be obtained by calling cuMemHostGetDevicePointer()", which "may or may
 * not match the original host pointer" and matches it only where
 * CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM is non-zero. A PTX kernel (cuModuleLoadData)
 * scales malloc'd, unaligned memory through the device pointer; cuMemHostUnregister keeps the data.
 * usage: drv_registered KERNEL_DIR. Prints key=value lines. */
#include <stdint.h>

#include "drv_common.h"

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    CUdevice dev;
    use_primary_context(&dev);
    int attr = -1;
    CU_CHECK(cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, dev));
    printf("can_use_host_pointer=%d\n", attr);
    CUmodule mod;
    void *image = read_kernel(argv[1], "vecadd.ptx", NULL);
    CU_CHECK(cuModuleLoadData(&mod, image));
    free(image);
    CUfunction scale;
    CU_CHECK(cuModuleGetFunction(&scale, mod, "scale"));

    int n = 3000;
    char *raw = malloc(n * sizeof(float) + 64);
    float *h = (float *)(raw + 4); /* not page aligned */
    for (int i = 0; i < n; i++) h[i] = (float)i;
    CU_CHECK(cuMemHostRegister(h, n * sizeof(float), CU_MEMHOSTREGISTER_DEVICEMAP));
    CU_EXPECT(cuMemHostRegister(h, 16, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CUdeviceptr d = 0;
    CU_CHECK(cuMemHostGetDevicePointer(&d, h, 0));
    printf("same_pointer=%d\n", d == (CUdeviceptr)(uintptr_t)h);
    float f = 2.0f;
    void *args[] = {&d, &f, &n};
    CU_CHECK(cuLaunchKernel(scale, (n + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    CU_CHECK(cuCtxSynchronize());
    int errors = 0;
    for (int i = 0; i < n; i++) errors += h[i] != 2.0f * (float)i;
    printf("kernel_rw_errors=%d\n", errors);
    /* the device pointer is device memory to the copy functions */
    float back[2] = {0, 0};
    CU_CHECK(cuMemcpyDtoH(back, d + 10 * sizeof(float), sizeof back));
    printf("dtoh=%d\n", back[0] == 20.0f && back[1] == 22.0f);
    CU_CHECK(cuMemHostUnregister(h));
    errors = 0;
    for (int i = 0; i < n; i++) errors += h[i] != 2.0f * (float)i;
    printf("after_unregister_errors=%d\n", errors);
    CU_EXPECT(cuMemHostUnregister(h), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CU_EXPECT(cuMemHostGetDevicePointer(&d, h, 0), CUDA_ERROR_INVALID_VALUE);
    free(raw);
    CU_CHECK(cuModuleUnload(mod));
    printf("done=1\n");
    return 0;
}
