/* CUDA IPC through the driver face (CUDA Driver API reference, cuIpcGetMemHandle / cuIpcOpenMemHandle /
 * cuIpcCloseMemHandle, cuIpcGetEventHandle / cuIpcOpenEventHandle), as numba-cuda's IPC arrays use it.
 * usage: drv_ipc export    - prints "handle=MEM EVENT own=N", waits for a line on stdin, prints "exporter_sees=V"
 *        drv_ipc import MEM EVENT - opens both, prints "read=V event=E", writes 0x5678 and closes. */
#include "drv_common.h"

typedef union {
    CUipcMemHandle mem;
    CUipcEventHandle ev;
    unsigned char b[64];
} handle64;

static void put_hex(const unsigned char *b) {
    for (int i = 0; i < 64; i++) printf("%02x", b[i]);
}

static void get_hex(const char *s, unsigned char *b) {
    REQUIRE(strlen(s) == 128);
    for (int i = 0; i < 64; i++) REQUIRE(sscanf(s + 2 * i, "%2hhx", &b[i]) == 1);
}

int main(int argc, char **argv) {
    REQUIRE(argc >= 2);
    CUdevice dev;
    use_primary_context(&dev);
    unsigned v = 0;
    if (strcmp(argv[1], "export") == 0) {
        CUdeviceptr d;
        CU_CHECK(cuMemAlloc(&d, 4096));
        CU_CHECK(cuMemsetD32(d, 0x1234, 1024));
        CUevent ev;
        CU_CHECK(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
        CU_CHECK(cuEventRecord(ev, NULL));
        CU_CHECK(cuCtxSynchronize());
        handle64 m, e;
        CU_CHECK(cuIpcGetMemHandle(&m.mem, d));
        CU_CHECK(cuIpcGetEventHandle(&e.ev, ev));
        CUdeviceptr own;
        CUresult r = cuIpcOpenMemHandle(&own, m.mem, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        printf("handle=");
        put_hex(m.b);
        printf(" ");
        put_hex(e.b);
        printf(" own=%d\n", (int)r); /* a handle does not open in the process that made it */
        fflush(stdout);
        char line[16];
        if (!fgets(line, sizeof line, stdin)) return 3;
        CU_CHECK(cuMemcpyDtoH(&v, d, sizeof v));
        printf("exporter_sees=%#x\n", v);
        return 0;
    }
    REQUIRE(argc == 4 && strcmp(argv[1], "import") == 0);
    handle64 m, e;
    get_hex(argv[2], m.b);
    get_hex(argv[3], e.b);
    CUdeviceptr d;
    CU_CHECK(cuIpcOpenMemHandle(&d, m.mem, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CU_CHECK(cuMemcpyDtoH(&v, d + 8, sizeof v));
    CUevent ev;
    CU_CHECK(cuIpcOpenEventHandle(&ev, e.ev));
    printf("read=%#x event=%d\n", v, (int)cuEventQuery(ev));
    CU_CHECK(cuMemsetD32(d, 0x5678, 1));
    CU_CHECK(cuCtxSynchronize());
    CU_CHECK(cuIpcCloseMemHandle(d));
    printf("closed=1\n");
    return 0;
}
