/* cuCtxDestroy frees what the context allocated (CUDA Driver API reference, cuCtxDestroy: "Destroys the CUDA
 * context specified by ctx ... all the resources allocated by it" are freed), while memory of the primary
 * context stays: device and pinned host memory made in a context from cuCtxCreate, checked through
 * cuMemGetInfo and by copies after the context is gone; its streams, events and modules, whose handles are
 * then invalid (CUDA_ERROR_INVALID_HANDLE, "a resource handle passed to the API call was not a valid
 * resource handle"), while the primary context's stay usable.
 * usage: drv_ctx_memory [KERNEL_DIR [pause]] - with "pause", prints phase=created / phase=destroyed and waits
 * for a line on stdin after each, so the test can read the server's STATUS. */
#include "drv_common.h"

static void phase(int pause, const char *name) {
    if (!pause) return;
    printf("phase=%s\n", name);
    fflush(stdout);
    char line[8];
    if (!fgets(line, sizeof line, stdin)) exit(3);
}

int main(int argc, char **argv) {
    const char *kernels = argc > 1 ? argv[1] : NULL;
    int pause = argc > 2 && strcmp(argv[2], "pause") == 0;
    CUdevice dev;
    CUcontext primary = use_primary_context(&dev);
    enum { MB = 1 << 20, N = 64 * MB };
    CUdeviceptr kept, gone, freed_early;
    CU_CHECK(cuMemAlloc(&kept, 4096)); /* the primary context's */
    unsigned v = 0xC0FFEE;
    CU_CHECK(cuMemcpyHtoD(kept, &v, sizeof v));
    size_t free0 = 0, total = 0, free1 = 0, free2 = 0;
    CU_CHECK(cuMemGetInfo(&free0, &total));

    CUstream kept_stream;
    CUevent kept_event;
    CU_CHECK(cuStreamCreate(&kept_stream, CU_STREAM_NON_BLOCKING)); /* the primary context's */
    CU_CHECK(cuEventCreate(&kept_event, 0));

    CUcontext ctx;
    CU_CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
    CUstream streams[3];
    CUevent events[2];
    for (int i = 0; i < 3; i++) CU_CHECK(cuStreamCreateWithPriority(&streams[i], 0, 0));
    for (int i = 0; i < 2; i++) CU_CHECK(cuEventCreate(&events[i], 0));
    CU_CHECK(cuStreamDestroy(streams[2])); /* destroyed by the program: not destroyed again */
    CU_CHECK(cuEventRecord(events[0], streams[0]));
    CUcontext of = NULL;
    CU_CHECK(cuStreamGetCtx(streams[0], &of));
    REQUIRE(of == ctx); /* cuStreamGetCtx: the context the stream was created in */
    CU_CHECK(cuStreamGetCtx(kept_stream, &of));
    REQUIRE(of == primary);
    CUmodule mod = NULL;
    CUfunction fn;
    if (kernels) {
        void *ptx = read_kernel(kernels, "vecadd.ptx", NULL);
        CU_CHECK(cuModuleLoadData(&mod, ptx));
        free(ptx);
        CU_CHECK(cuModuleGetFunction(&fn, mod, "vecadd"));
    }
    phase(pause, "created");
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
    phase(pause, "destroyed");
    CU_EXPECT(cuStreamQuery(streams[0]), CUDA_ERROR_INVALID_HANDLE);
    CU_EXPECT(cuStreamSynchronize(streams[1]), CUDA_ERROR_INVALID_HANDLE);
    CU_EXPECT(cuEventQuery(events[0]), CUDA_ERROR_INVALID_HANDLE);
    CU_EXPECT(cuEventRecord(events[1], kept_stream), CUDA_ERROR_INVALID_HANDLE);
    if (kernels) CU_EXPECT(cuModuleGetFunction(&fn, mod, "vecadd"), CUDA_ERROR_INVALID_HANDLE);
    CU_CHECK(cuEventRecord(kept_event, kept_stream)); /* the primary context's stream and event live on */
    CU_CHECK(cuStreamSynchronize(kept_stream));
    CU_CHECK(cuEventQuery(kept_event));
    CU_CHECK(cuMemGetInfo(&free2, &total));
    REQUIRE(free2 >= free1 + N); /* the context's 64 MiB are back */
    unsigned got = 0;
    REQUIRE(cuMemcpyDtoH(&got, gone, sizeof got) != CUDA_SUCCESS); /* its memory is gone */
    CU_CHECK(cuMemcpyDtoH(&got, kept, sizeof got)); /* the primary context's is not */
    REQUIRE(got == 0xC0FFEE);
    REQUIRE(cuMemFreeHost(host) != CUDA_SUCCESS); /* its pinned memory too */
    CU_EXPECT(cuCtxDestroy(ctx), CUDA_ERROR_INVALID_CONTEXT); /* destroyed once: no longer a valid handle */
    CU_CHECK(cuMemFree(kept));
    CU_CHECK(cuEventDestroy(kept_event));
    CU_CHECK(cuStreamDestroy(kept_stream));
    printf("context memory ok\n");
    return 0;
}
