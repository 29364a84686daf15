/* Driver API vector add: cuInit, a created context, a module loaded as PTX (cuModuleLoadData), a fat
 * binary (cuModuleLoadFatBinary), a cubin (cuModuleLoadDataEx) or from a file (cuModuleLoad), kernel
 * arguments as an array and as a packed buffer (CU_LAUNCH_PARAM_BUFFER_POINTER).
 * usage: drv_vecadd KERNEL_DIR ptx|fatbin|cubin|file */
#include "drv_common.h"

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    const char *dir = argv[1], *mode = argv[2];
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr d = 0;
    /* Driver API reference, Initialization: "cuInit() must be called before calling any other function
     * from the driver API"; before it, calls fail with CUDA_ERROR_NOT_INITIALIZED. cuInit: "Currently, the
     * Flags parameter must be 0"; cuDeviceGet: an ordinal past the count is CUDA_ERROR_INVALID_DEVICE. */
    CU_EXPECT(cuDeviceGet(&dev, 0), CUDA_ERROR_NOT_INITIALIZED);
    CU_EXPECT(cuInit(1), CUDA_ERROR_INVALID_VALUE); /* flags must be 0 */
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    CU_EXPECT(cuDeviceGet(&dev, 4096), CUDA_ERROR_INVALID_DEVICE);
    /* No context current yet: cuMemAlloc's documented CUDA_ERROR_INVALID_CONTEXT. */
    CU_EXPECT(cuMemAlloc(&d, 1024), CUDA_ERROR_INVALID_CONTEXT);
    CU_CHECK(cuCtxCreate(&ctx, NULL, 0, dev));

    CUmodule mod;
    size_t size;
    void *image = NULL;
    if (!strcmp(mode, "ptx")) {
        image = read_kernel(dir, "vecadd.ptx", &size);
        CU_CHECK(cuModuleLoadData(&mod, image));
    } else if (!strcmp(mode, "fatbin")) {
        image = read_kernel(dir, "vecadd.fatbin", &size);
        CU_CHECK(cuModuleLoadFatBinary(&mod, image));
    } else if (!strcmp(mode, "cubin")) {
        image = read_kernel(dir, "vecadd.cubin", &size);
        char log[256] = "unchanged";
        CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
        void *vals[] = {log, (void *)(size_t)sizeof log};
        CU_CHECK(cuModuleLoadDataEx(&mod, image, 2, opts, vals));
    } else {
        char path[4096];
        snprintf(path, sizeof path, "%s/vecadd.ptx", dir);
        CU_CHECK(cuModuleLoad(&mod, path));
        CU_EXPECT(cuModuleLoad(&mod, "/nonexistent/x.ptx"), CUDA_ERROR_FILE_NOT_FOUND);
    }
    free(image);
    CU_EXPECT(cuModuleLoadData(&mod, "not a module"), CUDA_ERROR_INVALID_IMAGE);

    CUfunction add, scale;
    CU_CHECK(cuModuleGetFunction(&add, mod, "vecadd"));
    CU_CHECK(cuModuleGetFunction(&scale, mod, "scale"));
    /* cuModuleGetFunction: "If no function of that name exists, cuModuleGetFunction() returns
     * CUDA_ERROR_NOT_FOUND." */
    CU_EXPECT(cuModuleGetFunction(&scale, mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);

    enum { N = 50000 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *c = malloc(N * sizeof *c);
    for (int i = 0; i < N; i++) { a[i] = (float)i; b[i] = 2.0f * (float)i + 1.0f; }
    CUdeviceptr da, db, dc;
    CU_CHECK(cuMemAlloc(&da, N * sizeof(float)));
    CU_CHECK(cuMemAlloc(&db, N * sizeof(float)));
    CU_CHECK(cuMemAlloc(&dc, N * sizeof(float)));
    CU_CHECK(cuMemcpyHtoD(da, a, N * sizeof(float)));
    CU_CHECK(cuMemcpyHtoD(db, b, N * sizeof(float)));
    int n = N;
    void *args[] = {&da, &db, &dc, &n};
    CU_CHECK(cuLaunchKernel(add, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    /* CUDA: a block over the device's limit is an invalid launch argument */
    CU_EXPECT(cuLaunchKernel(add, 1, 1, 1, 4096, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);

    /* scale(float *x, float f, int n) with a packed argument buffer: x at 0, f at 8, n at 12 */
    struct { CUdeviceptr x; float f; int n; } packed = {dc, 0.5f, N};
    size_t packed_size = sizeof packed;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                     CU_LAUNCH_PARAM_END};
    CU_CHECK(cuLaunchKernel(scale, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, NULL, extra));
    /* cuLaunchKernel: "It is an error to specify both kernelParams and extra (both non-NULL)" */
    CU_EXPECT(cuLaunchKernel(scale, 1, 1, 1, 32, 1, 1, 0, NULL, args, extra), CUDA_ERROR_INVALID_VALUE);
    CU_CHECK(cuCtxSynchronize());
    CU_CHECK(cuMemcpyDtoH(c, dc, N * sizeof(float)));
    for (int i = 0; i < N; i++) {
        float want = (a[i] + b[i]) * 0.5f;
        if (c[i] != want) { fprintf(stderr, "c[%d] = %f, want %f\n", i, c[i], want); return 1; }
    }
    CU_CHECK(cuMemFree(da));
    CU_CHECK(cuMemFree(db));
    CU_CHECK(cuMemFree(dc));
    CU_CHECK(cuModuleUnload(mod));
    CU_EXPECT(cuModuleGetFunction(&add, mod, "vecadd"), CUDA_ERROR_INVALID_HANDLE);
    CU_CHECK(cuCtxDestroy(ctx));
    printf("vecadd %s ok: %d elements\n", mode, N);
    return 0;
}
