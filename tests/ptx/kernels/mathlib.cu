// Full-precision libdevice math: long instruction mixes (fma, cvt, bit tricks, selects) inlined by nvcc.
extern "C" __global__ void mathf(const float *x, const float *y, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = x[i], b = y[i];
    float *o = out + 12 * i;
    o[0] = sinf(a); o[1] = cosf(a); o[2] = expf(b); o[3] = logf(fabsf(a) + 1e-3f);
    o[4] = powf(fabsf(a), b); o[5] = tanhf(a); o[6] = atan2f(a, b); o[7] = erff(a);
    o[8] = cbrtf(a); o[9] = fmodf(a, b); o[10] = hypotf(a, b); o[11] = lgammaf(fabsf(a) + 0.5f);
}
extern "C" __global__ void mathd(const double *x, const double *y, double *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double a = x[i], b = y[i];
    double *o = out + 8 * i;
    o[0] = sin(a); o[1] = exp(b); o[2] = log(fabs(a) + 1e-3); o[3] = pow(fabs(a), b);
    o[4] = atan2(a, b); o[5] = sqrt(fabs(a)) / b; o[6] = tanh(a); o[7] = (double)(long long)(a * 1e6) / 7;
}
extern "C" __global__ void intmath(const int *x, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int a = x[i];
    unsigned u = (unsigned)a;
    int *o = out + 8 * i;
    o[0] = a / 7; o[1] = a % 13; o[2] = u / 1000u; o[3] = u % 97u;
    o[4] = __umul24(u, 3u); o[5] = (int)((long long)a * 1234567 / 1000003);
    o[6] = __usad(u, 5u, 1u) + __popcll((unsigned long long)a << 7); o[7] = __vabsdiffu4(u, 0x80808080u);
}
