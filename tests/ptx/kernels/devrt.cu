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

// cudaMemcpyAsync/cudaMemsetAsync in device code, ordered with launches in the block's NULL stream
__global__ void sum_into(int *out, const int *p, int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += p[i];
    *out = s;
}
__global__ void device_copies(int *src, int *dst, int *out, int *err) {
    for (int i = 0; i < 16; i++) src[i] = i + 1;
    err[0] = (int)cudaMemcpyAsync(dst, src, 16 * sizeof(int), cudaMemcpyDeviceToDevice, 0);
    sum_into<<<1, 1>>>(out, dst, 16);  // after the copy: 136
    err[1] = (int)cudaMemsetAsync(dst, 0, 8 * sizeof(int), 0);
    sum_into<<<1, 1>>>(out + 1, dst, 16);  // after the memset: 9 + ... + 16 = 100
    int local[4] = {0, 0, 0, 0};
    err[2] = (int)cudaMemcpyAsync(local, src, 4, cudaMemcpyDeviceToDevice, 0);  // local memory: invalid
    err[3] = (int)cudaMemcpyAsync(dst, src, 4, cudaMemcpyHostToDevice, 0);  // not device to device
    out[2] = local[0];
}
__global__ void device_bad_copy(int *dst) { cudaMemcpyAsync(dst, (int *)0x10, 4, cudaMemcpyDefault, 0); }

__device__ void selection_sort_stub() {}

// the explicit API: cudaGetParameterBuffer + cudaLaunchDevice
__global__ void explicit_launch(int *out, int *err) {
    struct Args { int *out; int i; int v; };
    Args *a = (Args *)cudaGetParameterBuffer(8, sizeof(Args));
    a->out = out;
    a->i = 3;
    a->v = 42;
    err[0] = (int)cudaLaunchDevice((void *)child_set, a, dim3(1), dim3(1), 0, 0);
    err[1] = (int)cudaLaunchDevice((void *)child_set, a, dim3(1), dim3(1), 0, 0);  // already launched
    void *small = cudaGetParameterBuffer(8, 4);
    err[2] = (int)cudaLaunchDevice((void *)child_set, small, dim3(1), dim3(1), 0, 0);  // 16 bytes needed
    void *b = cudaGetParameterBuffer(8, 16);
    err[3] = (int)cudaLaunchDevice((void *)selection_sort_stub, b, dim3(1), dim3(1), 0, 0);  // not a kernel
}

// events in device code: a dependency between two created streams
__global__ void events(int *out, int *err) {
    cudaStream_t a, b;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    cudaEvent_t e;
    err[0] = (int)cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    child_set<<<1, 1, 0, a>>>(out, 0, 5);
    err[1] = (int)cudaEventRecord(e, a);
    err[2] = (int)cudaStreamWaitEvent(b, e, 0);
    sum_into<<<1, 1, 0, b>>>(out + 1, out, 1);  // after child_set through the event: 5
    err[3] = (int)cudaEventDestroy(e);
    err[4] = (int)cudaEventRecord(e, a);  // destroyed
    cudaEvent_t timed;
    err[5] = (int)cudaEventCreateWithFlags(&timed, cudaEventDefault);  // timing events are host-only
}

__global__ void whoami(int *out, int *err) {
    err[0] = (int)cudaGetDevice(&out[0]);
    err[1] = (int)cudaGetDeviceCount(&out[1]);
}
