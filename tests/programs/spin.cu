// A client whose kernel runs for hours on the emulator: <<<2^31-1, 1>>> blocks. It prints "launched" and
// then synchronises; tests kill it while the server is busy with the kernel.
#include "common.h"

__global__ void spin(int *out) {
    unsigned acc = 0;
    for (unsigned i = 0; i < 1000; i++) acc += i * blockIdx.x;
    if (blockIdx.x == 0x7fffffff) *out = (int)acc;  // never true: the result is never stored
}

int main() {
    int *d;
    CHECK(cudaMalloc(&d, sizeof(int)));
    spin<<<0x7fffffff, 1>>>(d);
    CHECK(cudaGetLastError());
    std::printf("launched\n");
    std::fflush(stdout);
    CHECK(cudaDeviceSynchronize());
    std::printf("done\n");
    return 0;
}
