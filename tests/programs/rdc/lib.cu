// The second translation unit of tests/programs/rdc/main.cu (relocatable device code, nvcc -rdc=true or
// -dc + -dlink): a __device__ variable, a __constant__ array and device functions main.cu uses.
#include <cstdio>

__device__ int g_scale = 3;
__constant__ int c_offsets[4] = {10, 20, 30, 40};

// internal linkage: main.cu has its own helper, and each unit its own printf strings ($str in PTX)
static __device__ int helper(int x) { return x + 1000; }

__device__ int lib_value(int x) {
    if (x == 1) printf("lib unit says %d\n", x);
    return helper(2 * x) + c_offsets[x % 4];
}

__device__ int lib_counter;  // incremented by kernels of both units
__global__ void lib_kernel(int *out) { out[threadIdx.x] = atomicAdd(&lib_counter, 1) >= 0 ? g_scale : -1; }
