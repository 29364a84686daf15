/* Driver API tiled matrix multiply with shared memory, on the primary context, launched with
 * cuLaunchKernelEx on a created stream; checked against the CPU. usage: drv_matmul KERNEL_DIR */
#include <math.h>

#include "drv_common.h"

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    enum { N = 64, TILE = 16 };
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod;
    void *ptx = read_kernel(argv[1], "matmul.ptx", NULL);
    CU_CHECK(cuModuleLoadData(&mod, ptx));
    CUfunction f;
    CU_CHECK(cuModuleGetFunction(&f, mod, "matmul"));
    int shared = 0;
    CU_CHECK(cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f));
    REQUIRE(shared == 2 * TILE * TILE * (int)sizeof(float));

    static float a[N * N], b[N * N], c[N * N];
    for (int i = 0; i < N * N; i++) { a[i] = (float)(i % 7) - 3.0f; b[i] = (float)(i % 5) * 0.25f; }
    CUdeviceptr da, db, dc;
    CU_CHECK(cuMemAlloc(&da, sizeof a));
    CU_CHECK(cuMemAlloc(&db, sizeof b));
    CU_CHECK(cuMemAlloc(&dc, sizeof c));
    CUstream s;
    CU_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_CHECK(cuMemcpyHtoDAsync(da, a, sizeof a, s));
    CU_CHECK(cuMemcpyHtoDAsync(db, b, sizeof b, s));
    int n = N;
    void *args[] = {&da, &db, &dc, &n};
    CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_PRIORITY, .value.priority = 0};
    CUlaunchConfig cfg = {.gridDimX = N / TILE, .gridDimY = N / TILE, .gridDimZ = 1, .blockDimX = TILE,
                          .blockDimY = TILE, .blockDimZ = 1, .sharedMemBytes = 0, .hStream = s, .attrs = &attr,
                          .numAttrs = 1};
    CU_CHECK(cuLaunchKernelEx(&cfg, f, args, NULL));
    CU_CHECK(cuMemcpyDtoHAsync(c, dc, sizeof c, s));
    CU_CHECK(cuStreamSynchronize(s));
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            float want = 0;
            for (int k = 0; k < N; k++) want += a[i * N + k] * b[k * N + j];
            if (fabsf(c[i * N + j] - want) > 1e-3f) {
                fprintf(stderr, "c[%d][%d] = %f, want %f\n", i, j, c[i * N + j], want);
                return 1;
            }
        }
    CU_CHECK(cuStreamDestroy(s));
    CU_CHECK(cuDevicePrimaryCtxRelease(dev));
    printf("matmul ok: %dx%d, %d bytes of shared memory per block\n", N, N, shared);
    return 0;
}
