// JIT linking, part 1: a kernel calling a device function defined in link_lib.cu (built with -rdc).
extern "C" __device__ float saxpy_op(float a, float x, float y);

extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = saxpy_op(a, x[i], y[i]);
}
