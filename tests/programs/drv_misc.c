/* The driver API around the kernels: cuGetProcAddress (versions, per-thread variants, unknown names,
 * stubs), error strings, device queries, the context stack, pitched/2D/3D copies, 8/16/32-bit memsets,
 * pointer attributes, streams, events, host functions and stream memory operations, occupancy.
 * usage: drv_misc KERNEL_DIR */
#include <dlfcn.h>

#include "drv_common.h"

static int host_calls;
static void CUDA_CB on_host(void *data) { host_calls += *(int *)data; }

int main(int argc, char **argv) {
    if (argc < 2) return 2;

    /* ---- cuGetProcAddress: the newest version not newer than the caller's (CUDA programming guide,
     * "Driver Entry Point Access"); Driver API reference, cuGetProcAddress: an unknown symbol or one newer
     * than cudaVersion returns CUDA_ERROR_NOT_FOUND with CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND /
     * CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT in symbolStatus; flags outside CU_GET_PROC_ADDRESS_*
     * are CUDA_ERROR_INVALID_VALUE ---- */
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    CU_CHECK(cuGetProcAddress("cuMemAlloc", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    REQUIRE(q == CU_GET_PROC_ADDRESS_SUCCESS && fn == (void *)cuMemAlloc_v2);
    void *legacy = NULL;
    CU_CHECK(cuGetProcAddress("cuMemAlloc", &legacy, 3000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    REQUIRE(legacy && legacy != fn && legacy == dlsym(RTLD_DEFAULT, "cuMemAlloc"));
    CU_CHECK(cuGetProcAddress("cuMemcpyHtoD", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &q));
    REQUIRE(fn == dlsym(RTLD_DEFAULT, "cuMemcpyHtoD_v2_ptds"));
    CU_CHECK(cuGetProcAddress("cuMemcpyHtoD", &fn, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &q));
    REQUIRE(fn == dlsym(RTLD_DEFAULT, "cuMemcpyHtoD_v2"));
    CU_EXPECT(cuGetProcAddress("cuNoSuchEntryPoint", &fn, 13000, 0, &q), CUDA_ERROR_NOT_FOUND);
    REQUIRE(q == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && fn == NULL);
    CU_EXPECT(cuGetProcAddress("cuLibraryLoadData", &fn, 11080, 0, &q), CUDA_ERROR_NOT_FOUND);
    REQUIRE(q == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CU_EXPECT(cuGetProcAddress("cuMemAlloc", &fn, 13000, 7, &q), CUDA_ERROR_INVALID_VALUE);
    /* an entry point gpushim does not implement still resolves, to a function that says so */
    CUresult (*mipmap_create)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned) = NULL;
    CU_CHECK(cuGetProcAddress("cuMipmappedArrayCreate", (void **)&mipmap_create, 13000, 0, &q));
    CUmipmappedArray arr;
    CUDA_ARRAY3D_DESCRIPTOR desc = {.Width = 16, .Height = 16, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    CU_EXPECT(mipmap_create(&arr, &desc, 2), CUDA_ERROR_NOT_SUPPORTED);
    const void *table = NULL;
    CUuuid id = {{0}};
    CU_EXPECT(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_FOUND);

    const char *s = NULL;
    CU_CHECK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
    REQUIRE(!strcmp(s, "invalid argument"));
    CU_CHECK(cuGetErrorName(CUDA_ERROR_NOT_FOUND, &s));
    REQUIRE(!strcmp(s, "CUDA_ERROR_NOT_FOUND"));
    CU_EXPECT(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);

    /* ---- devices ---- */
    int version = 0, count = 0;
    CU_CHECK(cuDriverGetVersion(&version));
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGetCount(&count));
    REQUIRE(version >= 11000 && count >= 1);
    CUdevice dev;
    CU_CHECK(cuDeviceGet(&dev, 0));
    char name[256], bus[32];
    CUuuid uuid;
    size_t total = 0;
    int major = 0, minor = 0, sms = 0;
    CU_CHECK(cuDeviceGetName(name, sizeof name, dev));
    CU_CHECK(cuDeviceGetUuid(&uuid, dev));
    CU_CHECK(cuDeviceGetPCIBusId(bus, sizeof bus, dev));
    CU_CHECK(cuDeviceTotalMem(&total, dev));
    CU_CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CU_CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    CU_CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CUdevice by_bus;
    CU_CHECK(cuDeviceGetByPCIBusId(&by_bus, bus));
    REQUIRE(by_bus == dev);
    int uuid_nonzero = 0;
    for (int i = 0; i < 16; i++) uuid_nonzero |= uuid.bytes[i];
    printf("device %s cc %d.%d, %d SMs, %zu bytes, bus %s, uuid %s\n", name, major, minor, sms, total, bus,
           uuid_nonzero ? "set" : "zero");

    /* ---- contexts: a stack per thread (Driver API reference, Context Management: cuCtxCreate makes the
     * new context current, pushing it; cuCtxPopCurrent returns the context it popped) ---- */
    CUcontext none = (CUcontext)1, primary, created, cur, popped;
    CU_CHECK(cuCtxGetCurrent(&none));
    REQUIRE(none == NULL);
    CU_CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
    unsigned pflags = 99;
    int active = -1;
    CU_CHECK(cuDevicePrimaryCtxGetState(dev, &pflags, &active));
    REQUIRE(active == 1);
    CU_CHECK(cuCtxPushCurrent(primary));
    CU_CHECK(cuCtxCreate(&created, NULL, CU_CTX_SCHED_BLOCKING_SYNC, dev));
    CU_CHECK(cuCtxGetCurrent(&cur));
    REQUIRE(cur == created && cur != primary);
    unsigned flags = 0, api = 0;
    CU_CHECK(cuCtxGetFlags(&flags));
    REQUIRE(flags == CU_CTX_SCHED_BLOCKING_SYNC);
    CU_CHECK(cuCtxGetApiVersion(created, &api));
    REQUIRE(api >= 3020);
    CU_CHECK(cuCtxPopCurrent(&popped));
    REQUIRE(popped == created);
    CU_CHECK(cuCtxGetCurrent(&cur));
    REQUIRE(cur == primary);
    CU_CHECK(cuCtxDestroy(created));
    CU_EXPECT(cuCtxPushCurrent(created), CUDA_ERROR_INVALID_CONTEXT);
    CU_EXPECT(cuCtxDestroy(primary), CUDA_ERROR_INVALID_CONTEXT); /* primary contexts are released, not destroyed */
    CUdevice cdev = -1;
    CU_CHECK(cuCtxGetDevice(&cdev));
    REQUIRE(cdev == dev);
    int least = 1, greatest = 1;
    CU_CHECK(cuCtxGetStreamPriorityRange(&least, &greatest));
    REQUIRE(least >= greatest);
    size_t stack = 0;
    CU_CHECK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
    CU_CHECK(cuCtxGetLimit(&stack, CU_LIMIT_STACK_SIZE));
    REQUIRE(stack == 4096);

    /* ---- memory ---- */
    size_t free_b = 0, total_b = 0;
    CU_CHECK(cuMemGetInfo(&free_b, &total_b));
    REQUIRE(free_b > 0 && free_b <= total_b);
    enum { W = 40, H = 12, D = 3 };
    CUdeviceptr pitched;
    size_t pitch = 0;
    CU_CHECK(cuMemAllocPitch(&pitched, &pitch, W, H * D, 4));
    REQUIRE(pitch >= W);
    CU_EXPECT(cuMemAllocPitch(&pitched, &pitch, W, H, 3), CUDA_ERROR_INVALID_VALUE);
    unsigned char host[H * D][W], back[H * D][W];
    for (int y = 0; y < H * D; y++)
        for (int x = 0; x < W; x++) host[y][x] = (unsigned char)(y * 7 + x);
    CUDA_MEMCPY2D c2 = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = host, .srcPitch = W,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = pitched, .dstPitch = pitch,
                        .WidthInBytes = W, .Height = H * D};
    CU_CHECK(cuMemcpy2D(&c2));
    /* 3D: copy the sub-box x 4..35, y 2..9, z 1..2 back out */
    memset(back, 0, sizeof back);
    CUDA_MEMCPY3D c3 = {.srcXInBytes = 4, .srcY = 2, .srcZ = 1, .srcMemoryType = CU_MEMORYTYPE_DEVICE,
                        .srcDevice = pitched, .srcPitch = pitch, .srcHeight = H,
                        .dstXInBytes = 4, .dstY = 2, .dstZ = 1, .dstMemoryType = CU_MEMORYTYPE_HOST,
                        .dstHost = back, .dstPitch = W, .dstHeight = H,
                        .WidthInBytes = 32, .Height = 8, .Depth = 2};
    CU_CHECK(cuMemcpy3D(&c3));
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                int in = z >= 1 && z < 3 && y >= 2 && y < 10 && x >= 4 && x < 36;
                unsigned char want = in ? host[z * H + y][x] : 0;
                if (back[z * H + y][x] != want) { fprintf(stderr, "3D copy at %d,%d,%d\n", x, y, z); return 1; }
            }

    CUdeviceptr m;
    enum { NW = 1000 };
    CU_CHECK(cuMemAlloc(&m, NW * 4));
    CU_CHECK(cuMemsetD32(m, 0xdeadbeefu, NW));
    CU_CHECK(cuMemsetD16(m + 8, 0x1234, 3));
    CU_CHECK(cuMemsetD8(m + 16, 0xab, 2));
    unsigned words[NW];
    CU_CHECK(cuMemcpyDtoH(words, m, sizeof words));
    REQUIRE(words[0] == 0xdeadbeefu && words[1] == 0xdeadbeefu && words[2] == 0x12341234u);
    REQUIRE(words[3] == 0xdead1234u && words[4] == 0xdeadabab && words[NW - 1] == 0xdeadbeefu);
    CU_EXPECT(cuMemsetD32(m + 2, 1, 1), CUDA_ERROR_INVALID_VALUE); /* misaligned */
    CU_CHECK(cuMemsetD2D32(pitched, pitch, 0x01020304u, W / 4, 2));
    unsigned row[W / 4];
    CU_CHECK(cuMemcpyDtoH(row, pitched + pitch, sizeof row));
    for (int i = 0; i < W / 4; i++) REQUIRE(row[i] == 0x01020304u);

    /* device-to-device (unified cuMemcpyAsync), then a pitched 2D copy back, in the legacy stream's order */
    CUdeviceptr m2;
    CU_CHECK(cuMemAlloc(&m2, NW * 4));
    CU_CHECK(cuMemcpyAsync(m2, m, NW * 4, NULL));
    CU_CHECK(cuMemcpyDtoDAsync(m2 + 4, m2 + 8, 4, NULL));
    unsigned two_rows[2][3];
    CUDA_MEMCPY2D back2 = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = m2, .srcPitch = 40,
                           .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = two_rows, .dstPitch = 12,
                           .WidthInBytes = 12, .Height = 2};
    CU_CHECK(cuMemcpy2DAsync(&back2, NULL));
    CU_CHECK(cuStreamSynchronize(NULL));
    REQUIRE(two_rows[0][0] == 0xdeadbeefu && two_rows[0][1] == 0x12341234u && two_rows[0][2] == 0x12341234u);
    REQUIRE(two_rows[1][0] == words[10] && two_rows[1][2] == words[12]);
    CU_CHECK(cuMemFree(m2));

    CUdeviceptr base = 0;
    size_t range = 0;
    CU_CHECK(cuMemGetAddressRange(&base, &range, m + 100));
    REQUIRE(base == m && range == NW * 4);
    unsigned type = 0;
    int ordinal = -1;
    CU_CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, m + 4));
    CU_CHECK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, m));
    REQUIRE(type == CU_MEMORYTYPE_DEVICE && ordinal == dev);
    void *pinned;
    CU_CHECK(cuMemHostAlloc(&pinned, 4096, CU_MEMHOSTALLOC_PORTABLE));
    CU_CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)pinned));
    REQUIRE(type == CU_MEMORYTYPE_HOST);
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    size_t rsize = 0;
    void *data[2] = {&type, &rsize};
    CU_CHECK(cuPointerGetAttributes(2, attrs, data, m));
    REQUIRE(type == CU_MEMORYTYPE_DEVICE && rsize == NW * 4);
    int stackvar;
    /* cuPointerGetAttribute: "If ptr was not allocated by, mapped by, or registered with a CUcontext which
     * uses unified virtual addressing then CUDA_ERROR_INVALID_VALUE is returned." */
    CU_EXPECT(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)&stackvar),
              CUDA_ERROR_INVALID_VALUE);
    /* cuPointerGetAttributes: "Unlike cuPointerGetAttribute, this function will not return an error when
     * the ptr encountered is not a valid CUDA pointer. Instead, the attributes are assigned default NULL
     * values and CUDA_SUCCESS is returned." */
    type = 99;
    data[0] = &type;
    CU_CHECK(cuPointerGetAttributes(1, attrs, data, (CUdeviceptr)&stackvar));
    REQUIRE(type == 0);

    /* ---- streams: a wait on a memory value holds the stream until another stream writes it
     * (cuStreamWaitValue32: "Enqueues a synchronization of the stream on the given memory location. Work
     * ordered after the operation will block until the given condition on the memory is satisfied.") ---- */
    CUstream s1, s2;
    CU_CHECK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CU_CHECK(cuStreamCreateWithPriority(&s2, CU_STREAM_NON_BLOCKING, greatest));
    int prio = 99;
    CU_CHECK(cuStreamGetPriority(s2, &prio));
    REQUIRE(prio == greatest);
    CUdeviceptr flag;
    CU_CHECK(cuMemAlloc(&flag, 8));
    CU_CHECK(cuMemsetD32(flag, 0, 2));
    CU_CHECK(cuCtxSynchronize());
    CU_CHECK(cuStreamWaitValue32(s1, flag, 1, CU_STREAM_WAIT_VALUE_EQ));
    CU_CHECK(cuMemsetD32Async(m, 7, 1, s1));
    int one = 1;
    CU_CHECK(cuLaunchHostFunc(s1, on_host, &one));
    CU_EXPECT(cuStreamQuery(s1), CUDA_ERROR_NOT_READY); /* the value is still 0 */
    REQUIRE(host_calls == 0);
    CU_CHECK(cuStreamWriteValue32(s2, flag, 1, 0));
    CU_CHECK(cuStreamSynchronize(s1));
    REQUIRE(host_calls == 1);
    unsigned first = 0;
    CU_CHECK(cuMemcpyDtoH(&first, m, 4));
    REQUIRE(first == 7);
    CU_CHECK(cuStreamWriteValue64(s2, flag, 0x1122334455667788ull, 0));
    CU_CHECK(cuStreamWaitValue64(s1, flag, 0x1122334455667700ull, CU_STREAM_WAIT_VALUE_GEQ));
    CU_CHECK(cuStreamSynchronize(s1));
    unsigned long long v64 = 0;
    CU_CHECK(cuMemcpyDtoH(&v64, flag, 8));
    REQUIRE(v64 == 0x1122334455667788ull);

    CUevent e0, e1;
    CU_CHECK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CU_CHECK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    CU_CHECK(cuEventRecord(e0, s2));
    CU_CHECK(cuMemsetD32Async(m, 3, NW, s2));
    CU_CHECK(cuEventRecord(e1, s2));
    CU_CHECK(cuStreamWaitEvent(s1, e1, 0));
    CU_CHECK(cuEventSynchronize(e1));
    float ms = -1;
    CU_CHECK(cuEventElapsedTime(&ms, e0, e1));
    REQUIRE(ms >= 0);
    CU_CHECK(cuEventDestroy(e0));
    CU_CHECK(cuEventDestroy(e1));
    CU_CHECK(cuStreamDestroy(s1));
    CU_CHECK(cuStreamDestroy(s2));

    /* ---- occupancy of a real kernel ---- */
    void *ptx = read_kernel(argv[1], "vecadd.ptx", NULL);
    CUmodule mod;
    CUfunction f;
    CU_CHECK(cuModuleLoadData(&mod, ptx));
    CU_CHECK(cuModuleGetFunction(&f, mod, "vecadd"));
    int blocks = 0, min_grid = 0, best = 0;
    CU_CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0));
    CU_CHECK(cuOccupancyMaxPotentialBlockSize(&min_grid, &best, f, NULL, 0, 0));
    REQUIRE(blocks > 0 && best >= 32 && best % 32 == 0 && min_grid >= sms);
    size_t dyn = 0;
    CU_CHECK(cuOccupancyAvailableDynamicSMemPerBlock(&dyn, f, 2, 128));
    REQUIRE(dyn > 0);
    CU_CHECK(cuMemFree(m));
    CU_CHECK(cuMemFree(pitched));
    CU_CHECK(cuMemFreeHost(pinned));
    CU_CHECK(cuDevicePrimaryCtxRelease(dev));
    printf("misc ok: occupancy %d blocks of 256, best block %d, grid %d\n", blocks, best, min_grid);
    return 0;
}
