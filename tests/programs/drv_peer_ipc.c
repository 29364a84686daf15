/* cuCtxEnablePeerAccess / cuCtxDisablePeerAccess and cuIpc* on gpushim's driver face (CuPy's static runtime
 * makes cudaDeviceEnablePeerAccess and cudaIpc* with them): results and bad input. Needs two devices.
 * usage: drv_peer_ipc */
#include "drv_common.h"

int main(void) {
    CU_CHECK(cuInit(0));
    CUdevice d0, d1;
    CU_CHECK(cuDeviceGet(&d0, 0));
    CU_CHECK(cuDeviceGet(&d1, 1));
    CUcontext c0, c1;
    CU_CHECK(cuDevicePrimaryCtxRetain(&c0, d0));
    CU_CHECK(cuDevicePrimaryCtxRetain(&c1, d1));
    CU_CHECK(cuCtxSetCurrent(c0));

    /* Driver API reference, Peer Context Memory Access: Flags must be 0 (CUDA_ERROR_INVALID_VALUE); enabling
     * twice is CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, disabling what is not enabled
     * CUDA_ERROR_PEER_ACCESS_NOT_ENABLED; a context that is not one is CUDA_ERROR_INVALID_CONTEXT */
    CU_EXPECT(cuCtxEnablePeerAccess(c1, 1), CUDA_ERROR_INVALID_VALUE);
    CU_EXPECT(cuCtxEnablePeerAccess(NULL, 0), CUDA_ERROR_INVALID_CONTEXT);
    CU_EXPECT(cuCtxDisablePeerAccess(NULL), CUDA_ERROR_INVALID_CONTEXT);
    CU_EXPECT(cuCtxDisablePeerAccess(c1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    CU_CHECK(cuCtxEnablePeerAccess(c1, 0));
    CU_EXPECT(cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    REQUIRE(cuCtxEnablePeerAccess(c0, 0) != CUDA_SUCCESS); /* a context is not its own peer */
    CU_CHECK(cuCtxDisablePeerAccess(c1));
    CU_EXPECT(cuCtxDisablePeerAccess(c1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    /* the peer's side is its own: device 1 reaching device 0 */
    CU_CHECK(cuCtxSetCurrent(c1));
    CU_CHECK(cuCtxEnablePeerAccess(c0, 0));
    CU_CHECK(cuCtxDisablePeerAccess(c0));
    CU_CHECK(cuCtxSetCurrent(c0));

    /* IPC: a handle for an allocation and an interprocess event; bad arguments fail without harm */
    CUdeviceptr p;
    CU_CHECK(cuMemAlloc(&p, 4096));
    CUipcMemHandle mh;
    CU_CHECK(cuIpcGetMemHandle(&mh, p));
    CU_EXPECT(cuIpcGetMemHandle(NULL, p), CUDA_ERROR_INVALID_VALUE);
    CU_EXPECT(cuIpcGetMemHandle(&mh, 0), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr q = 0;
    CU_EXPECT(cuIpcOpenMemHandle(NULL, mh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_VALUE);
    CUipcMemHandle junk;
    memset(&junk, 0x5a, sizeof junk);
    CUresult r = cuIpcOpenMemHandle(&q, junk, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    REQUIRE(r != CUDA_SUCCESS && q == 0);
    printf("junk handle: %s\n", cu_name(r));
    CU_EXPECT(cuIpcCloseMemHandle(0), CUDA_ERROR_INVALID_VALUE);
    CUevent ev;
    CU_CHECK(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
    CUipcEventHandle eh;
    CU_CHECK(cuIpcGetEventHandle(&eh, ev));
    CU_EXPECT(cuIpcGetEventHandle(NULL, ev), CUDA_ERROR_INVALID_VALUE);
    CUevent ev2;
    memset(&junk, 0x5a, sizeof junk);
    CUipcEventHandle ejunk;
    memcpy(&ejunk, &junk, sizeof ejunk);
    r = cuIpcOpenEventHandle(&ev2, ejunk);
    REQUIRE(r != CUDA_SUCCESS);
    printf("junk event handle: %s\n", cu_name(r));
    /* this session goes on working */
    unsigned v = 0xdeadbeef, back = 0;
    CU_CHECK(cuMemcpyHtoD(p, &v, sizeof v));
    CU_CHECK(cuMemcpyDtoH(&back, p, sizeof back));
    REQUIRE(back == v);
    CU_CHECK(cuEventDestroy(ev));
    CU_CHECK(cuMemFree(p));
    printf("peer ipc ok\n");
    return 0;
}
