// cudaMallocManaged after a device allocation whose pages overlapped host memory (so the shim could not
// reserve them): the page that allocation shared with a neighbouring device allocation must not stay
// reserved once both are freed, or a managed allocation placed there fails (mmap: File exists).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "common.h"

__global__ void add_one(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1;
}

int main() {
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    char *d1, *d2;
    CHECK(cudaMalloc(&d1, 512));
    if ((uintptr_t)d1 % pg) { std::fprintf(stderr, "d1 %p is not at a page start\n", (void *)d1); return 2; }
    // host memory of this process inside the pages the next device allocation (d1 + 512, four pages) will get
    void *host = (void *)((uintptr_t)d1 + 2 * pg);
    void *h = mmap(host, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (h != host) { std::perror("mmap"); return 2; }
    CHECK(cudaMalloc(&d2, 4 * pg));
    if (d2 != d1 + 512) { std::fprintf(stderr, "d2 %p is not right after d1 %p\n", (void *)d2, (void *)d1); return 2; }
    munmap(h, pg);
    CHECK(cudaFree(d1));  // d1 shares its page with d2: the page stays reserved while d2 lives
    CHECK(cudaFree(d2));
    int *m;
    const int n = 1024;
    CHECK(cudaMallocManaged(&m, n * sizeof(int)));
    std::printf("managed at d1: %d\n", (char *)m == d1);
    for (int i = 0; i < n; i++) m[i] = i;
    add_one<<<(n + 255) / 256, 256>>>(m, n);
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < n; i++)
        if (m[i] != i + 1) { std::fprintf(stderr, "m[%d] = %d\n", i, m[i]); return 1; }
    CHECK(cudaFree(m));
    std::printf("managed after overlap ok\n");
    return 0;
}
