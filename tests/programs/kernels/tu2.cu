// A second translation unit with its own fat binary and kernel.
#include <cuda_runtime.h>

__global__ void double_all(int *data, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] *= 2;
}

void launch_tu2(int *data, int n, cudaStream_t s) { double_all<<<(n + 255) / 256, 256, 0, s>>>(data, n); }
