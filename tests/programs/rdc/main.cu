// Relocatable device code across two translation units (tests/programs/rdc/lib.cu): device functions, a
// __device__ variable and a __constant__ array defined in the other unit, set and read from the host through
// this unit's extern declarations, and a kernel of the other unit launched from here. Prints key=value lines.
#include <cstdio>

#include "../common.h"

extern __device__ int g_scale;
extern __constant__ int c_offsets[4];
extern __device__ int lib_counter;
__device__ int lib_value(int x);
__global__ void lib_kernel(int *out);

static __device__ int helper(int x) { return x + 1; }

__global__ void main_kernel(int *out) {
    int i = threadIdx.x;
    if (i == 2) printf("main unit says %d\n", i);
    atomicAdd(&lib_counter, 1);
    out[i] = lib_value(i) * g_scale + helper(i);
}

int main() {
    const int n = 32;
    int *d;
    CHECK(cudaMalloc(&d, n * sizeof(int)));
    int scale = 5;
    CHECK(cudaMemcpyToSymbol(g_scale, &scale, sizeof scale));
    int offs[4] = {1, 2, 3, 4};
    CHECK(cudaMemcpyToSymbol(c_offsets, offs, sizeof offs, 0));
    main_kernel<<<1, n>>>(d);
    CHECK(cudaGetLastError());
    int h[n];
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (h[i] != (2 * i + 1000 + offs[i % 4]) * scale + i + 1) bad++;
    printf("main_kernel_bad=%d\n", bad);
    printf("main_kernel_7=%d\n", h[7]);
    lib_kernel<<<1, 4>>>(d);
    CHECK(cudaMemcpy(h, d, 4 * sizeof(int), cudaMemcpyDeviceToHost));
    printf("lib_kernel_0=%d\n", h[0]);
    int counter = 0;
    CHECK(cudaMemcpyFromSymbol(&counter, lib_counter, sizeof counter));
    printf("lib_counter=%d\n", counter);
    return 0;
}
