// Classic GPU algorithms: bitonic sort in shared memory, radix-style counting with warp ballots, a stencil.
extern "C" __global__ void bitonicSort(unsigned *keys, unsigned *vals, unsigned arrayLength, unsigned dir) {
    extern __shared__ unsigned s[];
    unsigned *sk = s, *sv = s + arrayLength;
    const unsigned base = blockIdx.x * arrayLength;
    for (unsigned i = threadIdx.x; i < arrayLength; i += blockDim.x) {
        sk[i] = keys[base + i];
        sv[i] = vals[base + i];
    }
    for (unsigned size = 2; size <= arrayLength; size <<= 1) {
        for (unsigned stride = size / 2; stride > 0; stride >>= 1) {
            __syncthreads();
            for (unsigned t = threadIdx.x; t < arrayLength / 2; t += blockDim.x) {
                unsigned pos = 2 * t - (t & (stride - 1));
                unsigned ddd = dir ^ ((t & (size / 2)) != 0);
                if (size == arrayLength) ddd = dir;
                unsigned a = sk[pos], b = sk[pos + stride];
                if ((a > b) == ddd) {
                    sk[pos] = b; sk[pos + stride] = a;
                    unsigned va = sv[pos]; sv[pos] = sv[pos + stride]; sv[pos + stride] = va;
                }
            }
        }
    }
    __syncthreads();
    for (unsigned i = threadIdx.x; i < arrayLength; i += blockDim.x) {
        keys[base + i] = sk[i];
        vals[base + i] = sv[i];
    }
}
extern "C" __global__ void splitByBit(const unsigned *in, unsigned *out, int bit, int n) {
    // stable partition of one block's elements by a bit: ballots + popc give each element its position
    __shared__ unsigned zeros[32];
    __shared__ unsigned total;
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    unsigned v = i < n ? in[i] : 0xFFFFFFFFu;
    bool one = (v >> bit) & 1;
    unsigned ball = __ballot_sync(0xFFFFFFFFu, !one);
    unsigned lane = t & 31, warp = t >> 5;
    if (lane == 0) zeros[warp] = __popc(ball);
    __syncthreads();
    if (t == 0) {
        unsigned acc = 0;
        for (unsigned w = 0; w < blockDim.x / 32; ++w) { unsigned z = zeros[w]; zeros[w] = acc; acc += z; }
        total = acc;
    }
    __syncthreads();
    unsigned below = __popc(ball & ((1u << lane) - 1));
    unsigned zbefore = zeros[warp] + below;
    unsigned pos = one ? total + (t - zbefore) : zbefore;
    out[blockIdx.x * blockDim.x + pos] = v;
}
extern "C" __global__ void stencil2d(const float *in, float *out, int w, int h) {
    __shared__ float tile[18][18];
    int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
    int lx = threadIdx.x + 1, ly = threadIdx.y + 1;
    auto at = [&](int xx, int yy) { xx = min(max(xx, 0), w - 1); yy = min(max(yy, 0), h - 1); return in[yy * w + xx]; };
    tile[ly][lx] = at(x, y);
    if (threadIdx.x == 0) tile[ly][0] = at(x - 1, y);
    if (threadIdx.x == 15) tile[ly][17] = at(x + 1, y);
    if (threadIdx.y == 0) tile[0][lx] = at(x, y - 1);
    if (threadIdx.y == 15) tile[17][lx] = at(x, y + 1);
    __syncthreads();
    if (x < w && y < h)
        out[y * w + x] = 0.5f * tile[ly][lx] + 0.125f * (tile[ly][lx - 1] + tile[ly][lx + 1] + tile[ly - 1][lx] + tile[ly + 1][lx]);
}
