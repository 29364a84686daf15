extern "C" __global__ void warpReduce(const int *in, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffff, v, off);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
}
extern "C" __global__ void shflModes(const int *in, int *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    out[4 * i + 0] = __shfl_sync(0xffffffff, v, (threadIdx.x * 7) & 31);
    out[4 * i + 1] = __shfl_up_sync(0xffffffff, v, 3);
    out[4 * i + 2] = __shfl_xor_sync(0xffffffff, v, 5);
    out[4 * i + 3] = __shfl_down_sync(0xffffffff, v, 2, 8);
}
extern "C" __global__ void voteBallot(const int *in, unsigned *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int p = in[i] > 0;
    unsigned b = __ballot_sync(0xffffffff, p);
    int a = __all_sync(0xffffffff, p);
    int y = __any_sync(0xffffffff, p);
    unsigned am = 0;
    if (in[i] > 5) am = __activemask();
    out[4 * i + 0] = b;
    out[4 * i + 1] = a;
    out[4 * i + 2] = y;
    out[4 * i + 3] = am;
}
