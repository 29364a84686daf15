/* JIT linking of two PTX files (cuLinkCreate, cuLinkAddFile, cuLinkAddData, cuLinkComplete): a kernel
 * in link_main.ptx calls a device function defined in link_lib.ptx. usage: drv_link KERNEL_DIR */
#include "drv_common.h"

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    CUdevice dev;
    CUcontext ctx;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_CHECK(cuCtxPushCurrent(ctx));

    /* main alone cannot load as a complete program on a GPU (saxpy_op is unresolved); linked it can */
    char info[1024], error[1024];
    CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                           CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[] = {info, (void *)sizeof info, error, (void *)sizeof error};
    CUlinkState link;
    CU_CHECK(cuLinkCreate(4, opts, vals, &link));
    char path[4096];
    snprintf(path, sizeof path, "%s/link_main.ptx", argv[1]);
    CU_CHECK(cuLinkAddFile(link, CU_JIT_INPUT_PTX, path, 0, NULL, NULL));
    size_t size;
    char *lib = read_kernel(argv[1], "link_lib.ptx", &size);
    CU_CHECK(cuLinkAddData(link, CU_JIT_INPUT_PTX, lib, size + 1, "link_lib.ptx", 0, NULL, NULL));
    CU_EXPECT(cuLinkAddData(link, CU_JIT_INPUT_PTX, "garbage", 8, "bad", 0, NULL, NULL), CUDA_ERROR_INVALID_PTX);
    void *image;
    size_t image_size;
    CU_CHECK(cuLinkComplete(link, &image, &image_size));
    REQUIRE(image_size > 0);
    CUmodule mod;
    CU_CHECK(cuModuleLoadData(&mod, image));
    CU_CHECK(cuLinkDestroy(link));

    CUfunction saxpy;
    CU_CHECK(cuModuleGetFunction(&saxpy, mod, "saxpy"));
    enum { N = 4096 };
    float x[N], y[N];
    for (int i = 0; i < N; i++) { x[i] = (float)i; y[i] = 1.0f; }
    CUdeviceptr dx, dy;
    CU_CHECK(cuMemAlloc(&dx, sizeof x));
    CU_CHECK(cuMemAlloc(&dy, sizeof y));
    CU_CHECK(cuMemcpyHtoD(dx, x, sizeof x));
    CU_CHECK(cuMemcpyHtoD(dy, y, sizeof y));
    float a = 3.0f;
    int n = N;
    void *args[] = {&a, &dx, &dy, &n};
    CU_CHECK(cuLaunchKernel(saxpy, N / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CU_CHECK(cuMemcpyDtoH(y, dy, sizeof y));
    for (int i = 0; i < N; i++)
        if (y[i] != 3.0f * (float)i + 1.0f) { fprintf(stderr, "y[%d] = %f\n", i, y[i]); return 1; }
    CUcontext popped;
    CU_CHECK(cuCtxPopCurrent(&popped));
    REQUIRE(popped == ctx);
    printf("link ok: 2 PTX inputs, %zu-byte image\n", image_size);
    return 0;
}
