/* The work of bench/ptx_bench.py's kernels as plain C loops (compiled -O2), the native baseline. */
#include <math.h>
#include <stdint.h>
#include <string.h>

void vadd(const float *a, const float *b, float *c, int n) {
    for (int i = 0; i < n; i++) c[i] = a[i] + b[i];
}

/* each C[i][j] summed with fma in k order, as linalg.cu's matmul (k outermost per row: vectorises) */
void matmul(const float *A, const float *B, float *C, int n) {
    for (int i = 0; i < n; i++) {
        float *c = C + i * n;
        for (int j = 0; j < n; j++) c[j] = 0.0f;
        for (int k = 0; k < n; k++) {
            float a = A[i * n + k];
            const float *b = B + k * n;
            for (int j = 0; j < n; j++) c[j] = fmaf(a, b[j], c[j]);
        }
    }
}

void collatz(const unsigned *start, unsigned *steps, int n) {
    for (int i = 0; i < n; i++) {
        unsigned long long x = start[i];
        unsigned s = 0;
        while (x != 1) {
            x = (x & 1) ? 3 * x + 1 : x >> 1;
            s++;
        }
        steps[i] = s;
    }
}

void smem_loop(float *data, int blocks, int iters) {
    float s[256], v[256];
    for (int b = 0; b < blocks; b++) {
        memcpy(s, data + b * 256, sizeof s);
        for (int it = 0; it < iters; it++) {
            for (int t = 0; t < 256; t++) v[t] = s[(t + 1) & 255] * 0.5f + s[t] * 0.25f + s[(t + 255) & 255] * 0.25f;
            memcpy(s, v, sizeof s);
        }
        memcpy(data + b * 256, s, sizeof s);
    }
}

/* shflSum's work: per block of 256, each warp's tree (lane l += lane l + off), then the warps' sums the same way */
static float warp_tree(float *v) {
    for (int off = 16; off > 0; off >>= 1)
        for (int l = 0; l < off; l++) v[l] += v[l + off];
    return v[0];
}

void shfl_sum(const float *in, float *out, int n) {
    float v[32], part[32];
    for (int b = 0; b < n / 256; b++) {
        for (int w = 0; w < 8; w++) {
            memcpy(v, in + b * 256 + w * 32, sizeof v);
            part[w] = warp_tree(v);
        }
        for (int l = 8; l < 32; l++) part[l] = 0.0f;
        out[b] = warp_tree(part);
    }
}
