// Kernels for tests/ptx/test_launch_cache.py: repeated launches of one kernel must never see each other's state.

extern "C" __global__ void sharedFresh(int *out, int write) {
    __shared__ int s[64];
    int t = threadIdx.x;
    if (write) s[t] = t + 100;
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = s[t];
}

extern "C" __global__ void dynSharedFresh(int *out, int write, int n) {
    extern __shared__ int d[];
    int t = threadIdx.x;
    if (write) for (int i = t; i < n; i += blockDim.x) d[i] = i + 7;
    __syncthreads();
    int acc = 0;
    for (int i = t; i < n; i += blockDim.x) acc += d[i];
    out[blockIdx.x * blockDim.x + t] = acc;
}

extern "C" __global__ void localFresh(int *out, int write, int k) {
    volatile int a[16];
    int t = threadIdx.x;
    if (write) for (int i = 0; i < 16; i++) a[i] = t * 16 + i + 1;
    out[t] = write ? a[k & 15] : 0;
}

extern "C" __global__ void ids(int *out, int scale) {
    int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int i = b * blockDim.x * blockDim.y * blockDim.z + t;
    out[i] = i * scale + b;
}

extern "C" __global__ void halfExit(int *out, int n, int v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __syncthreads();  // the exited threads must not hold the others
    out[i] = v + i;
}

extern "C" __global__ void poke(int *p, int i, int v) {
    p[i] = v;
}

__device__ int counter;

extern "C" __global__ void bump(int *out) {
    int old = atomicAdd(&counter, 1);
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = old;
}
