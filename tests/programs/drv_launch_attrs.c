/* cuLaunchKernelEx with launch attributes (they travel to the server in LAUNCH_EX): a launch with many
 * attributes at once computes the right result and its launch completion event completes; CUDA's checks of
 * the cluster shape; bad attributes.
 * usage: drv_launch_attrs KERNEL_DIR */
#include <stdint.h>

#include "drv_common.h"

enum { N = 4096, THREADS = 128 };

static void set_cluster(CUlaunchAttribute *a, unsigned x, unsigned y, unsigned z) {
    a->id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a->value.clusterDim.x = x, a->value.clusterDim.y = y, a->value.clusterDim.z = z;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    CUcontext ctx;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU_CHECK(cuCtxSetCurrent(ctx));
    size_t size;
    void *image = read_kernel(argv[1], "vecadd.ptx", &size);
    CUmodule mod;
    CU_CHECK(cuModuleLoadData(&mod, image));
    free(image);
    CUfunction add;
    CU_CHECK(cuModuleGetFunction(&add, mod, "vecadd"));

    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *c = malloc(N * sizeof *c);
    for (int i = 0; i < N; i++) a[i] = (float)i, b[i] = 0.5f * (float)i;
    CUdeviceptr da, db, dc;
    CU_CHECK(cuMemAlloc(&da, N * sizeof(float)));
    CU_CHECK(cuMemAlloc(&db, N * sizeof(float)));
    CU_CHECK(cuMemAlloc(&dc, N * sizeof(float)));
    CU_CHECK(cuMemcpyHtoD(da, a, N * sizeof(float)));
    CU_CHECK(cuMemcpyHtoD(db, b, N * sizeof(float)));
    CU_CHECK(cuMemsetD32(dc, 0, N));
    int n = N;
    void *params[] = {&da, &db, &dc, &n};
    CUstream s;
    CU_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUevent done;
    CU_CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));

    /* Every kind of attribute a launch takes, at once (cuda.h, CUlaunchAttributeID). */
    CUlaunchAttribute at[10];
    memset(at, 0, sizeof at);
    set_cluster(&at[0], 2, 1, 1); /* 32 blocks: a multiple of 2 */
    at[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY, at[1].value.priority = -1;
    at[2].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    at[2].value.programmaticStreamSerializationAllowed = 1;
    at[3].id = CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, at[3].value.memSyncDomain = CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE;
    at[4].id = CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP;
    at[4].value.memSyncDomainMap.default_ = 0, at[4].value.memSyncDomainMap.remote = 1;
    at[5].id = CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
    at[5].value.accessPolicyWindow.base_ptr = (void *)(uintptr_t)da;
    at[5].value.accessPolicyWindow.num_bytes = N * sizeof(float);
    at[5].value.accessPolicyWindow.hitRatio = 0.5f;
    at[5].value.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
    at[5].value.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
    at[6].id = CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, at[6].value.sharedMemCarveout = 50;
    at[7].id = CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT, at[7].value.launchCompletionEvent.event = done;
    at[8].id = CU_LAUNCH_ATTRIBUTE_IGNORE;
    at[9].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, at[9].value.cooperative = 0;
    CUlaunchConfig cfg = {.gridDimX = N / THREADS, .gridDimY = 1, .gridDimZ = 1, .blockDimX = THREADS,
                          .blockDimY = 1, .blockDimZ = 1, .hStream = s, .attrs = at, .numAttrs = 10};
    CU_CHECK(cuLaunchKernelEx(&cfg, add, params, NULL));
    CU_CHECK(cuEventSynchronize(done)); /* the launch completion event completes */
    CU_CHECK(cuEventQuery(done));
    CU_CHECK(cuStreamSynchronize(s));
    CU_CHECK(cuMemcpyDtoH(c, dc, N * sizeof(float)));
    int bad = 0;
    for (int i = 0; i < N; i++) bad += c[i] != 1.5f * (float)i;
    printf("attrs_result_bad=%d\n", bad);

    /* CUDA Programming Guide, "Thread Block Clusters": the grid is a multiple of the cluster size in each
     * dimension, 8 blocks is the portable maximum; otherwise CUDA_ERROR_INVALID_CLUSTER_SIZE ("a kernel launch
     * error due to cluster misconfiguration"), returned by the launch itself. */
    CUlaunchConfig one = cfg;
    one.numAttrs = 1;
    set_cluster(&at[0], 3, 1, 1); /* 32 blocks are not a multiple of 3 */
    printf("cluster_3=%d\n", (int)cuLaunchKernelEx(&one, add, params, NULL));
    set_cluster(&at[0], 16, 1, 1); /* non-portable size, the kernel does not allow it */
    printf("cluster_16=%d\n", (int)cuLaunchKernelEx(&one, add, params, NULL));
    /* the kernel allows a non-portable size: 16 blocks (the most on compute capability 9.0) */
    CU_CHECK(cuFuncSetAttribute(add, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
    printf("cluster_16_allowed=%d\n", (int)cuLaunchKernelEx(&one, add, params, NULL));
    CU_CHECK(cuFuncSetAttribute(add, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 0));
    set_cluster(&at[0], 0, 1, 1);
    printf("cluster_0=%d\n", (int)cuLaunchKernelEx(&one, add, params, NULL));
    set_cluster(&at[0], 8, 1, 1);
    printf("cluster_8=%d\n", (int)cuLaunchKernelEx(&one, add, params, NULL));
    /* graphs-only attribute on a plain launch (cuda.h: "passing it to a launch in a non-capturing stream
     * will result in an error"), an id no CUDA has, an event that does not exist */
    at[0].id = CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE;
    printf("graphs_only=%d\n", (int)cuLaunchKernelEx(&one, add, params, NULL));
    at[0].id = (CUlaunchAttributeID)99;
    printf("unknown_id=%d\n", (int)cuLaunchKernelEx(&one, add, params, NULL));
    at[0].id = CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT;
    at[0].value.launchCompletionEvent.event = (CUevent)(uintptr_t)0x1234;
    printf("bad_event=%d\n", (int)cuLaunchKernelEx(&one, add, params, NULL));
    one.attrs = NULL;
    printf("null_attrs=%d\n", (int)cuLaunchKernelEx(&one, add, params, NULL));
    CU_CHECK(cuCtxSynchronize()); /* nothing bad was queued */

    /* cuTensorMapEncodeTiled (cuBLASLt's sm_90 kernels read TMA descriptors): the device's driver encodes it */
    CUtensorMap tm;
    memset(&tm, 0, sizeof tm);
    cuuint64_t dims[2] = {64, 64}, strides[1] = {64 * sizeof(float)};
    cuuint32_t box[2] = {32, 32}, elem[2] = {1, 1};
    CUresult r = cuTensorMapEncodeTiled(&tm, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)(uintptr_t)da, dims, strides,
                                        box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                        CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    int nonzero = 0;
    for (size_t i = 0; i < sizeof tm.opaque / sizeof tm.opaque[0]; i++) nonzero |= tm.opaque[i] != 0;
    printf("tensormap=%d nonzero=%d\n", (int)r, nonzero);
    printf("tensormap_replace=%d\n", (int)cuTensorMapReplaceAddress(&tm, (void *)(uintptr_t)db));
    printf("tensormap_replace_null=%d\n", (int)cuTensorMapReplaceAddress(NULL, (void *)(uintptr_t)db));
    printf("tensormap_rank0=%d\n", (int)cuTensorMapEncodeTiled(&tm, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 0,
                                                                 (void *)(uintptr_t)da, dims, strides, box, elem,
                                                                 0, 0, 0, 0));
    printf("tensormap_nodims=%d\n", (int)cuTensorMapEncodeTiled(&tm, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2,
                                                                  (void *)(uintptr_t)da, NULL, strides, box, elem,
                                                                  0, 0, 0, 0));
    printf("OK\n");
    return 0;
}
