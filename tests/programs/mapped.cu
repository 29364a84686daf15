// Mapped pinned memory (CUDA C++ Programming Guide, "Mapped Memory"; with unified addressing the device pointer
// of a mapped allocation equals its host pointer, "Unified Virtual Address Space"). Prints key=value lines.
#include <chrono>
#include <cstring>
#include <thread>

#include "common.h"

__global__ void scale(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = p[i] * 3 + 1;
}

// flags[0]: the kernel started; flags[1]: the host's go; flags[2]: what the kernel saw
__global__ void wait_for_host(volatile int *flags) {
    flags[0] = 1;
    __threadfence_system();
    long spins = 0;
    while (flags[1] == 0) spins++;
    flags[2] = flags[1] + 100;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "local";
    std::setvbuf(stdout, nullptr, _IONBF, 0);
    const int n = 1000;
    int *h = nullptr, *d = nullptr;
    CHECK(cudaHostAlloc(&h, n * sizeof(int), cudaHostAllocMapped));
    unsigned flags = 0;
    CHECK(cudaHostGetFlags(&flags, h));
    std::printf("flags=%u\n", flags);
    if (!std::strcmp(mode, "tcp")) {
        // over TCP the server cannot map the client's memory: the call says so
        EXPECT_ERR(cudaHostGetDevicePointer((void **)&d, h, 0), cudaErrorNotSupported);
        CHECK(cudaFreeHost(h));
        std::printf("tcp=refused\n");
        return 0;
    }
    CHECK(cudaHostGetDevicePointer((void **)&d, h, 0));
    std::printf("same_pointer=%d\n", d == h);
    for (int i = 0; i < n; i++) h[i] = i;
    scale<<<(n + 255) / 256, 256>>>(d, n);
    CHECK(cudaDeviceSynchronize());
    int errors = 0;
    for (int i = 0; i < n; i++) errors += h[i] != i * 3 + 1;
    std::printf("kernel_rw_errors=%d\n", errors);
    // the host pointer itself works in a kernel (unified addressing)
    scale<<<(n + 255) / 256, 256>>>(h, n);
    CHECK(cudaDeviceSynchronize());
    errors = 0;
    for (int i = 0; i < n; i++) errors += h[i] != (i * 3 + 1) * 3 + 1;
    std::printf("host_pointer_errors=%d\n", errors);
    cudaPointerAttributes a;
    CHECK(cudaPointerGetAttributes(&a, h));
    std::printf("attr_type=%d attr_same=%d\n", (int)a.type, a.devicePointer == h && a.hostPointer == h);

    // a kernel polls a flag the host sets while it runs
    volatile int *f;
    CHECK(cudaHostAlloc((void **)&f, 4 * sizeof(int), cudaHostAllocMapped));
    f[0] = f[1] = f[2] = 0;
    wait_for_host<<<1, 1>>>(f);
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (f[0] == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    std::printf("kernel_started=%d\n", f[0]);
    f[1] = 7;
    CHECK(cudaDeviceSynchronize());
    std::printf("kernel_saw=%d\n", f[2]);
    CHECK(cudaFreeHost((void *)f));
    CHECK(cudaFreeHost(h));

    // memory that is not mapped: the device pointer is refused with a reason, bad pointers are invalid
    int *reg = (int *)std::malloc(4096);
    CHECK(cudaHostRegister(reg, 4096, cudaHostRegisterDefault)); // pinned, not mapped (registered.cu maps)
    EXPECT_ERR(cudaHostGetDevicePointer((void **)&d, reg, 0), cudaErrorNotSupported);
    CHECK(cudaHostUnregister(reg));
    std::free(reg);
    int local = 0;
    EXPECT_ERR(cudaHostGetDevicePointer((void **)&d, &local, 0), cudaErrorInvalidValue);
    // the freed pages may be handed out again
    CHECK(cudaHostAlloc(&h, 8192, cudaHostAllocMapped));
    h[2047] = 5;
    scale<<<8, 256>>>(h, 2048);
    CHECK(cudaDeviceSynchronize());
    std::printf("reuse=%d\n", h[2047]);
    CHECK(cudaFreeHost(h));
    (void)cudaGetLastError();
    std::printf("done=1\n");
    return 0;
}
