#define TILE 16
extern "C" __global__ void matmul(const float *A, const float *B, float *C, int N) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int t = 0; t < N / TILE; ++t) {
        As[threadIdx.y][threadIdx.x] = A[row * N + t * TILE + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[(t * TILE + threadIdx.y) * N + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    C[row * N + col] = acc;
}
#define TD 32
#define BR 8
extern "C" __global__ void transpose(float *odata, const float *idata, int width, int height) {
    __shared__ float tile[TD][TD + 1];
    int x = blockIdx.x * TD + threadIdx.x, y = blockIdx.y * TD + threadIdx.y;
    for (int j = 0; j < TD; j += BR)
        if (x < width && y + j < height) tile[threadIdx.y + j][threadIdx.x] = idata[(y + j) * width + x];
    __syncthreads();
    x = blockIdx.y * TD + threadIdx.x; y = blockIdx.x * TD + threadIdx.y;
    for (int j = 0; j < TD; j += BR)
        if (x < height && y + j < width) odata[(y + j) * height + x] = tile[threadIdx.x][threadIdx.y + j];
}
extern "C" __global__ void scanBlock(const int *in, int *out, int n) {
    __shared__ int tmp[2 * 512];
    int t = threadIdx.x, base = blockIdx.x * blockDim.x;
    int pout = 0, pin = 1;
    tmp[t] = (base + t < n) ? in[base + t] : 0;
    __syncthreads();
    for (int off = 1; off < blockDim.x; off *= 2) {
        pout = 1 - pout; pin = 1 - pout;
        if (t >= off) tmp[pout * blockDim.x + t] = tmp[pin * blockDim.x + t] + tmp[pin * blockDim.x + t - off];
        else tmp[pout * blockDim.x + t] = tmp[pin * blockDim.x + t];
        __syncthreads();
    }
    if (base + t < n) out[base + t] = tmp[pout * blockDim.x + t];
}
extern "C" __global__ void f64ops(const double *a, const double *b, double *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i], y = b[i];
    out[6 * i + 0] = x * y + x / y;
    out[6 * i + 1] = sqrt(fabs(x)) - y;
    out[6 * i + 2] = fma(x, y, -x);
    out[6 * i + 3] = fmin(x, y) + fmax(x, y) * 0.5;
    out[6 * i + 4] = (double)(long long)(x * 1000.0) + (double)(float)y;
    out[6 * i + 5] = x < y ? x - y : y - x;
}
