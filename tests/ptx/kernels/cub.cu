// CUB block-level primitives: heavy users of inline PTX (shfl with predicates, bfe, prmt, ld.nc ...).
#include <cub/cub.cuh>

extern "C" __global__ void cubBlockOps(const int *in, int *sum, int *scan, int *sorted) {
    using Reduce = cub::BlockReduce<int, 128>;
    using Scan = cub::BlockScan<int, 128>;
    using Sort = cub::BlockRadixSort<int, 128, 4>;
    __shared__ union {
        typename Reduce::TempStorage reduce;
        typename Scan::TempStorage scan;
        typename Sort::TempStorage sort;
    } tmp;
    int t = threadIdx.x, base = blockIdx.x * 512;
    int v = in[base + 4 * t];
    int s = Reduce(tmp.reduce).Sum(v);
    if (t == 0) sum[blockIdx.x] = s;
    __syncthreads();
    int excl;
    Scan(tmp.scan).ExclusiveSum(v, excl);
    scan[blockIdx.x * 128 + t] = excl;
    __syncthreads();
    int keys[4];
    for (int k = 0; k < 4; ++k) keys[k] = in[base + 4 * t + k];
    Sort(tmp.sort).Sort(keys);
    for (int k = 0; k < 4; ++k) sorted[base + 4 * t + k] = keys[k];
}

extern "C" __global__ void cubWarpOps(const float *in, float *out) {
    using WarpReduce = cub::WarpReduce<float>;
    __shared__ typename WarpReduce::TempStorage tmp[4];
    int t = threadIdx.x;
    float v = in[blockIdx.x * blockDim.x + t];
    float m = WarpReduce(tmp[t / 32]).Reduce(v, ::cuda::maximum<>{});
    if (t % 32 == 0) out[(blockIdx.x * blockDim.x + t) / 32] = m;
}
