// Test program for gpushim.fatbin: templates, struct parameters by value, many parameters of mixed sizes.
#include <cstdio>

struct Small { int a; double b; char c[20]; };               // 40 bytes, align 8
struct alignas(16) Vec { float x, y, z, w; };                  // 16 bytes, align 16
struct Big { int v[41]; };                                      // 164 bytes, align 4

template <typename T>
__global__ void tadd(T* a, const T* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += b[i];
}

__global__ void many(char c, short s, int i, long long l, float f, double d, void* p, Small st, char c2, bool flag,
                     Vec v, unsigned short us) {
    if (threadIdx.x == 0)
        ((double*)p)[0] = c + s + i + l + f + d + st.a + st.b + st.c[3] + c2 + flag + v.x + v.w + us;
}

__global__ void big(float* out, Big b) { out[threadIdx.x] = b.v[threadIdx.x % 41]; }

__global__ void empty() {}

__device__ int counter;

int main() {
    float* a = nullptr;
    cudaMalloc(&a, 1024);
    tadd<<<1, 32>>>(a, a, 32);
    tadd<<<1, 32>>>((double*)a, (double*)a, 32);
    tadd<<<1, 32>>>((int*)a, (int*)a, 32);
    Small st{};
    Vec v{};
    many<<<1, 1>>>(1, 2, 3, 4, 5.f, 6., a, st, 7, true, v, 9);
    Big b{};
    big<<<1, 41>>>(a, b);
    empty<<<1, 1>>>();
    cudaError_t err = cudaDeviceSynchronize();
    printf("%s\n", cudaGetErrorString(err));
    cudaFree(a);
    return 0;
}
