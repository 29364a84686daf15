/* Mapped pinned memory through the driver's copy and memset calls, as numba-cuda uses it
 * (cuda.mapped_array / memhostalloc(mapped=True)): CUDA Driver API reference, "Unified Addressing": host memory
 * from cuMemHostAlloc is accessed in kernels "at the same pointer value" as on the host, and such a pointer may
 * be passed to the cuMemcpy* and cuMemset* functions as device memory; cuMemHostGetDevicePointer returns it
 * (CU_MEMHOSTALLOC_DEVICEMAP), and cuMemGetAddressRange gives the allocation that contains it.
 * Prints key=value lines; found by numba-cuda's tests/cudadrv/test_host_alloc.py. */
#include "drv_common.h"

int main(void) {
    CUdevice dev;
    use_primary_context(&dev);
    enum { N = 4096 + 100 };
    unsigned char *h = NULL, recv[N], src[N];
    CU_CHECK(cuMemHostAlloc((void **)&h, N, CU_MEMHOSTALLOC_DEVICEMAP));
    CUdeviceptr d = 0;
    CU_CHECK(cuMemHostGetDevicePointer(&d, h, 0));
    printf("same_pointer=%d\n", d == (CUdeviceptr)(uintptr_t)h);

    /* memset through the device pointer: the host sees it once the call returns (synchronous memset) */
    CU_CHECK(cuMemsetD8(d, 0xAB, N));
    CU_CHECK(cuCtxSynchronize());
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= h[i] == 0xAB;
    printf("memset_seen=%d\n", ok);

    /* the host writes, a device-to-host copy from the device pointer reads it */
    for (int i = 0; i < N; i++) h[i] = (unsigned char)(i * 7);
    memset(recv, 0, sizeof recv);
    CU_CHECK(cuMemcpyDtoH(recv, d + 1, N - 1));
    printf("dtoh=%d\n", memcmp(recv, h + 1, N - 1) == 0);

    /* host to device into it, then device to device out of it into device memory */
    for (int i = 0; i < N; i++) src[i] = (unsigned char)(255 - i);
    CU_CHECK(cuMemcpyHtoD(d, src, N));
    printf("htod=%d\n", memcmp(h, src, N) == 0);
    CUdeviceptr dev_buf;
    CU_CHECK(cuMemAlloc(&dev_buf, N));
    CU_CHECK(cuMemcpyDtoD(dev_buf, d, N));
    memset(recv, 0, sizeof recv);
    CU_CHECK(cuMemcpyDtoH(recv, dev_buf, N));
    printf("dtod=%d\n", memcmp(recv, src, N) == 0);

    /* the allocation containing an interior pointer (numba sizes mapped arrays this way) */
    CUdeviceptr base = 0;
    size_t size = 0;
    CU_CHECK(cuMemGetAddressRange(&base, &size, d + 100));
    printf("range=%d\n", base == d && size >= N);

    /* bounds still hold: a copy running past the allocation is refused */
    CUresult past = cuMemcpyDtoH(recv, d + 200, N);
    printf("past_end=%d\n", past != CUDA_SUCCESS);

    CU_CHECK(cuMemFree(dev_buf));
    CU_CHECK(cuMemFreeHost(h));
    printf("done=1\n");
    return 0;
}
