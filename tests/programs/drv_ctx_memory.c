/* cuCtxDestroy frees what the context allocated (CUDA Driver API reference, cuCtxDestroy: "Destroys the CUDA
 * context specified by ctx ... all the resources allocated by it" are freed), while memory of the primary
 * context stays: device and pinned host memory made in a context from cuCtxCreate, checked through
 * cuMemGetInfo and by copies after the context is gone. */
#include "drv_common.h"

int main(void) {
    CUdevice dev;
    CUcontext primary = use_primary_context(&dev);
    enum { MB = 1 << 20, N = 64 * MB };
    CUdeviceptr kept, gone, freed_early;
    CU_CHECK(cuMemAlloc(&kept, 4096)); /* the primary context's */
    unsigned v = 0xC0FFEE;
    CU_CHECK(cuMemcpyHtoD(kept, &v, sizeof v));
    size_t free0 = 0, total = 0, free1 = 0, free2 = 0;
    CU_CHECK(cuMemGetInfo(&free0, &total));

    CUcontext ctx;
    CU_CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
    CU_CHECK(cuMemAlloc(&gone, N));
    CU_CHECK(cuMemAlloc(&freed_early, MB));
    CU_CHECK(cuMemFree(freed_early)); /* freed by the program: not freed again */
    void *host = NULL;
    CU_CHECK(cuMemAllocHost(&host, MB));
    CU_CHECK(cuMemcpyHtoD(gone, &v, sizeof v));
    CU_CHECK(cuMemGetInfo(&free1, &total));
    REQUIRE(free1 <= free0 - N);
    CU_CHECK(cuCtxDestroy(ctx));

    CU_CHECK(cuCtxSetCurrent(primary));
    CU_CHECK(cuMemGetInfo(&free2, &total));
    REQUIRE(free2 >= free1 + N); /* the context's 64 MiB are back */
    unsigned got = 0;
    REQUIRE(cuMemcpyDtoH(&got, gone, sizeof got) != CUDA_SUCCESS); /* its memory is gone */
    CU_CHECK(cuMemcpyDtoH(&got, kept, sizeof got)); /* the primary context's is not */
    REQUIRE(got == 0xC0FFEE);
    REQUIRE(cuMemFreeHost(host) != CUDA_SUCCESS); /* its pinned memory too */
    CU_EXPECT(cuCtxDestroy(ctx), CUDA_ERROR_INVALID_VALUE); /* destroyed once */
    CU_CHECK(cuMemFree(kept));
    printf("context memory ok\n");
    return 0;
}
