// sm_80 asynchronous global->shared copies (cp.async), including the zero-filling form.
extern "C" __global__ void cpAsync(const int4 *in, int *out) {
    __shared__ int4 buf[64];
    __shared__ int4 part[64];
    unsigned t = threadIdx.x;
    const int4 *src = in + blockIdx.x * 64 + t;
    unsigned sa = (unsigned)__cvta_generic_to_shared(&buf[t]);
    unsigned pa = (unsigned)__cvta_generic_to_shared(&part[t]);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(src));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(pa), "l"(src), "r"(t % 17));
    asm volatile("cp.async.commit_group;");
    asm volatile("cp.async.wait_group 0;");
    __syncthreads();
    int4 v = buf[63 - t], p = part[t];
    out[2 * (blockIdx.x * 64 + t)] = v.x + 2 * v.y + 3 * v.z + 4 * v.w;
    out[2 * (blockIdx.x * 64 + t) + 1] = p.x + 2 * p.y + 3 * p.z + 4 * p.w;
}
