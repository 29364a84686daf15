// A kernel on device 0 reading and writing device 1's memory (needs two devices).
// CUDA Programming Guide, "Peer-to-Peer Memory Access": after cudaDeviceEnablePeerAccess(1) on device 0,
// kernels on device 0 may dereference device 1's pointers; without it (or after
// cudaDeviceDisablePeerAccess) such an access is an error (here cudaErrorIllegalAddress).
// Usage: peer_kernel enabled|none|disabled
#include <cstring>
#include <vector>

#include "common.h"

__global__ void peer_add(const int *remote_in, const int *local_in, int *remote_out, int *local_out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = remote_in[i] + local_in[i];
        remote_out[i] = v;      // a store into the peer's memory
        local_out[i] = 2 * v;
    }
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "enabled";
    const int n = 777;
    std::vector<int> h(n), r(n);
    for (int i = 0; i < n; i++) h[i] = i;
    int *rin, *rout, *lin, *lout;
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&rin, n * sizeof(int)));
    CHECK(cudaMalloc(&rout, n * sizeof(int)));
    CHECK(cudaMemcpy(rin, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&lin, n * sizeof(int)));
    CHECK(cudaMalloc(&lout, n * sizeof(int)));
    for (int i = 0; i < n; i++) h[i] = 1000 * i;
    CHECK(cudaMemcpy(lin, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    int can = 0;
    CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (!can) { std::fprintf(stderr, "device 0 cannot access device 1\n"); return 2; }
    if (std::strcmp(mode, "none") != 0) {
        CHECK(cudaDeviceEnablePeerAccess(1, 0));
        EXPECT_ERR(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
    }
    if (std::strcmp(mode, "disabled") == 0) CHECK(cudaDeviceDisablePeerAccess(1));
    peer_add<<<(n + 127) / 128, 128>>>(rin, lin, rout, lout, n);
    cudaError_t e = cudaDeviceSynchronize();
    if (std::strcmp(mode, "enabled") != 0) {
        std::printf("peer access %s: kernel %s\n", mode, cudaGetErrorName(e));
        return e == cudaErrorIllegalAddress ? 0 : 1;
    }
    CHECK(e);
    CHECK(cudaMemcpy(r.data(), lout, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (r[i] != 2 * 1001 * i) { std::fprintf(stderr, "local_out[%d] = %d\n", i, r[i]); return 1; }
    CHECK(cudaSetDevice(1));
    CHECK(cudaMemcpy(r.data(), rout, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (r[i] != 1001 * i) { std::fprintf(stderr, "remote_out[%d] = %d\n", i, r[i]); return 1; }
    std::printf("peer access enabled: kernel on device 0 read and wrote device 1's memory: %d elements ok\n", n);
    return 0;
}
