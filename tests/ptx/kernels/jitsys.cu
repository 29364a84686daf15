// Kernels of tests/ptx/test_jit_sys.py: printf, assert, malloc and free compiled by the JIT (ops_sys.py,
// hostcall.py), against the interpreter.
#include <cassert>
#include <cstdio>

// Every conversion of gpushim/ptx/printf.py, from every thread, in branches and in a loop of a per-thread trip
// count; each line starts with the block and thread, so that the test can sort the lines per thread.
extern "C" __global__ void printAll(const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int b = blockIdx.x, t = threadIdx.x;
    float v = x[i];
    char word[8] = {'l', 'o', 'c', 'a', 'l', '0', 0, 0};  // a string in the thread's local memory
    word[5] = '0' + t % 10;
    __shared__ char shword[4];
    if (t == 0) {
        shword[0] = 's';
        shword[1] = 'h';
        shword[2] = 'b';
        shword[3] = 0;
    }
    __syncthreads();
    printf("b%d t%d d=%d i=%i u=%u o=%o x=%x X=%X c=%c s=%s %s %s%%\n", b, t, i - 5, -i, (unsigned)(i * 7919),
           i * 8, i * 48879, i * 48879, 'a' + t % 26, "const", word, shword);
    printf("b%d t%d f=%f F=%F e=%e E=%E g=%g G=%G a=%a A=%A\n", b, t, v, v * 3.0, v * 1e-7, v * 1e20,
           (double)v, v * 1e-9, (double)v, v * -2.0);
    printf("b%d t%d ld=%ld lld=%lld lu=%lu llx=%llx hd=%hd hhd=%hhd hu=%hu p=%p\n", b, t, (long)i << 33,
           -((long long)i << 40), (unsigned long)i * 3000000000ul, (unsigned long long)i << 36, (short)(i * 3000),
           (signed char)(i * 7), (unsigned short)(i * 5000), (void *)(x + i));
    printf("b%d t%d [%5d] [%-5d] [%05d] [%+d] [% d] [%.3f] [%10.2e] [%-8s] [%*d] [%.*f] [%#x] [%#o]\n", b, t, i,
           i, i, i, i, v, v, "ab", t % 7, i, t % 4, v, i, i);
    int written = 0;
    printf("b%d t%d n=%n s=%.2s zu=%zu null=%s p=%p\n", b, t, &written, "abcdef", (size_t)i * 5, (const char *)nullptr,
           (void *)nullptr);
    if (t & 1)
        printf("b%d t%d odd\n", b, t);
    else
        printf("b%d t%d even %d\n", b, t, t / 2);
    for (int k = 0; k < t % 5; k++) printf("b%d t%d loop %d of %d\n", b, t, k, t % 5);
    if (v > 10.0f) printf("b%d t%d big %.1f\n", b, t, v);
}

// Every thread writes out[i] = i + 1; the thread at `bad` fails its assert first (then writes nothing).
extern "C" __global__ void assertAt(int *out, int bad, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (int k = 0; k < 4; k++) assert(i != bad || k < 2);
    out[i] = i + 1;
}

// assert in a loop, never failing (the speed case of test_jit_sys.py and bench notes)
extern "C" __global__ void assertLoop(const int *in, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int s = 0;
    for (int k = 0; k < 8; k++) {
        int v = in[(i + k) % n];
        assert(v >= 0);
        s += v * (k + 1);
    }
    out[i] = s;
}

// Each thread takes a block of m ints from the device heap, fills it, sums it into out[i] and frees it.
extern "C" __global__ void heapRw(int *out, int m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int *p = (int *)malloc(m * sizeof(int));
    if (p == nullptr) {
        out[i] = -1;
        return;
    }
    for (int k = 0; k < m; k++) p[k] = i * k;
    int s = 0;
    for (int k = 0; k < m; k++) s += p[k];
    out[i] = s;
    free(p);
}

// Every thread asks for `bytes` of heap (the heap limit makes the later ones NULL); all hold their blocks
// across the barrier, so both engines ask in thread order with nothing freed between; then each frees its own
// (free(NULL) included) and, when even, frees NULL explicitly.
extern "C" __global__ void heapLimit(unsigned long long *out, unsigned long long bytes) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    char *p = (char *)malloc(bytes);
    if (p) {
        p[0] = (char)i;
        p[bytes - 1] = (char)i;
    }
    __syncthreads();
    out[i] = p ? (unsigned long long)(p[0] == (char)i && p[bytes - 1] == (char)i) : 2ull;
    free(p);
    if ((i & 1) == 0) free(nullptr);
}

// A store through a pointer after free(): ILLEGAL_ADDRESS. The same store instruction hit the block before the
// free (the JIT's cache of the allocation that store hit last must be dropped at the free).
extern "C" __global__ void useAfterFree(int *out, int n) {
    int i = threadIdx.x;
    int *p = (int *)malloc(64);
#pragma unroll 1
    for (int k = 0; k < n; k++) {
        p[k & 1] = i + k;
        if (k == 0) {
            out[i] = p[0];
            free(p);
        }
    }
}

// printf's format string from a bad address: the interpreter's error
extern "C" __global__ void badFormat(const char *fmt) {
    printf(fmt, 1);
}
