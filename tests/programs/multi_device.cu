// Every device the client sees, each with a kernel, then copies between each pair of devices (cudaMemcpyPeer,
// cudaMemcpyPeerAsync on a stream, and cudaMemcpy with cudaMemcpyDefault, which CUDA's unified addressing
// resolves by pointer), each checked by a kernel on the destination device. Used with several servers as one
// device list (tests/e2e/test_multi_server.py). Prints "devN name=..." per device, then "ok".
//   multi_device [MIB]   (MIB: size of each copied buffer, default 1)
#include <vector>
#include "common.h"

__global__ void fill(unsigned *p, size_t n, unsigned tag) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (unsigned)i * 2654435761u + tag;
}

// counts elements that differ from what fill(tag) wrote
__global__ void check(const unsigned *p, size_t n, unsigned tag, unsigned *bad) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (p[i] != (unsigned)i * 2654435761u + tag) atomicAdd(bad, 1u);
}

static unsigned bad_on(int dev, const unsigned *p, size_t n, unsigned tag) {
    CHECK(cudaSetDevice(dev));
    unsigned *d_bad, h = 0;
    CHECK(cudaMalloc(&d_bad, sizeof(unsigned)));
    CHECK(cudaMemset(d_bad, 0, sizeof(unsigned)));
    check<<<64, 128>>>(p, n, tag, d_bad);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(&h, d_bad, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(d_bad));
    return h;
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1;
    size_t n = (mib << 20) / sizeof(unsigned);
    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    std::vector<unsigned *> buf(count);
    for (int d = 0; d < count; d++) {
        cudaDeviceProp p;
        CHECK(cudaGetDeviceProperties(&p, d));
        std::printf("dev%d name=%s cc=%d.%d\n", d, p.name, p.major, p.minor);
        CHECK(cudaSetDevice(d));
        CHECK(cudaMalloc(&buf[d], n * sizeof(unsigned)));
        fill<<<64, 128>>>(buf[d], n, 1000u + d);
        CHECK(cudaGetLastError());
        cudaPointerAttributes a;
        CHECK(cudaPointerGetAttributes(&a, buf[d]));
        if (a.device != d) { std::printf("pointer of device %d reports device %d\n", d, a.device); return 1; }
    }
    for (int d = 0; d < count; d++) {
        unsigned bad = bad_on(d, buf[d], n, 1000u + d);
        if (bad) { std::printf("device %d: kernel result wrong in %u elements\n", d, bad); return 1; }
    }
    for (int s = 0; s < count; s++)
        for (int d = 0; d < count; d++) {
            if (s == d) continue;
            unsigned *tmp;
            CHECK(cudaSetDevice(d));
            CHECK(cudaMalloc(&tmp, n * sizeof(unsigned)));
            int how = (s + d) % 3;
            if (how == 0) {
                CHECK(cudaMemcpyPeer(tmp, d, buf[s], s, n * sizeof(unsigned)));
            } else if (how == 1) {
                cudaStream_t st;
                CHECK(cudaStreamCreate(&st));
                CHECK(cudaMemcpyPeerAsync(tmp, d, buf[s], s, n * sizeof(unsigned), st));
                CHECK(cudaStreamSynchronize(st));
                CHECK(cudaStreamDestroy(st));
            } else {
                CHECK(cudaMemcpy(tmp, buf[s], n * sizeof(unsigned), cudaMemcpyDefault));
            }
            unsigned bad = bad_on(d, tmp, n, 1000u + s);
            if (bad) { std::printf("copy %d -> %d (way %d): %u elements wrong\n", s, d, how, bad); return 1; }
            CHECK(cudaFree(tmp));
        }
    // A stream of device 0 used for copies to and from every other device's memory (CUDA's unified
    // addressing lets a copy on any stream name any device's memory), then synchronised.
    CHECK(cudaSetDevice(0));
    cudaStream_t s0;
    CHECK(cudaStreamCreate(&s0));
    std::vector<unsigned> host(n), back(n);
    for (size_t i = 0; i < n; i++) host[i] = (unsigned)i * 2654435761u + 77u;
    for (int d = 1; d < count; d++) {
        unsigned *tmp;
        CHECK(cudaSetDevice(d));
        CHECK(cudaMalloc(&tmp, n * sizeof(unsigned)));
        CHECK(cudaSetDevice(0));
        CHECK(cudaMemsetAsync(tmp, 0, n * sizeof(unsigned), s0));
        CHECK(cudaMemcpyAsync(tmp, host.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice, s0));
        CHECK(cudaStreamSynchronize(s0));
        unsigned bad = bad_on(d, tmp, n, 77u);
        if (bad) { std::printf("host -> device %d on device 0's stream: %u elements wrong\n", d, bad); return 1; }
        CHECK(cudaSetDevice(0));
        CHECK(cudaMemcpyAsync(back.data(), buf[d], n * sizeof(unsigned), cudaMemcpyDeviceToHost, s0));
        CHECK(cudaStreamSynchronize(s0));
        for (size_t i = 0; i < n; i++)
            if (back[i] != (unsigned)i * 2654435761u + 1000u + d) {
                std::printf("device %d -> host on device 0's stream: wrong at %zu\n", d, i);
                return 1;
            }
        CHECK(cudaFree(tmp));
    }
    CHECK(cudaStreamDestroy(s0));
    std::printf("ok\n");
    return 0;
}
