// A scheduling client (bench/sched_bench.py, tests/e2e/test_scheduling.py): launches KERNELS kernels of
// ITERS loop iterations per thread, one at a time (launch, then cudaDeviceSynchronize), and prints one JSON
// line with each kernel's latency. With a START file it first warms up (module load, one kernel), prints
// "ready" and waits until that file exists, so that several clients begin their measured work together. With
// an END file it waits, after printing its results, until that file exists before it exits (its session, and
// the session's row in `gpushim status`, stay until then).
//   sched_client KERNELS ITERS [BLOCKS] [START-FILE] [GAP-US] [END-FILE]
#include <chrono>
#include <thread>
#include <unistd.h>
#include <vector>
#include "common.h"

__global__ void busy(unsigned *out, unsigned iters) {
    unsigned acc = threadIdx.x + blockIdx.x * blockDim.x;
    for (unsigned i = 0; i < iters; i++) acc = acc * 1664525u + 1013904223u;
    out[threadIdx.x + blockIdx.x * blockDim.x] = acc;
}

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: sched_client KERNELS ITERS [BLOCKS] [START-FILE] [GAP-US] [END-FILE]\n");
        return 2;
    }
    int kernels = std::atoi(argv[1]);
    unsigned iters = (unsigned)std::strtoul(argv[2], nullptr, 10);
    int blocks = argc > 3 ? std::atoi(argv[3]) : 1;
    const char *start = argc > 4 && argv[4][0] ? argv[4] : nullptr;
    int gap_us = argc > 5 ? std::atoi(argv[5]) : 0;
    const char *end = argc > 6 && argv[6][0] ? argv[6] : nullptr;
    const int threads = 32;
    unsigned *d;
    CHECK(cudaMalloc(&d, sizeof(unsigned) * threads * blocks));
    busy<<<blocks, threads>>>(d, 1);  // warm-up: module load, first-launch costs
    CHECK(cudaDeviceSynchronize());
    if (start) {
        std::printf("ready\n");
        std::fflush(stdout);
        while (access(start, F_OK) != 0) usleep(1000);
    }
    std::vector<double> lat;
    double t0 = now_s();
    for (int k = 0; k < kernels; k++) {
        double a = now_s();
        busy<<<blocks, threads>>>(d, iters);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        lat.push_back(now_s() - a);
        if (gap_us) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    }
    double t1 = now_s();
    unsigned h = 0;
    CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    unsigned want = 0;
    for (unsigned i = 0; i < iters; i++) want = want * 1664525u + 1013904223u;
    if (h != want) { std::fprintf(stderr, "wrong result %u, expected %u\n", h, want); return 1; }
    std::printf("{\"start\": %.6f, \"end\": %.6f, \"elapsed\": %.6f, \"latencies\": [", t0, t1, t1 - t0);
    for (size_t i = 0; i < lat.size(); i++) std::printf("%s%.6f", i ? ", " : "", lat[i]);
    std::printf("]}\n");
    std::fflush(stdout);
    if (end)
        while (access(end, F_OK) != 0) usleep(1000);
    return 0;
}
