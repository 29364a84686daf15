extern "C" __global__ void histogram(const unsigned char *data, int n, unsigned *hist) {
    __shared__ unsigned sh[256];
    for (int j = threadIdx.x; j < 256; j += blockDim.x) sh[j] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&sh[data[i]], 1u);
    __syncthreads();
    for (int j = threadIdx.x; j < 256; j += blockDim.x) atomicAdd(&hist[j], sh[j]);
}
extern "C" __global__ void atomicOps(int *vals, const int *in, int *old) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    old[8 * i + 0] = atomicAdd(&vals[0], v);
    old[8 * i + 1] = atomicMin(&vals[1], v);
    old[8 * i + 2] = atomicMax(&vals[2], v);
    old[8 * i + 3] = atomicExch(&vals[3], v);
    old[8 * i + 4] = atomicCAS(&vals[4], i, v);
    old[8 * i + 5] = atomicAnd(&vals[5], v);
    old[8 * i + 6] = atomicOr(&vals[6], v);
    old[8 * i + 7] = atomicXor(&vals[7], v);
    atomicInc((unsigned *)&vals[8], 17u);
    atomicDec((unsigned *)&vals[9], 13u);
}
extern "C" __global__ void atomicF(float *f, double *d, const float *x, const double *y, float *oldf, double *oldd) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    oldf[i] = atomicAdd(&f[i % 4], x[i]);
    oldd[i] = atomicAdd(&d[i % 3], y[i]);
}
