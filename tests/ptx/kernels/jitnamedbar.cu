// Named barriers (ids, thread counts, bar.arrive) on the compiling engine: tests/ptx/test_jit_namedbar.py.

// Warp-specialised pipeline, 192 threads: warps 0-1 produce into a double buffer, warps 2-3 consume; per
// stage s a "full" barrier (1 + s: producers bar.arrive, consumers barrier.sync) and an "empty" one (4 + s:
// consumers barrier.arrive, producers bar.sync), 128 threads each; the consumers' last arrivals on the empty
// barriers are never waited for. Warps 4-5 run a scan of their own (barrier 3, 64 threads,
// barrier.sync.aligned); then all meet at barrier 0 and thread 128 adds the consumers' checksums and the scan.
extern "C" __global__ void pipeline(const int *in, int *out, int *sums, int rounds) {
    __shared__ int buf[2][64];
    __shared__ int scan[64];
    __shared__ int check[64];
    int t = threadIdx.x;
    const int *src = in + blockIdx.x * rounds * 64;
    int *dst = out + blockIdx.x * rounds * 64;
    if (t < 64) {
#pragma unroll 1
        for (int r = 0; r < rounds; ++r) {
            int s = r & 1;
            if (r >= 2) {  // the consumers are done with buf[s]
                if (s) asm volatile("bar.sync 5, 128;" ::: "memory");
                else asm volatile("bar.sync 4, 128;" ::: "memory");
            }
            buf[s][t] = src[r * 64 + t] * 3 + r;
            if (s) asm volatile("bar.arrive 2, 128;" ::: "memory");
            else asm volatile("bar.arrive 1, 128;" ::: "memory");
        }
    } else if (t < 128) {
        int c = t - 64, acc = 0;
#pragma unroll 1
        for (int r = 0; r < rounds; ++r) {
            int s = r & 1;
            if (s) asm volatile("barrier.sync 2, 128;" ::: "memory");
            else asm volatile("barrier.sync 1, 128;" ::: "memory");
            int v = buf[s][(c * 7 + r) & 63];
            dst[r * 64 + c] = v;
            acc += v;
            if (s) asm volatile("barrier.arrive 5, 128;" ::: "memory");
            else asm volatile("barrier.arrive 4, 128;" ::: "memory");
        }
        check[c] = acc;
    } else {
        int s = t - 128;
        scan[s] = src[s] ^ 0x55;
#pragma unroll 1
        for (int d = 1; d < 64; d <<= 1) {
            asm volatile("barrier.sync.aligned 3, 64;" ::: "memory");
            int x = s >= d ? scan[s - d] : 0;
            asm volatile("bar.sync 3, 64;" ::: "memory");
            scan[s] += x;
        }
    }
    __syncthreads();
    if (t == 128) {
        int v = 0;
#pragma unroll 1
        for (int i = 0; i < 64; ++i) v += check[i] + scan[i];
        sums[blockIdx.x] = v;
    }
}

// Threads that never arrive. mode 0: threads < 64 wait at barrier 1 and threads >= 64 at barrier 2
// (count 128 each, 64 arrive): nothing else can run. mode 1: threads >= 96 exit, the others wait at
// barrier 1 without a count (every live thread). mode 2: threads < 64 wait at barrier 1 (count 128),
// the others exit.
extern "C" __global__ void neverArrive(int *out, int mode) {
    __shared__ int buf[128];
    int t = threadIdx.x;
    buf[t] = t * 5 + blockIdx.x;
    if (mode == 0) {
        if (t < 64) asm volatile("bar.sync 1, 128;" ::: "memory");
        else asm volatile("bar.sync 2, 128;" ::: "memory");
    } else if (mode == 1) {
        if (t >= 96) return;
        asm volatile("bar.sync 1;" ::: "memory");
    } else {
        if (t >= 64) return;
        asm volatile("bar.sync 1, 128;" ::: "memory");
    }
    out[blockIdx.x * 128 + t] = buf[t ^ 1] + buf[(t + 32) & 63];
}

// A barrier id and a thread count in registers (not compiled: the JIT falls back, and says why).
extern "C" __global__ void registerBarrier(int *out, int id, int count) {
    __shared__ int buf[128];
    int t = threadIdx.x;
    buf[t] = t + 1;
    asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(count) : "memory");
    out[t] = buf[127 - t];
}

// Arrivals that come in over several rounds: warp w first passes w barriers of its own (id 8 + w, 32
// threads), then adds to a shared counter and arrives at barrier 1 (128 threads; warp 0 with bar.arrive, the
// others with bar.sync, which then read the counter: every addition of the phase is in it), then all meet at
// barrier 2 before the next phase's additions.
extern "C" __global__ void arrivalOrder(int *out, int phases) {
    __shared__ int cnt;
    int t = threadIdx.x, w = t / 32;
    if (t == 0) cnt = 0;
    __syncthreads();
    for (int p = 0; p < phases; ++p) {
        for (int i = 0; i < w; ++i) {
            if (w == 1) asm volatile("bar.sync 9, 32;" ::: "memory");
            else if (w == 2) asm volatile("bar.sync 10, 32;" ::: "memory");
            else asm volatile("bar.sync 11, 32;" ::: "memory");
        }
        atomicAdd(&cnt, p + 1);
        if (w == 0) {
            asm volatile("bar.arrive 1, 128;" ::: "memory");
        } else {
            asm volatile("bar.sync 1, 128;" ::: "memory");
            out[(blockIdx.x * phases + p) * 128 + t] = cnt;
        }
        asm volatile("bar.sync 2, 128;" ::: "memory");
    }
}

// An mbarrier object outside shared memory (a generic address of global memory): the interpreter's fault.
extern "C" __global__ void mbarrierGlobal(unsigned long long *p) {
    asm volatile("mbarrier.init.b64 [%0], %1;" ::"l"(p), "r"(1) : "memory");
}
