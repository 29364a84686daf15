// sm_90 elect.sync: one leader per warp among the participating lanes.
extern "C" __global__ void electLeader(const int *in, unsigned *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned leader = 0xFFFFFFFF, is = 0;
    if (in[i] > 0) {
        asm volatile("{.reg .pred p; elect.sync %0|p, %2; selp.u32 %1, 1, 0, p;}"
                     : "=r"(leader), "=r"(is) : "r"(__activemask()));
    }
    out[2 * i] = leader;
    out[2 * i + 1] = is;
}
