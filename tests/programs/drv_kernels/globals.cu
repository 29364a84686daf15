// Module variables: a __device__ counter and a __constant__ table, reached with cuModuleGetGlobal.
__device__ unsigned int counter;
__constant__ float coeffs[4];
__device__ int initialised = 42;

extern "C" __global__ void poly(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = coeffs[0] + v * (coeffs[1] + v * (coeffs[2] + v * coeffs[3])) + initialised;
        atomicAdd(&counter, 1u);
    }
}
