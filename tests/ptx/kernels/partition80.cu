// Warp-synchronous instructions run by several labeled groups of one warp at once, each with its own member
// mask (what cg::labeled_partition + cg::reduce compile to for sm_80+).
extern "C" __global__ void labeled(const int *label, const int *v, unsigned *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned m = __match_any_sync(0xffffffffu, label[i]);
    out[5 * i] = m;
    out[5 * i + 1] = (unsigned)__reduce_add_sync(m, v[i]);
    out[5 * i + 2] = (unsigned)__reduce_max_sync(m, v[i]);
    out[5 * i + 3] = __ballot_sync(m, v[i] > 0);
    out[5 * i + 4] = __all_sync(m, v[i] > 0);
}
