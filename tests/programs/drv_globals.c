/* Module variables through the driver API: cuModuleGetGlobal for __constant__ and __device__ variables
 * (an initialised one read back), the same through a library (cuLibraryLoadData, cuLibraryGetGlobal,
 * cuLibraryGetKernel, cuKernelGetFunction, cuKernelGetAttribute). usage: drv_globals KERNEL_DIR */
#include "drv_common.h"

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    CUdevice dev;
    CUcontext ctx;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    CU_CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
    void *ptx = read_kernel(argv[1], "globals.ptx", NULL);
    CUmodule mod;
    CU_CHECK(cuModuleLoadData(&mod, ptx));
    CUdeviceptr coeffs, counter, init;
    size_t bytes = 0;
    CU_CHECK(cuModuleGetGlobal(&coeffs, &bytes, mod, "coeffs"));
    REQUIRE(bytes == 4 * sizeof(float));
    CU_CHECK(cuModuleGetGlobal(&counter, &bytes, mod, "counter"));
    REQUIRE(bytes == sizeof(unsigned));
    CU_CHECK(cuModuleGetGlobal(&init, NULL, mod, "initialised"));
    CU_EXPECT(cuModuleGetGlobal(&init, NULL, mod, "missing"), CUDA_ERROR_NOT_FOUND);
    int initialised = 0;
    CU_CHECK(cuMemcpyDtoH(&initialised, init, sizeof initialised));
    REQUIRE(initialised == 42);
    /* the pointer attributes of a module variable: device memory of this context */
    unsigned type = 0;
    CU_CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, coeffs));
    REQUIRE(type == CU_MEMORYTYPE_DEVICE);

    float k[4] = {1.0f, 2.0f, 0.5f, 0.25f};
    CU_CHECK(cuMemcpyHtoD(coeffs, k, sizeof k));
    CU_CHECK(cuMemsetD32(counter, 0, 1));
    enum { N = 1000 };
    float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = (float)i / 100.0f;
    CUdeviceptr dx, dy;
    CU_CHECK(cuMemAlloc(&dx, sizeof x));
    CU_CHECK(cuMemAlloc(&dy, sizeof y));
    CU_CHECK(cuMemcpyHtoD(dx, x, sizeof x));
    CUfunction poly;
    CU_CHECK(cuModuleGetFunction(&poly, mod, "poly"));
    int n = N;
    void *args[] = {&dx, &dy, &n};
    CU_CHECK(cuLaunchKernel(poly, (N + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    CU_CHECK(cuMemcpyDtoH(y, dy, sizeof y));
    unsigned count = 0;
    CU_CHECK(cuMemcpyDtoH(&count, counter, sizeof count));
    REQUIRE(count == N);
    for (int i = 0; i < N; i++) {
        float v = x[i], want = k[0] + v * (k[1] + v * (k[2] + v * k[3])) + 42;
        if (y[i] - want > 1e-3f || want - y[i] > 1e-3f) {
            fprintf(stderr, "y[%d] = %f, want %f\n", i, y[i], want);
            return 1;
        }
    }

    /* The same image as a library: its variables are its own, kernels are context-independent handles. */
    CUlibrary lib;
    CU_CHECK(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
    CUkernel kern;
    CU_CHECK(cuLibraryGetKernel(&kern, lib, "poly"));
    CU_EXPECT(cuLibraryGetKernel(&kern, lib, "nope"), CUDA_ERROR_NOT_FOUND);
    CU_CHECK(cuLibraryGetKernel(&kern, lib, "poly"));
    CUfunction kf;
    CU_CHECK(cuKernelGetFunction(&kf, kern));
    int max_threads = 0, nregs = -1;
    CU_CHECK(cuKernelGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, kern, dev));
    CU_CHECK(cuFuncGetAttribute(&nregs, CU_FUNC_ATTRIBUTE_NUM_REGS, kf));
    REQUIRE(max_threads > 0 && nregs >= 0);
    /* cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) raises the limit up to the device's
     * opt-in maximum; cuFuncGetAttribute reads the new value back, and a value past the maximum is refused */
    int optin = 0, dyn = 0;
    CU_CHECK(cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
    CU_CHECK(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin, kern, dev));
    CU_CHECK(cuFuncGetAttribute(&dyn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, kf));
    REQUIRE(dyn == optin);
    CU_EXPECT(cuFuncSetAttribute(kf, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin + 1),
              CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr lib_counter;
    CU_CHECK(cuLibraryGetGlobal(&lib_counter, &bytes, lib, "counter"));
    CU_CHECK(cuMemsetD32(lib_counter, 7, 1));
    CU_CHECK(cuLaunchKernel(kf, 1, 1, 1, 10, 1, 1, 0, NULL, args, NULL));
    CU_CHECK(cuMemcpyDtoH(&count, lib_counter, sizeof count));
    REQUIRE(count == 17);
    size_t off = 99, psize = 0;
    CU_CHECK(cuFuncGetParamInfo(kf, 1, &off, &psize));
    REQUIRE(off == 8 && psize == 8);
    CU_EXPECT(cuFuncGetParamInfo(kf, 3, &off, &psize), CUDA_ERROR_INVALID_VALUE);
    CU_CHECK(cuLibraryUnload(lib));
    CU_EXPECT(cuLibraryGetKernel(&kern, lib, "poly"), CUDA_ERROR_INVALID_HANDLE);
    CU_CHECK(cuCtxDestroy(ctx));
    printf("globals ok: counter %u, module and library variables\n", count);
    return 0;
}
