// Warp collectives in divergent code, for tests/ptx/test_jit_warp.py: the compiling engine against the
// interpreter on random inputs (every kernel here must compile; the tests check that and compare memory).

// Shuffles of every mode in a branch taken by some segments of each warp (segments of W = 4..32 lanes, W and
// the segments random per warp), with per-lane offsets: every source lies in the branch's mask (CUDA: a lane
// may read only lanes that take part). The lanes of the other branch shuffle among themselves.
extern "C" __global__ void shflDivergent(const int *in, const unsigned *sel, int *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned lane = threadIdx.x & 31;
    int v = in[i];
    unsigned s = sel[i], sw = sel[i & ~31];
    int W = 4 << (sw & 3);
    bool in_ = (sw >> (8 + lane / W)) & 1;
    unsigned take = __ballot_sync(0xffffffffu, in_);
    int r0 = -1, r1 = -1, r2 = -1, r3 = -1;
    if (in_) {
        unsigned lo = __ffs(take) - 1, hi = 31 - __clz(take);
        r0 = __shfl_sync(take, v, (s >> 8) & 1 ? hi : lo);
        r1 = __shfl_up_sync(take, v, s & 7, W);
        r2 = __shfl_down_sync(take, v, (s >> 3) & 7, W);
        r3 = __shfl_xor_sync(take, v, ((s >> 9) & 31) & (W - 1), W);
    } else {
        r0 = __shfl_sync(~take, v, __ffs(~take) - 1);
    }
    out[4 * i + 0] = r0;
    out[4 * i + 1] = r1;
    out[4 * i + 2] = r2;
    out[4 * i + 3] = r3;
}

// The shfl predicate output (inline PTX), with clamp values and segment masks from the input.
extern "C" __global__ void shflPred(const int *in, const unsigned *c, int *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i], r;
    unsigned p, cc = c[i >> 5], b = c[i] & 31;
    asm volatile("{ .reg .pred q; shfl.sync.up.b32 %0|q, %2, %3, %4, 0xffffffff; selp.u32 %1, 1, 0, q; }"
                 : "=r"(r), "=r"(p) : "r"(v), "r"(b), "r"(cc & 0x1f1f));
    out[4 * i + 0] = r;
    out[4 * i + 1] = p;
    asm volatile("{ .reg .pred q; shfl.sync.idx.b32 %0|q, %2, %3, %4, 0xffffffff; selp.u32 %1, 1, 0, q; }"
                 : "=r"(r), "=r"(p) : "r"(v), "r"(b), "r"(cc & 0x1f1f));
    out[4 * i + 2] = r;
    out[4 * i + 3] = p;
}

// Votes, activemask, match and redux in a data-dependent loop: lanes leave after different trip counts, so
// the collectives run with the lanes still in the loop (their mask is __activemask()).
extern "C" __global__ void loopCollectives(const int *in, const unsigned *trips, unsigned *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    unsigned acc = 0, x = 0;
    for (unsigned k = 0; k < trips[i]; k++) {
        unsigned m = __activemask();
        acc += __ballot_sync(m, (v >> k) & 1) ^ m;
        acc += __any_sync(m, v > (int)k) + 2 * __all_sync(m, v > (int)k) + 4 * __uni_sync(m, v & 1);
        acc += __match_any_sync(m, v & 3) * 7;
        int pred;
        acc += __match_all_sync(m, v & 1, &pred) + pred;
        acc += __reduce_add_sync(m, v) + __reduce_min_sync(m, v) + __reduce_max_sync(m, (unsigned)v);
        acc += __reduce_and_sync(m, v) ^ __reduce_or_sync(m, v) ^ __reduce_xor_sync(m, v);
        x += __shfl_xor_sync(m, acc, 1);  // a source lane may have left the loop: undefined, not compared
        v = v * 3 + 1;
    }
    out[i] = acc;
    out[i + gridDim.x * blockDim.x] = x * 0;
}

// Block barriers and warp collectives together: a block sum (shuffles, then one value per warp in shared
// memory, then the first warp), in a loop with __syncthreads; threads past n exit at the start.
extern "C" __global__ void blockSums(const float *in, float *out, int n, int reps) {
    __shared__ float part[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    unsigned live = __activemask();
    float v = in[i];
    for (int r = 0; r < reps; r++) {
        float s = v;
        for (int off = 16; off > 0; off >>= 1) {
            float o = __shfl_down_sync(live, s, off);
            if (lane + off < 32 && (live >> (lane + off)) & 1) s += o;
        }
        if (lane == 0) part[w] = s;
        __syncthreads();
        if (w == 0) {
            int nw = (min(n - (int)(blockIdx.x * blockDim.x), (int)blockDim.x) + 31) / 32;
            float t = lane < nw ? part[lane] : 0.0f;
            unsigned m = __ballot_sync(live, lane < nw);
            for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(live, t, off);
            if (lane == 0) out[blockIdx.x * reps + r] = t + (float)__popc(m);
        }
        __syncthreads();
        v = v * 0.5f + 1.0f;
    }
}

// __syncwarp between a shared-memory store and a neighbour's load; a collective under a guard.
extern "C" __global__ void syncwarpExchange(const int *in, int *out) {
    __shared__ int buf[256];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    buf[t] = in[i];
    __syncwarp();
    int nb = buf[(t & ~31) | ((t + 1) & 31)];
    __syncwarp();
    buf[t] = nb * 2;
    __syncwarp();
    out[i] = buf[(t & ~31) | ((t + 5) & 31)] + (in[i] > 0 ? __popc(__ballot_sync(__activemask(), nb & 1)) : -1);
}

// Reads a lane that exited (undefined in CUDA): the JIT flags it.
extern "C" __global__ void shflFromExited(const int *in, int *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if ((threadIdx.x & 31) >= 20) return;
    out[i] = __shfl_down_sync(0xffffffffu, in[i], 16);
}

// elect.sync with labeled masks: the lowest lane of each group of equal labels leads.
extern "C" __global__ void electGroups(const int *label, unsigned *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned m = __match_any_sync(0xffffffffu, label[i]), leader, is;
    asm volatile("{.reg .pred p; elect.sync %0|p, %2; selp.u32 %1, 1, 0, p;}" : "=r"(leader), "=r"(is) : "r"(m));
    out[2 * i] = leader;
    out[2 * i + 1] = is;
}

// __syncthreads_count/and/or (bar.red) after some threads of each block exited, and in a loop with shuffles.
extern "C" __global__ void barReductions(const int *in, int *out, int live) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if ((int)threadIdx.x >= live) return;  // live is even: xor-1 shuffle partners are both there
    int v = in[i];
    int c = __syncthreads_count(v > 0);
    int a = __syncthreads_and(v > -50);
    int o = __syncthreads_or(v > 90);
    int acc = 0;
    for (int k = 0; k < 3; k++) {
        acc += __syncthreads_count((v >> k) & 1);
        v += __shfl_xor_sync(__activemask(), v, 1);
    }
    out[4 * i] = c;
    out[4 * i + 1] = a;
    out[4 * i + 2] = o;
    out[4 * i + 3] = acc;
}

// Never ends (n >= 0): a shuffle in an endless loop. The watchdog must stop it between collective rounds.
extern "C" __global__ void shuffleSpin(int *out, int n) {
    int v = threadIdx.x;
    for (;;) {
        v += __shfl_xor_sync(0xffffffffu, v, 1);
        if (n < 0) break;
    }
    out[threadIdx.x] = v;
}
