// Shared by the test programs: CHECK prints the failing call and exits with status 1.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(call)                                                                              \
    do {                                                                                         \
        cudaError_t err_ = (call);                                                               \
        if (err_ != cudaSuccess) {                                                               \
            std::fprintf(stderr, "%s:%d: %s failed: %d %s (%s)\n", __FILE__, __LINE__, #call,    \
                         (int)err_, cudaGetErrorName(err_), cudaGetErrorString(err_));           \
            std::exit(1);                                                                        \
        }                                                                                        \
    } while (0)

// EXPECT_ERR: the call must fail with exactly this error.
#define EXPECT_ERR(call, want)                                                                   \
    do {                                                                                         \
        cudaError_t err_ = (call);                                                               \
        if (err_ != (want)) {                                                                    \
            std::fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s)\n", __FILE__,     \
                         __LINE__, #call, (int)err_, cudaGetErrorName(err_), (int)(want),        \
                         cudaGetErrorName(want));                                                \
            std::exit(1);                                                                        \
        }                                                                                        \
    } while (0)
