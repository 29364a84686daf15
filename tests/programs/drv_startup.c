/* Driver calls frameworks make at start-up (PyTorch, cuBLAS):
 * - error log callbacks (CUDA Driver API reference, "Error Log Management"): cuLogsRegisterCallback returns
 *   CUDA_ERROR_INVALID_VALUE without a function and a handle otherwise (the handle is optional);
 *   cuLogsUnregisterCallback takes each registered handle once;
 * - cuOccupancyMaxActiveClusters ("Occupancy"): the cluster size comes from the launch configuration when the
 *   kernel requires none ("Without required sizes, the cluster size must be specified in config, else the
 *   function will return an error"); the clusters that fit are at most the blocks that fit, in clusters.
 * usage: drv_startup KERNEL_DIR */
#include "drv_common.h"

static void on_log(void *data, CUlogLevel level, char *message, size_t length) {
    (void)level;
    (void)message;
    (void)length;
    ++*(int *)data;
}

static CUresult clusters(int *n, CUfunction f, unsigned block, unsigned cx, unsigned cy) {
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = cx;
    attr.value.clusterDim.y = cy;
    attr.value.clusterDim.z = 1;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = block;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.attrs = cx ? &attr : NULL;
    cfg.numAttrs = cx ? 1 : 0;
    return cuOccupancyMaxActiveClusters(n, f, &cfg);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    CUdevice dev;
    use_primary_context(&dev);
    int calls = 0;
    CUlogsCallbackHandle a = NULL, b = NULL;
    CU_EXPECT(cuLogsRegisterCallback(NULL, &calls, &a), CUDA_ERROR_INVALID_VALUE);
    CU_CHECK(cuLogsRegisterCallback(on_log, &calls, &a));
    CU_CHECK(cuLogsRegisterCallback(on_log, &calls, &b));
    CU_CHECK(cuLogsRegisterCallback(on_log, &calls, NULL)); /* callback_out is optional */
    REQUIRE(a != NULL && b != NULL && a != b);
    CU_CHECK(cuLogsUnregisterCallback(a));
    CU_EXPECT(cuLogsUnregisterCallback(a), CUDA_ERROR_INVALID_VALUE);
    CU_CHECK(cuLogsUnregisterCallback(b));
    printf("logs ok\n");

    size_t size;
    void *image = read_kernel(argv[1], "vecadd.ptx", &size);
    CUmodule mod;
    CU_CHECK(cuModuleLoadData(&mod, image));
    free(image);
    CUfunction f;
    CU_CHECK(cuModuleGetFunction(&f, mod, "vecadd"));
    int cc = 0, sms = 0, per_sm = 0, n1 = 0, n2 = 0, n4 = 0;
    CU_CHECK(cuDeviceGetAttribute(&cc, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CU_CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CU_CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, 256, 0));
    if (cc >= 9) { /* thread block clusters: compute capability 9.0 on */
        CU_EXPECT(clusters(&n1, f, 256, 0, 0), CUDA_ERROR_INVALID_CLUSTER_SIZE); /* no size anywhere */
        CU_EXPECT(clusters(&n1, f, 256, 32, 1), CUDA_ERROR_INVALID_CLUSTER_SIZE); /* beyond 8 (portable) */
        CU_CHECK(clusters(&n1, f, 256, 1, 1));
        CU_CHECK(clusters(&n2, f, 256, 2, 1));
        CU_CHECK(clusters(&n4, f, 256, 2, 2));
        REQUIRE(n1 > 0 && n1 <= per_sm * sms);
        REQUIRE(n2 > 0 && n2 <= per_sm * sms / 2 && n4 > 0 && n4 <= n2);
        printf("clusters %d %d %d of %d blocks\n", n1, n2, n4, per_sm * sms);
    }
    printf("startup ok\n");
    return 0;
}
