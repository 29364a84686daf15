// Shared library for the ELF scan tests.
__global__ void scale(float* x, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
}

extern "C" int lib_scale(float* host, int n) {
    float* d = nullptr;
    if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return -1;
    cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice);
    scale<<<(n + 255) / 256, 256>>>(d, 2.f, n);
    cudaMemcpy(host, d, n * sizeof(float), cudaMemcpyDeviceToHost);
    return cudaFree(d) == cudaSuccess ? 0 : -1;
}
