// CUDA IPC between two processes on one gpushim server. `export`: fills an allocation, prints its
// cudaIpcMemHandle_t as hex, waits for a line on stdin, then prints what the importer left in it.
// `import HEX`: opens the handle, reads the data, adds 1000 to every element with a kernel, closes it.
// Prints key=value lines the test checks.
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
        std::string hex;
        char buf[3];
        for (int i = 0; i < 64; i++) {
            std::snprintf(buf, sizeof buf, "%02x", (unsigned char)handle.reserved[i]);
            hex += buf;
        }
        std::printf("handle=%s same=%d own=%d host=%d\n", hex.c_str(),
                    std::memcmp(&handle, &again, sizeof handle) == 0 ? 1 : 0, e_own, e_host);
        std::fflush(stdout);
        char line[16];
        if (!std::fgets(line, sizeof line, stdin)) return 3;
        CHECK(cudaMemcpy(h.data(), d, N * sizeof(int), cudaMemcpyDeviceToHost));
        bool ok = true;
        for (int i = 0; i < N; i++) ok = ok && h[i] == 3 * i + 1000;
        std::printf("exporter_sees=%s\n", ok ? "ok" : "WRONG");
        CHECK(cudaFree(d));
        CHECK(cudaFree(pad));
        std::printf("OK\n");
        return 0;
    }
    if (std::strcmp(argv[1], "import") == 0 && argc > 2) {
        cudaIpcMemHandle_t handle;
        for (int i = 0; i < 64; i++) handle.reserved[i] = (char)std::stoi(std::string(argv[2] + 2 * i, 2), nullptr, 16);
        int *d = nullptr;
        cudaError_t e = cudaIpcOpenMemHandle((void **)&d, handle, cudaIpcMemLazyEnablePeerAccess);
        std::printf("open=%d\n", (int)e);
        if (e) return 0;
        CHECK(cudaMemcpy(h.data(), d, N * sizeof(int), cudaMemcpyDeviceToHost));
        bool ok = true;
        for (int i = 0; i < N; i++) ok = ok && h[i] == 3 * i;
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
