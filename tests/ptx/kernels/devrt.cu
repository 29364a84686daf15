// Dynamic parallelism at the PTX level (tests/ptx/test_devrt.py), compiled with -rdc=true.
__global__ void child_set(int *out, int i, int v) { out[i] = v; }

// every thread launches one child: 64 launches from one grid
__global__ void each_thread(int *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    child_set<<<1, 1>>>(out, i, 3 * i + 1);
}

// a child's fault fails the whole launch
__global__ void bad_child(int *p) { p[threadIdx.x] = 1; }
__global__ void faulting_parent(int *p) { bad_child<<<1, 2>>>(p); }

// streams made in device code
__global__ void streams(int *out, int *err) {
    cudaStream_t s;
    err[0] = (int)cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    child_set<<<1, 1, 0, s>>>(out, 0, 7);
    err[1] = (int)cudaGetLastError();
    err[2] = (int)cudaStreamDestroy(s);
    child_set<<<1, 1, 0, s>>>(out, 1, 8);  // destroyed: cudaErrorInvalidResourceHandle
    err[3] = (int)cudaGetLastError();
    child_set<<<1, 1, 0, (cudaStream_t)0x1234>>>(out, 2, 9);  // never created
    err[4] = (int)cudaPeekAtLastError();
    err[5] = (int)cudaGetLastError();
    err[6] = (int)cudaGetLastError();
    cudaStream_t b;
    err[7] = (int)cudaStreamCreateWithFlags(&b, cudaStreamDefault);  // device streams must be non-blocking
}

// cudaMalloc/cudaFree in device code (the device heap); a tail launch frees what the parent allocated
__global__ void fill(int *p, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = i * i;
}
__global__ void copy_and_free(int *out, int *p, int n) {
    for (int i = 0; i < n; i++) out[i] = p[i];
    cudaFree(p);
}
__global__ void heap_user(int *out, int n, int *err) {
    int *p = nullptr;
    err[0] = (int)cudaMalloc((void **)&p, n * sizeof(int));
    fill<<<1, 32>>>(p, n);
    copy_and_free<<<1, 1, 0, cudaStreamTailLaunch>>>(out, p, n);
    int *huge = nullptr;
    err[1] = (int)cudaMalloc((void **)&huge, (size_t)1 << 40);  // over the heap: cudaErrorMemoryAllocation
    err[2] = huge == nullptr;
}
