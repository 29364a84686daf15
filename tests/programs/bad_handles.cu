// Destroyed and never-valid handles of each kind, passed to the runtime and driver calls that take them: every
// call must return an error (the test checks the codes CUDA documents) and the program must go on, not crash.
// CUDA leaves garbage handles undefined; gpushim refuses them with the kind's invalid-handle error. Prints
// name=code lines, then "bad handles done".
#include <cuda.h>
#include <pthread.h>

#include <cstdint>
#include <cstring>

#include "common.h"
#include "drv_common.h"

// An address nothing is mapped at: reading through it would crash the client.
static void *const GARBAGE = (void *)(uintptr_t)0xdead0000beef0ull;
// A readable block of junk: a handle pointing here must not be taken for a live object either.
static unsigned char junk[4096];

#define RT(name, call) std::printf("%s=%d\n", name, (int)(call))
// NAME_tag=code, for the calls repeated over a kind's bad handles
#define EACH(name, tag, call) std::printf("%s_%s=%d\n", name, tag, (int)(call))

__global__ void noop() {}

static const char PTX[] = ".version 7.0\n.target sm_70\n.address_size 64\n"
                          ".visible .entry k()\n{\n\tret;\n}\n";

static void runtime_handles() {
    // streams: cudaErrorInvalidResourceHandle (CUDA Runtime API, cudaStreamQuery / cudaStreamSynchronize)
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaStreamDestroy(s));
    cudaStream_t bad[2] = {s, (cudaStream_t)GARBAGE};
    const char *tag[2] = {"destroyed", "garbage"};
    for (int i = 0; i < 2; i++) {
        EACH("rt_stream_query", tag[i], cudaStreamQuery(bad[i]));
        EACH("rt_stream_sync", tag[i], cudaStreamSynchronize(bad[i]));
        int *d;
        CHECK(cudaMalloc(&d, 64));
        EACH("rt_memset_async", tag[i], cudaMemsetAsync(d, 0, 64, bad[i]));
        CHECK(cudaFree(d));
        noop<<<1, 1, 0, bad[i]>>>();
        EACH("rt_launch", tag[i], cudaGetLastError());
    }
    // events: cudaErrorInvalidResourceHandle (cudaEventQuery, cudaEventSynchronize)
    cudaEvent_t e;
    CHECK(cudaEventCreate(&e));
    CHECK(cudaEventDestroy(e));
    cudaEvent_t bad_ev[2] = {e, (cudaEvent_t)GARBAGE};
    for (int i = 0; i < 2; i++) {
        EACH("rt_event_query", tag[i], cudaEventQuery(bad_ev[i]));
        EACH("rt_event_record", tag[i], cudaEventRecord(bad_ev[i], 0));
        EACH("rt_event_sync", tag[i], cudaEventSynchronize(bad_ev[i]));
    }
    // graphs, nodes, executable graphs: cudaErrorInvalidValue (cudaGraphDestroy, cudaGraphNodeGetType,
    // cudaGraphLaunch list only that for a handle)
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t n, n2;
    CHECK(cudaGraphAddEmptyNode(&n, g, nullptr, 0));
    CHECK(cudaGraphAddEmptyNode(&n2, g, nullptr, 0));
    cudaGraphExec_t x;
    CHECK(cudaGraphInstantiate(&x, g, 0));
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphDestroyNode(n2));
    cudaGraphNodeType type;
    RT("rt_node_type_destroyed", cudaGraphNodeGetType(n2, &type));
    RT("rt_node_type_garbage", cudaGraphNodeGetType((cudaGraphNode_t)GARBAGE, &type));
    RT("rt_node_type_junk", cudaGraphNodeGetType((cudaGraphNode_t)junk, &type));
    cudaGraphNode_t dep = (cudaGraphNode_t)GARBAGE, out;
    RT("rt_add_node_garbage_dep", cudaGraphAddEmptyNode(&out, g, &dep, 1));
    CHECK(cudaGraphDestroy(g));
    RT("rt_node_type_graph_destroyed", cudaGraphNodeGetType(n, &type));
    RT("rt_graph_destroy_destroyed", cudaGraphDestroy(g));
    RT("rt_graph_destroy_garbage", cudaGraphDestroy((cudaGraph_t)GARBAGE));
    RT("rt_graph_add_garbage", cudaGraphAddEmptyNode(&out, (cudaGraph_t)GARBAGE, nullptr, 0));
    RT("rt_exec_launch_destroyed", cudaGraphLaunch(x, 0));
    RT("rt_exec_launch_garbage", cudaGraphLaunch((cudaGraphExec_t)GARBAGE, 0));
    RT("rt_exec_destroy_garbage", cudaGraphExecDestroy((cudaGraphExec_t)GARBAGE));
    // user objects, memory pools, arrays, texture objects, libraries and kernels
    RT("rt_user_object_release_garbage", cudaUserObjectRelease((cudaUserObject_t)GARBAGE, 1));
    size_t v;
    RT("rt_pool_attr_garbage", cudaMemPoolGetAttribute((cudaMemPool_t)GARBAGE, cudaMemPoolAttrReleaseThreshold, &v));
    RT("rt_pool_destroy_garbage", cudaMemPoolDestroy((cudaMemPool_t)GARBAGE));
    RT("rt_array_free_garbage", cudaFreeArray((cudaArray_t)GARBAGE));
    RT("rt_texobj_destroy_garbage", cudaDestroyTextureObject((cudaTextureObject_t)(uintptr_t)GARBAGE));
    cudaKernel_t k;
    cudaLibrary_t lib;
    CHECK(cudaLibraryLoadData(&lib, PTX, nullptr, nullptr, 0, nullptr, nullptr, 0));
    CHECK(cudaLibraryGetKernel(&k, lib, "k"));
    CHECK(cudaLibraryUnload(lib));
    RT("rt_library_get_kernel_destroyed", cudaLibraryGetKernel(&k, lib, "k"));
    RT("rt_library_unload_destroyed", cudaLibraryUnload(lib));
    RT("rt_launch_kernel_destroyed", cudaLaunchKernel((const void *)k, dim3(1), dim3(1), nullptr, 0, 0));
    RT("rt_library_get_kernel_garbage", cudaLibraryGetKernel(&k, (cudaLibrary_t)GARBAGE, "k"));
    RT("rt_library_unload_garbage", cudaLibraryUnload((cudaLibrary_t)GARBAGE));
    cudaFuncAttributes fa;
    RT("rt_func_attributes_garbage", cudaFuncGetAttributes(&fa, GARBAGE));
    cudaGetLastError();  // the calls above set it
}

// Another thread has the context current when it is destroyed: its later calls see CONTEXT_IS_DESTROYED.
static pthread_barrier_t barrier;
static CUcontext shared_ctx;
static void *other_thread(void *) {
    CUresult pushed = cuCtxPushCurrent(shared_ctx);
    pthread_barrier_wait(&barrier);  // pushed
    pthread_barrier_wait(&barrier);  // destroyed by the main thread
    unsigned long long id;
    std::printf("drv_push_other_thread=%d\n", (int)pushed);
    RT("drv_ctx_sync_destroyed_other_thread", cuCtxSynchronize());
    RT("drv_ctx_get_id_destroyed_other_thread", cuCtxGetId(nullptr, &id));
    CUdeviceptr p;
    RT("drv_mem_alloc_destroyed_other_thread", cuMemAlloc(&p, 64));
    CUcontext popped = nullptr;
    cuCtxPopCurrent(&popped);
    return nullptr;
}

static void driver_handles() {
    CU_CHECK(cuInit(0));
    CUdevice dev;
    CU_CHECK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CU_CHECK(cuCtxCreate(&ctx, nullptr, 0, dev));  // CUDA 13's cuCtxCreate takes creation parameters
    CUcontext cur;
    CU_CHECK(cuCtxPopCurrent(&cur));
    shared_ctx = ctx;
    pthread_barrier_init(&barrier, nullptr, 2);
    pthread_t t;
    pthread_create(&t, nullptr, other_thread, nullptr);
    pthread_barrier_wait(&barrier);
    unsigned long long id_before, id_after;
    CU_CHECK(cuCtxGetId(ctx, &id_before));
    CU_CHECK(cuCtxDestroy(ctx));
    // A context made now may take the freed one's address: the other thread's stale entry must still be
    // refused, and the new context has an id of its own (cuCtxGetId: "unique ID for the context").
    CUcontext again;
    CU_CHECK(cuCtxCreate(&again, nullptr, 0, dev));
    CU_CHECK(cuCtxGetId(again, &id_after));
    std::printf("drv_ctx_new_id_differs=%d\n", id_after != id_before);
    CU_CHECK(cuCtxPopCurrent(&cur));
    pthread_barrier_wait(&barrier);
    pthread_join(t, nullptr);
    CU_CHECK(cuCtxDestroy(again));

    // contexts: CUDA_ERROR_INVALID_CONTEXT (cuCtxPushCurrent, cuCtxSetCurrent, cuCtxGetApiVersion)
    CUcontext bad[3] = {ctx, (CUcontext)GARBAGE, (CUcontext)junk};
    const char *tag[3] = {"destroyed", "garbage", "junk"};
    for (int i = 0; i < 3; i++) {
        unsigned ver;
        unsigned long long id;
        CUdevice d;
        EACH("drv_ctx_push", tag[i], cuCtxPushCurrent(bad[i]));
        EACH("drv_ctx_set", tag[i], cuCtxSetCurrent(bad[i]));
        EACH("drv_ctx_api_version", tag[i], cuCtxGetApiVersion(bad[i], &ver));
        EACH("drv_ctx_get_id", tag[i], cuCtxGetId(bad[i], &id));
        EACH("drv_ctx_get_device", tag[i], cuCtxGetDevice_v2(&d, bad[i]));
        EACH("drv_ctx_sync", tag[i], cuCtxSynchronize_v2(bad[i]));
        EACH("drv_ctx_enable_peer", tag[i], cuCtxEnablePeerAccess(bad[i], 0));
        EACH("drv_ctx_destroy", tag[i], cuCtxDestroy(bad[i]));
    }
    CU_CHECK(cuDevicePrimaryCtxRetain(&cur, dev));
    CU_CHECK(cuCtxSetCurrent(cur));

    // modules and functions: CUDA_ERROR_INVALID_HANDLE (cuModuleGetFunction, cuFuncGetAttribute, cuLaunchKernel)
    CUmodule m;
    CU_CHECK(cuModuleLoadData(&m, PTX));
    CUfunction f;
    CU_CHECK(cuModuleGetFunction(&f, m, "k"));
    CU_CHECK(cuModuleUnload(m));
    CUmodule bad_m[3] = {m, (CUmodule)GARBAGE, (CUmodule)junk};
    CUfunction bad_f[3] = {f, (CUfunction)GARBAGE, (CUfunction)junk};
    for (int i = 0; i < 3; i++) {
        CUfunction out;
        CUdeviceptr p;
        size_t bytes;
        int value;
        EACH("drv_module_get_function", tag[i], cuModuleGetFunction(&out, bad_m[i], "k"));
        EACH("drv_module_get_global", tag[i], cuModuleGetGlobal(&p, &bytes, bad_m[i], "g"));
        EACH("drv_module_unload", tag[i], cuModuleUnload(bad_m[i]));
        EACH("drv_func_attribute", tag[i], cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, bad_f[i]));
        EACH("drv_launch", tag[i], cuLaunchKernel(bad_f[i], 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
    }

    // libraries and kernels: CUDA_ERROR_INVALID_HANDLE (cuLibraryGetKernel, cuKernelGetFunction)
    CUkernel kern;
    CUfunction fk;
    CUlibrary lib;
    CU_CHECK(cuLibraryLoadData(&lib, PTX, nullptr, nullptr, 0, nullptr, nullptr, 0));
    CU_CHECK(cuLibraryGetKernel(&kern, lib, "k"));
    CU_CHECK(cuKernelGetFunction(&fk, kern));
    CU_CHECK(cuLibraryUnload(lib));
    CUmodule lm;
    RT("drv_library_get_kernel_destroyed", cuLibraryGetKernel(&kern, lib, "k"));
    RT("drv_library_get_module_destroyed", cuLibraryGetModule(&lm, lib));
    RT("drv_library_unload_destroyed", cuLibraryUnload(lib));
    RT("drv_kernel_get_function_destroyed", cuKernelGetFunction(&fk, kern));
    RT("drv_launch_kernel_of_library_destroyed", cuLaunchKernel(fk, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
    RT("drv_library_get_kernel_garbage", cuLibraryGetKernel(&kern, (CUlibrary)GARBAGE, "k"));
    RT("drv_library_get_kernel_junk", cuLibraryGetKernel(&kern, (CUlibrary)junk, "k"));
    RT("drv_library_unload_garbage", cuLibraryUnload((CUlibrary)GARBAGE));
    RT("drv_kernel_get_function_garbage", cuKernelGetFunction(&fk, (CUkernel)GARBAGE));

    // link states: CUDA_ERROR_INVALID_HANDLE
    CUlinkState link;
    CU_CHECK(cuLinkCreate(0, nullptr, nullptr, &link));
    CU_CHECK(cuLinkDestroy(link));
    CUlinkState bad_l[3] = {link, (CUlinkState)GARBAGE, (CUlinkState)junk};
    for (int i = 0; i < 3; i++) {
        void *img;
        size_t size;
        EACH("drv_link_add", tag[i], cuLinkAddData(bad_l[i], CU_JIT_INPUT_PTX, (void *)PTX, sizeof PTX, "k.ptx", 0, nullptr, nullptr));
        EACH("drv_link_complete", tag[i], cuLinkComplete(bad_l[i], &img, &size));
        EACH("drv_link_destroy", tag[i], cuLinkDestroy(bad_l[i]));
    }

    // streams and events through the driver: CUDA_ERROR_INVALID_HANDLE
    RT("drv_stream_query_garbage", cuStreamQuery((CUstream)GARBAGE));
    RT("drv_event_query_garbage", cuEventQuery((CUevent)GARBAGE));
    RT("drv_mem_release_garbage", cuMemRelease((CUmemGenericAllocationHandle)(uintptr_t)GARBAGE));
    cuuint64_t pv;
    RT("drv_pool_attr_garbage", cuMemPoolGetAttribute((CUmemoryPool)GARBAGE, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &pv));
    RT("drv_texobj_destroy_garbage", cuTexObjectDestroy((CUtexObject)(uintptr_t)GARBAGE));
    CUgraphNodeType nt;
    RT("drv_node_type_garbage", cuGraphNodeGetType((CUgraphNode)GARBAGE, &nt));
}

int main() {
    std::memset(junk, 0x5a, sizeof junk);
    CHECK(cudaSetDevice(0));
    runtime_handles();
    driver_handles();
    // the client still works: a kernel and a copy
    int *d, h = 0;
    CHECK(cudaMalloc(&d, sizeof h));
    CHECK(cudaMemset(d, 7, sizeof h));
    noop<<<1, 1>>>();
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(d));
    std::printf("after=%d\n", h == 0x07070707);
    std::printf("bad handles done\n");
    return 0;
}
