/* Shared by the driver-API test programs (C, linked with -lcuda): CU_CHECK prints the failing call with
 * the driver's error name and exits 1; CU_EXPECT wants exactly one error. Kernels come from the directory
 * given as argv[1] (tests/programs/bin/drv_kernels). */
#ifndef DRV_COMMON_H
#define DRV_COMMON_H
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline const char *cu_name(CUresult r) {
    const char *n = NULL;
    return cuGetErrorName(r, &n) == CUDA_SUCCESS && n ? n : "?";
}

#define CU_CHECK(call)                                                                               \
    do {                                                                                             \
        CUresult r_ = (call);                                                                        \
        if (r_ != CUDA_SUCCESS) {                                                                    \
            fprintf(stderr, "%s:%d: %s failed: %d %s\n", __FILE__, __LINE__, #call, (int)r_, cu_name(r_)); \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

#define CU_EXPECT(call, want)                                                                        \
    do {                                                                                             \
        CUresult r_ = (call);                                                                        \
        if (r_ != (want)) {                                                                          \
            fprintf(stderr, "%s:%d: %s returned %d %s, expected %d %s\n", __FILE__, __LINE__, #call, \
                    (int)r_, cu_name(r_), (int)(want), cu_name(want));                               \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

#define REQUIRE(cond)                                                                                \
    do {                                                                                             \
        if (!(cond)) {                                                                               \
            fprintf(stderr, "%s:%d: %s does not hold\n", __FILE__, __LINE__, #cond);                 \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

/* cuInit, then device 0's primary context made current (what most driver programs start with). */
static inline CUcontext use_primary_context(CUdevice *dev) {
    CUcontext ctx;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(dev, 0));
    CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, *dev));
    CU_CHECK(cuCtxSetCurrent(ctx));
    return ctx;
}

/* Reads dir/name whole, NUL-terminated (PTX must be, for cuModuleLoadData). */
static inline void *read_kernel(const char *dir, const char *name, size_t *size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = (char *)calloc(1, (size_t)n + 1); /* a C++ program includes this too */
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) { perror(path); exit(1); }
    fclose(f);
    if (size) *size = (size_t)n;
    return buf;
}
#endif
