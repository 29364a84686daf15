// Packed 16-bit integer min/max (PTX ISA 8.0, sm_90): what CUB's compute_120 PTX uses for 16-bit reductions.
#define SIMD16_BODY \
    unsigned *o = out + 6 * i; \
    unsigned r; \
    asm("min.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[0] = r; \
    asm("min.s16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[1] = r; \
    asm("max.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[2] = r; \
    asm("max.s16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[3] = r; \
    asm("min.relu.s16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[4] = r; \
    asm("max.relu.s16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[5] = r;

extern "C" __global__ void simd16(const unsigned *x, const unsigned *y, unsigned *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a = x[i], b = y[i];
    SIMD16_BODY
}
// Every input uniform over the launch (kernel parameters): the scalar paths.
extern "C" __global__ void simd16U(unsigned a, unsigned b, unsigned *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    SIMD16_BODY
}
