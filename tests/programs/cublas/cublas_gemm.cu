/* cuBLAS through gpushim: cublasCreate, then cublasSgemm and cublasDgemm on small matrices, checked
 * against a host GEMM. Built by tests/e2e/test_cublas.py against libcublas from the nvidia-cublas wheel
 * (or the toolkit); the program needs only libcudart and libcublas (cuBLAS reaches the driver itself).
 * usage: cublas_gemm s|d|both [M N K]
 * Prints "sgemm ok"/"dgemm ok", or the cuBLAS status of the first call that failed. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK_RT(x) do { cudaError_t e_ = (x); if (e_) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)
#define CHECK_BL(x) do { cublasStatus_t s_ = (x); if (s_) { printf("%s: cublas status %d (%s)\n", #x, (int)s_, cublasGetStatusString(s_)); return 2; } } while (0)

static int M = 37, N = 29, K = 45; /* argv[2..4] */

/* column-major C = alpha*A*B + beta*C, as cuBLAS computes it */
template <typename T> static void host_gemm(const T *a, const T *b, T *c, T alpha, T beta) {
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)a[i + k * M] * b[k + j * K];
            c[i + j * M] = (T)(alpha * s + beta * c[i + j * M]);
        }
}

template <typename T> static int run(cublasHandle_t h, const char *name, double tol) {
    T *a = (T *)malloc(sizeof(T) * M * K), *b = (T *)malloc(sizeof(T) * K * N);
    T *c = (T *)malloc(sizeof(T) * M * N), *ref = (T *)malloc(sizeof(T) * M * N);
    for (int i = 0; i < M * K; i++) a[i] = (T)((i * 7 % 13) - 6) / 4;
    for (int i = 0; i < K * N; i++) b[i] = (T)((i * 5 % 11) - 5) / 2;
    for (int i = 0; i < M * N; i++) c[i] = ref[i] = (T)(i % 3);
    T alpha = (T)1.5, beta = (T)-0.5;
    host_gemm(a, b, ref, alpha, beta);
    T *da, *db, *dc;
    CHECK_RT(cudaMalloc(&da, sizeof(T) * M * K));
    CHECK_RT(cudaMalloc(&db, sizeof(T) * K * N));
    CHECK_RT(cudaMalloc(&dc, sizeof(T) * M * N));
    CHECK_RT(cudaMemcpy(da, a, sizeof(T) * M * K, cudaMemcpyHostToDevice));
    CHECK_RT(cudaMemcpy(db, b, sizeof(T) * K * N, cudaMemcpyHostToDevice));
    CHECK_RT(cudaMemcpy(dc, c, sizeof(T) * M * N, cudaMemcpyHostToDevice));
    if constexpr (sizeof(T) == 4)
        CHECK_BL(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &alpha, da, M, db, K, &beta, dc, M));
    else
        CHECK_BL(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &alpha, da, M, db, K, &beta, dc, M));
    CHECK_RT(cudaDeviceSynchronize());
    CHECK_RT(cudaMemcpy(c, dc, sizeof(T) * M * N, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < M * N; i++)
        if (fabs((double)c[i] - (double)ref[i]) > tol * (1 + fabs((double)ref[i]))) {
            if (bad++ < 5) printf("%s: c[%d] = %g, expected %g\n", name, i, (double)c[i], (double)ref[i]);
        }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    free(a); free(b); free(c); free(ref);
    if (bad) { printf("%s: %d wrong\n", name, bad); return 3; }
    printf("%s ok\n", name);
    return 0;
}

int main(int argc, char **argv) {
    cublasHandle_t h;
    CHECK_BL(cublasCreate(&h));
    int v = 0;
    CHECK_BL(cublasGetVersion(h, &v));
    printf("cublas %d handle ok\n", v);
    const char *which = argc > 1 ? argv[1] : "both";
    if (argc > 4) M = atoi(argv[2]), N = atoi(argv[3]), K = atoi(argv[4]);
    int r = 0;
    if (which[0] != 'd') r = run<float>(h, "sgemm", 1e-4);
    if (!r && which[0] != 's') r = run<double>(h, "dgemm", 1e-10);
    CHECK_BL(cublasDestroy(h));
    return r;
}
