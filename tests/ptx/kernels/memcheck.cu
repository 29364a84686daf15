// Checked accesses at chosen addresses (test_jit_memcheck.py): each kernel reads `size` bytes (1, 2, 4, 8 or
// 16: one load instruction of that size) at a base + off + threadIdx.x * stride, in global, shared, local or
// generic memory, so that the tests can put the access at every edge of its space: the last byte, one past it,
// misaligned, below it, and wrapped around the top of the address space.

__device__ long long load_sized(const char* q, int size) {
    switch (size) {
    case 1: return *(const unsigned char*)q;
    case 2: return *(const unsigned short*)q;
    case 4: return *(const unsigned int*)q;
    case 8: return *(const long long*)q;
    default: {
        int4 v = *(const int4*)q;
        return (long long)v.x + v.y + v.z + v.w;
    }
    }
}

// global memory: p + off + t * stride
extern "C" __global__ void globalAt(const char* p, long long off, long long stride, int size, long long* out) {
    const char* q = p + off + threadIdx.x * stride;
    long long v;
    switch (size) {  // (each size its own load instruction, addressed from q)
    case 1: v = __ldg((const unsigned char*)q); break;
    case 2: v = *(const unsigned short*)q; break;
    case 4: v = *(const unsigned int*)q; break;
    case 8: v = *(const long long*)q; break;
    default: {
        int4 w = *(const int4*)q;
        v = (long long)w.x + w.y + w.z + w.w;
    }
    }
    out[threadIdx.x] = v;
}

// two global loads from one base register ([%rd], [%rd+20]: one allocation cache for both)
extern "C" __global__ void twoFromOneBase(const int* p, int* out) {
    const int* q = p + threadIdx.x;
    out[threadIdx.x] = q[0] + q[5];
}

// dynamic shared memory (its size given at the launch): sh + off + t * stride, after filling it
extern "C" __global__ void sharedAt(long long off, long long stride, int size, int fill, long long* out) {
    extern __shared__ char sh[];
    for (int i = threadIdx.x; i < fill; i += blockDim.x) sh[i] = (char)(i * 7 + 1);
    __syncthreads();
    out[threadIdx.x] = load_sized(sh + off + threadIdx.x * stride, size);
}

// a local array of 48 bytes: buf + off + t * stride
extern "C" __global__ void localAt(long long off, long long stride, int size, long long* out) {
    __align__(16) char buf[48];
    for (int i = 0; i < 48; i++) buf[i] = (char)(i * 5 + threadIdx.x);
    out[threadIdx.x] = load_sized(buf + off + threadIdx.x * stride, size);
}

// generic: shared memory (which = 1) or global p (which = 0) through one pointer
extern "C" __global__ void genericAt(const char* p, int which, long long off, int size, long long* out) {
    __shared__ __align__(16) char sh[64];
    for (int i = threadIdx.x; i < 64; i += blockDim.x) sh[i] = (char)(i * 3 + 2);
    __syncthreads();
    const char* base = which ? (const char*)sh : p;
    out[threadIdx.x] = load_sized(base + off + threadIdx.x * 4, size);
}

// writes at p + off + t * stride: a store of `size` bytes (op 0; 16: a vector store) or an atomic add (op 1;
// size 4 or 8), for the faults of stores and atomics at the edges
extern "C" __global__ void writeAt(char* p, long long off, long long stride, int size, int op, long long* out) {
    char* q = p + off + threadIdx.x * stride;
    long long v = 1;
    if (op) {
        if (size == 4) v = atomicAdd((unsigned int*)q, 1u);
        else v = (long long)atomicAdd((unsigned long long*)q, 1ull);
    } else {
        switch (size) {
        case 1: *q = 1; break;
        case 4: *(int*)q = 1; break;
        case 8: *(long long*)q = 1; break;
        default: *(int4*)q = make_int4(1, 2, 3, 4);
        }
    }
    out[threadIdx.x] = v;
}
