// The runtime face's libraries (CUDA 12.x/13.x, "Library Management" in the runtime API reference):
// cudaLibraryLoadData / cudaLibraryLoadFromFile, cudaLibraryGetKernel, cudaLibraryGetGlobal,
// cudaKernelSetAttributeForDevice, a launch with cudaLaunchKernel on the cudaKernel_t, cudaLibraryUnload.
// Usage: library <dir of drv_kernels builds>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"

static std::vector<char> slurp(const std::string &path) {
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) { std::perror(path.c_str()); std::exit(1); }
    std::vector<char> v;
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) v.insert(v.end(), buf, buf + n);
    std::fclose(f);
    v.push_back(0);  // PTX text ends at its NUL
    return v;
}

int main(int argc, char **argv) {
    if (argc != 2) { std::fprintf(stderr, "usage: library <kernels dir>\n"); return 2; }
    std::string dir = argv[1];
    const int n = 1000;
    std::vector<float> a(n), b(n), c(n);
    for (int i = 0; i < n; i++) { a[i] = (float)i; b[i] = 2.0f * i; }
    float *da, *db, *dc;
    CHECK(cudaMalloc(&da, n * sizeof(float)));
    CHECK(cudaMalloc(&db, n * sizeof(float)));
    CHECK(cudaMalloc(&dc, n * sizeof(float)));
    CHECK(cudaMemcpy(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice));

    // a fat binary from memory: vecadd launched through cudaLaunchKernel on the cudaKernel_t
    std::vector<char> fatbin = slurp(dir + "/vecadd.fatbin");
    cudaLibrary_t lib;
    CHECK(cudaLibraryLoadData(&lib, fatbin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    cudaKernel_t vecadd;
    CHECK(cudaLibraryGetKernel(&vecadd, lib, "vecadd"));
    CHECK(cudaKernelSetAttributeForDevice(vecadd, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024, 0));
    int nn = n;
    void *args[] = {&da, &db, &dc, &nn};
    CHECK(cudaLaunchKernel((const void *)vecadd, dim3((n + 255) / 256), dim3(256), args, 0, 0));
    CHECK(cudaMemcpy(c.data(), dc, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (c[i] != 3.0f * i) { std::fprintf(stderr, "vecadd: c[%d] = %g\n", i, c[i]); return 1; }
    std::printf("library data vecadd ok: %d elements\n", n);

    // bad input: an unknown kernel name is cudaErrorSymbolNotFound, a bad device cudaErrorInvalidDevice
    cudaKernel_t none;
    EXPECT_ERR(cudaLibraryGetKernel(&none, lib, "no_such_kernel"), cudaErrorSymbolNotFound);
    EXPECT_ERR(cudaKernelSetAttributeForDevice(vecadd, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024, 99),
               cudaErrorInvalidDevice);
    CHECK(cudaLibraryUnload(lib));
    // a kernel of an unloaded library is no longer a function to launch
    cudaError_t e = cudaLaunchKernel((const void *)vecadd, dim3(1), dim3(1), args, 0, 0);
    if (e == cudaSuccess) { std::fprintf(stderr, "launch after cudaLibraryUnload succeeded\n"); return 1; }
    (void)cudaGetLastError();
    EXPECT_ERR(cudaLibraryUnload(lib), cudaErrorInvalidResourceHandle);

    // PTX from a file, with module variables: globals.ptx's __device__ int initialised = 42
    cudaLibrary_t glib;
    CHECK(cudaLibraryLoadFromFile(&glib, (dir + "/globals.ptx").c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    void *dinit;
    size_t bytes = 0;
    CHECK(cudaLibraryGetGlobal(&dinit, &bytes, glib, "initialised"));
    int init = 0;
    CHECK(cudaMemcpy(&init, dinit, sizeof init, cudaMemcpyDeviceToHost));
    if (bytes != sizeof(int) || init != 42) { std::fprintf(stderr, "initialised: %d (%zu bytes)\n", init, bytes); return 1; }
    float coeffs[4] = {1.0f, 0.0f, 0.0f, 0.0f};  // y = 1 + initialised = 43
    void *dco;
    CHECK(cudaLibraryGetGlobal(&dco, &bytes, glib, "coeffs"));
    CHECK(cudaMemcpy(dco, coeffs, sizeof coeffs, cudaMemcpyHostToDevice));
    cudaKernel_t poly;
    CHECK(cudaLibraryGetKernel(&poly, glib, "poly"));
    void *pargs[] = {&da, &dc, &nn};
    CHECK(cudaLaunchKernel((const void *)poly, dim3((n + 255) / 256), dim3(256), pargs, 0, 0));
    CHECK(cudaMemcpy(c.data(), dc, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (c[i] != 43.0f) { std::fprintf(stderr, "poly: c[%d] = %g\n", i, c[i]); return 1; }
    EXPECT_ERR(cudaLibraryLoadFromFile(&glib, (dir + "/missing.ptx").c_str(), nullptr, nullptr, 0, nullptr,
                                       nullptr, 0), cudaErrorFileNotFound);
    std::printf("library file globals ok: initialised %d, poly %g\n", init, c[0]);
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    return 0;
}
