// CUDA IPC between two processes on one gpushim server. `export`: fills an allocation, holds a stream with a
// host function until a first line on stdin, then adds 7 on that stream and records an interprocess event;
// prints the memory and event handles as hex; after a second line prints what the importer left in memory.
// `import MEMHEX EVHEX`: opens both, checks the event is pending, waits for it (cudaStreamWaitEvent), reads
// the data, adds 1000 to every element with a kernel, closes the memory. Prints key=value lines.
#include <atomic>
#include <cstring>
#include <string>
#include <vector>
#include "common.h"

__global__ void fill(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = 3 * i;
}
__global__ void add(int *p, int v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += v;
}

static const int N = 3000;  // not a multiple of the page size
static std::atomic<int> released{0};
static void CUDART_CB hold(void *) {
    while (!released.load()) {
    }
}

static std::string hex_of(const char *p) {
    std::string hex;
    char buf[3];
    for (int i = 0; i < 64; i++) {
        std::snprintf(buf, sizeof buf, "%02x", (unsigned char)p[i]);
        hex += buf;
    }
    return hex;
}

static void parse(char *out, const char *hex) {
    for (int i = 0; i < 64; i++) out[i] = (char)std::stoi(std::string(hex + 2 * i, 2), nullptr, 16);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    std::vector<int> h(N);
    if (std::strcmp(argv[1], "export") == 0) {
        int *pad, *d;
        CHECK(cudaMalloc(&pad, 1000));  // so the allocation does not start on a page
        CHECK(cudaMalloc(&d, N * sizeof(int)));
        fill<<<(N + 255) / 256, 256>>>(d, N);
        CHECK(cudaDeviceSynchronize());
        cudaIpcMemHandle_t handle, again;
        CHECK(cudaIpcGetMemHandle(&handle, d + 10));  // any pointer into the allocation names it
        CHECK(cudaIpcGetMemHandle(&again, d));
        void *own = nullptr;
        int e_own = (int)cudaIpcOpenMemHandle(&own, handle, cudaIpcMemLazyEnablePeerAccess);
        int e_host = (int)cudaIpcGetMemHandle(&again, h.data());
        cudaGetLastError();
        cudaEvent_t ev, plain;
        cudaStream_t sx;
        CHECK(cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming));
        CHECK(cudaEventCreate(&plain));
        CHECK(cudaStreamCreateWithFlags(&sx, cudaStreamNonBlocking));
        CHECK(cudaLaunchHostFunc(sx, hold, nullptr));
        add<<<(N + 255) / 256, 256, 0, sx>>>(d, 7, N);
        CHECK(cudaEventRecord(ev, sx));
        cudaIpcEventHandle_t eh, ph;
        CHECK(cudaIpcGetEventHandle(&eh, ev));
        int e_plain = (int)cudaIpcGetEventHandle(&ph, plain);  // not an interprocess event
        cudaEvent_t own_ev;
        int e_own_ev = (int)cudaIpcOpenEventHandle(&own_ev, eh);
        cudaGetLastError();
        std::printf("handle=%s %s same=%d own=%d host=%d plain_event=%d own_event=%d\n", hex_of(handle.reserved).c_str(),
                    hex_of(eh.reserved).c_str(), std::memcmp(&handle, &again, sizeof handle) == 0 ? 1 : 0, e_own,
                    e_host, e_plain, e_own_ev);
        std::fflush(stdout);
        char line[16];
        if (!std::fgets(line, sizeof line, stdin)) return 3;
        released = 1;  // the held stream adds 7 and records the event
        if (!std::fgets(line, sizeof line, stdin)) return 3;
        CHECK(cudaMemcpy(h.data(), d, N * sizeof(int), cudaMemcpyDeviceToHost));
        bool ok = true;
        for (int i = 0; i < N; i++) ok = ok && h[i] == 3 * i + 7 + 1000;
        std::printf("exporter_sees=%s\n", ok ? "ok" : "WRONG");
        CHECK(cudaFree(d));
        CHECK(cudaFree(pad));
        std::printf("OK\n");
        return 0;
    }
    if (std::strcmp(argv[1], "import") == 0 && argc > 3) {
        cudaIpcMemHandle_t handle;
        cudaIpcEventHandle_t eh;
        parse(handle.reserved, argv[2]);
        parse(eh.reserved, argv[3]);
        int *d = nullptr;
        cudaError_t e = cudaIpcOpenMemHandle((void **)&d, handle, cudaIpcMemLazyEnablePeerAccess);
        std::printf("open=%d\n", (int)e);
        std::fflush(stdout);
        if (e) return 0;
        cudaEvent_t ev;
        CHECK(cudaIpcOpenEventHandle(&ev, eh));
        std::printf("event_query=%d\n", (int)cudaEventQuery(ev));  // the exporter's stream is held
        std::fflush(stdout);
        CHECK(cudaStreamWaitEvent(0, ev, 0));  // returns once the exporter's event completed
        CHECK(cudaMemcpy(h.data(), d, N * sizeof(int), cudaMemcpyDeviceToHost));
        bool ok = true;
        for (int i = 0; i < N; i++) ok = ok && h[i] == 3 * i + 7;
        std::printf("after_wait query=%d\n", (int)cudaEventQuery(ev));
        cudaPointerAttributes attr;
        CHECK(cudaPointerGetAttributes(&attr, d));
        add<<<(N + 255) / 256, 256>>>(d, 1000, N);
        CHECK(cudaDeviceSynchronize());
        int e_free = (int)cudaFree(d);  // IPC memory is closed, not freed
        cudaIpcMemHandle_t junk;
        std::memset(&junk, 0x5a, sizeof junk);
        void *p = nullptr;
        int e_junk = (int)cudaIpcOpenMemHandle(&p, junk, cudaIpcMemLazyEnablePeerAccess);
        int e_flags = (int)cudaIpcOpenMemHandle(&p, handle, 0x40);
        cudaGetLastError();
        CHECK(cudaIpcCloseMemHandle(d));
        int e_close_again = (int)cudaIpcCloseMemHandle(d);
        cudaGetLastError();
        std::printf("importer_read=%s type=%d free=%d junk=%d flags=%d close_again=%d\n", ok ? "ok" : "WRONG",
                    (int)attr.type, e_free, e_junk, e_flags, e_close_again);
        std::printf("OK\n");
        return 0;
    }
    return 2;
}
