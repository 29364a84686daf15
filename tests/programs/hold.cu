// A client that allocates and fills device memory, reports the address, then waits: tests run two at once
// (separate memory) or kill one with SIGKILL (nothing may stay allocated in the server).
//   hold [MIB] [PATTERN] [SECONDS] [STOP-FILE]: waits SECONDS, or until STOP-FILE exists, then checks its memory
#include <cstring>
#include <unistd.h>
#include <vector>
#include "common.h"

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64;
    int pattern = argc > 2 ? std::atoi(argv[2]) : 1;
    int seconds = argc > 3 ? std::atoi(argv[3]) : 30;
    const char *stop = argc > 4 ? argv[4] : "/nonexistent-stop";
    size_t n = mib << 20;
    unsigned char *d;
    CHECK(cudaMalloc(&d, n));
    CHECK(cudaMemset(d, pattern, n));
    std::printf("ready %p\n", (void *)d);
    std::fflush(stdout);
    std::vector<unsigned char> h(n);
    for (int i = 0; i < seconds * 10; i++) {
        usleep(100000);
        if (access(stop, F_OK) == 0) break;
    }
    CHECK(cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i += 4097)
        if (h[i] != (unsigned char)pattern) { std::printf("corrupted at %zu: %d\n", i, h[i]); return 1; }
    std::printf("intact %d\n", pattern);
    return 0;
}
