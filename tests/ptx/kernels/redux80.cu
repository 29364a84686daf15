extern "C" __global__ void matchRedux(const int *in, unsigned *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    int pred;
    out[4 * i + 0] = __match_any_sync(0xffffffff, v);
    out[4 * i + 1] = __match_all_sync(0xffffffff, v & 1, &pred);
    out[4 * i + 2] = __reduce_add_sync(0xffffffff, (unsigned)v);
    out[4 * i + 3] = __reduce_max_sync(0xffffffff, v);
}
