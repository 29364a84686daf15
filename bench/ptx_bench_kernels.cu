// Kernels of bench/ptx_bench.py besides tests/ptx/kernels/{basic,linalg}.cu.

// Divergent: every thread iterates its own number of Collatz steps.
extern "C" __global__ void collatz(const unsigned *start, unsigned *steps, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long x = start[i];
    unsigned s = 0;
    while (x != 1) {
        x = (x & 1) ? 3 * x + 1 : x >> 1;
        s++;
    }
    steps[i] = s;
}

// Shared memory and barriers in a loop: a 256-point ring smoothed `iters` times per block.
extern "C" __global__ void smemLoop(float *data, int iters) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = data[blockIdx.x * 256 + t];
    for (int it = 0; it < iters; it++) {
        __syncthreads();
        float v = s[(t + 1) & 255] * 0.5f + s[t] * 0.25f + s[(t + 255) & 255] * 0.25f;
        __syncthreads();
        s[t] = v;
    }
    data[blockIdx.x * 256 + t] = s[t];
}

// Warp shuffles: a block sum as tutorials write it (__shfl_down_sync within each warp, one value per warp in
// shared memory, the first warp sums those), one partial sum per block.
extern "C" __global__ void shflSum(const float *in, float *out, int n) {
    __shared__ float part[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) part[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < blockDim.x / 32 ? part[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0) out[blockIdx.x] = v;
    }
}
