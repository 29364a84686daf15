// Every allocation path against the server's memory limits: `quota PATH MiB` allocates MiB through PATH,
// then as much again (which must fail when the server allows less than twice MiB), frees, and allocates
// once more (which must succeed again). Prints PATH.first=, PATH.second=, PATH.again= error codes, and
// meminfo.free=/meminfo.total= after the first allocation.
#include <cstring>
#include <string>
#include "common.h"

__device__ char big_global[24 << 20];  // a 24 MiB module variable: placed in device memory on first use

__global__ void touch_global(int n) {
    if (threadIdx.x == 0) big_global[n - 1] = 1;
}

__global__ void heap_alloc(size_t n, int *got) {
    void *p = malloc(n);
    *got = p != nullptr;
    if (p) free(p);
}

static size_t g_mib;

static void meminfo() {
    size_t free = 0, total = 0;
    CHECK(cudaMemGetInfo(&free, &total));
    std::printf("meminfo.free=%zu\nmeminfo.total=%zu\n", free, total);
}

// One allocation of `bytes` through `path`; *out receives what to free.
static cudaError_t alloc(const std::string &path, size_t bytes, void **out) {
    *out = nullptr;
    if (path == "malloc") return cudaMalloc(out, bytes);
    if (path == "pitch") {
        size_t pitch;
        return cudaMallocPitch(out, &pitch, 4096, bytes / 4096);
    }
    if (path == "3d") {
        cudaPitchedPtr p{};
        cudaError_t e = cudaMalloc3D(&p, make_cudaExtent(4096, 256, bytes / (4096 * 256)));
        *out = p.ptr;
        return e;
    }
    if (path == "managed") return cudaMallocManaged(out, bytes);
    if (path == "async") {
        cudaError_t e = cudaMallocAsync(out, bytes, 0);
        cudaError_t s = cudaStreamSynchronize(0);
        return e ? e : s;
    }
    return cudaErrorInvalidValue;
}

static void release(const std::string &path, void *p) {
    if (!p) return;
    if (path == "async") {
        CHECK(cudaFreeAsync(p, 0));
        CHECK(cudaStreamSynchronize(0));
    } else {
        CHECK(cudaFree(p));
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: quota malloc|pitch|3d|managed|async|globals|heap MiB\n");
        return 2;
    }
    std::string path = argv[1];
    g_mib = std::strtoul(argv[2], nullptr, 10);
    size_t bytes = g_mib << 20;
    if (path == "globals") {
        // the module variable needs 24 MiB; hold `MiB` first so that it cannot fit under the quota
        void *hold = nullptr;
        CHECK(cudaMalloc(&hold, bytes));
        void *addr = nullptr;
        std::printf("globals.first=%d\n", (int)cudaGetSymbolAddress(&addr, big_global));
        CHECK(cudaFree(hold));
        cudaError_t e = cudaGetSymbolAddress(&addr, big_global);
        std::printf("globals.again=%d\n", (int)e);
        if (!e) {
            touch_global<<<1, 32>>>(24 << 20);
            std::printf("globals.kernel=%d\n", (int)cudaDeviceSynchronize());
        }
        meminfo();
        return 0;
    }
    if (path == "heap") {
        // a device heap larger than the quota is refused at once; one that fits is charged as kernels use it
        std::printf("heap.limit_big=%d\n", (int)cudaDeviceSetLimit(cudaLimitMallocHeapSize, (size_t)1 << 40));
        CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 32 << 20));
        void *sym;
        CHECK(cudaGetSymbolAddress(&sym, big_global));  // the module's 24 MiB variable is placed first
        int *got;
        CHECK(cudaMallocManaged(&got, sizeof(int)));
        void *hold = nullptr;
        CHECK(cudaMalloc(&hold, bytes));  // leaves less than the kernel's 16 MiB
        heap_alloc<<<1, 1>>>(16 << 20, got);
        CHECK(cudaDeviceSynchronize());
        std::printf("heap.first=%d\n", *got);
        CHECK(cudaFree(hold));
        heap_alloc<<<1, 1>>>(16 << 20, got);
        CHECK(cudaDeviceSynchronize());
        std::printf("heap.again=%d\n", *got);
        return 0;
    }
    void *a = nullptr, *b = nullptr, *c = nullptr;
    std::printf("%s.first=%d\n", path.c_str(), (int)alloc(path, bytes, &a));
    meminfo();
    std::printf("%s.second=%d\n", path.c_str(), (int)alloc(path, bytes, &b));
    cudaGetLastError();
    release(path, b);
    release(path, a);
    std::printf("%s.again=%d\n", path.c_str(), (int)alloc(path, bytes, &c));
    release(path, c);
    return 0;
}
