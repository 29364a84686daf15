// Instructions nvcc rarely emits on its own, through inline PTX.
#define ASM_INT_BODY \
    unsigned *o = out + 24 * i; \
    unsigned r; \
    asm("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[0] = r; \
    asm("lop3.b32 %0, %1, %2, %3, 0x1B;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[1] = r; \
    asm("{.reg .pred p, q; setp.lt.u32 p|q, %1, %2; selp.u32 %0, 1, 2, q;}" : "=r"(r) : "r"(a), "r"(b)); o[2] = r; \
    asm("{.reg .pred p, q; setp.ne.u32 q, %3, 0; setp.gt.and.s32 p, %1, %2, q; selp.u32 %0, 7, 9, p;}" \
        : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[3] = r; \
    asm("{.reg .pred p, q; setp.ne.u32 q, %3, 0; setp.ge.xor.s32 p, %1, %2, !q; selp.u32 %0, 7, 9, p;}" \
        : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[4] = r; \
    asm("slct.u32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[5] = r; \
    asm("add.sat.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[6] = r; \
    asm("sub.sat.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[7] = r; \
    asm("mad.hi.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[8] = r; \
    asm("mul24.lo.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[9] = r; \
    asm("mul24.hi.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[10] = r; \
    asm("bfind.u32 %0, %1;" : "=r"(r) : "r"(a)); o[11] = r; \
    asm("bfind.s32 %0, %1;" : "=r"(r) : "r"(a)); o[12] = r; \
    asm("shf.l.clamp.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c & 63)); o[13] = r; \
    asm("shf.r.clamp.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c & 63)); o[14] = r; \
    asm("prmt.b32.f4e %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[15] = r; \
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[16] = r; \
    asm("cnot.b32 %0, %1;" : "=r"(r) : "r"(a & c)); o[17] = r; \
    asm("{.reg .s8 t; cvt.sat.s8.s32 t, %1; cvt.s32.s8 %0, t;}" : "=r"(r) : "r"(a)); o[18] = r; \
    asm("{.reg .u16 t; cvt.u16.u32 t, %1; cvt.s32.s16 %0, t;}" : "=r"(r) : "r"(a)); o[19] = r; \
    asm("{.reg .b64 t; mov.b64 t, {%1, %2}; shr.b64 t, t, 20; mov.b64 {%0, _}, t;}" : "=r"(r) : "r"(a), "r"(b)); \
    o[20] = r; \
    asm("{.reg .b16 l, h; mov.b32 {l, h}, %1; mov.b32 %0, {h, l};}" : "=r"(r) : "r"(a)); o[21] = r; \
    asm("red.global.add.u32 [%0], %1;" :: "l"(out + 24 * i + 22), "r"(a)); \
    o[23] = __uint_as_float(a) != __uint_as_float(a);

extern "C" __global__ void asmInt(const unsigned *x, const unsigned *y, const unsigned *z, unsigned *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a = x[i], b = y[i], c = z[i];
    ASM_INT_BODY
}
// The same with every input uniform over the launch (kernel parameters): exercises the scalar paths.
extern "C" __global__ void asmIntU(unsigned a, unsigned b, unsigned c, unsigned *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    ASM_INT_BODY
}
extern "C" __global__ void asmFloat(const float *x, const float *y, const double *d, float *out, double *dout) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = x[i], b = y[i];
    double e = d[i];
    float *o = out + 12 * i;
    float r;
    asm("add.rz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); o[0] = r;
    asm("add.rm.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); o[1] = r;
    asm("mul.rp.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); o[2] = r;
    asm("cvt.rz.f32.f64 %0, %1;" : "=f"(r) : "d"(e)); o[3] = r;
    asm("cvt.rp.f32.f64 %0, %1;" : "=f"(r) : "d"(e)); o[4] = r;
    asm("cvt.rni.f32.f32 %0, %1;" : "=f"(r) : "f"(a)); o[5] = r;
    asm("add.sat.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); o[6] = r;
    asm("mul.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); o[7] = r;
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); o[8] = r;
    asm("fma.rz.f32 %0, %1, %2, %1;" : "=f"(r) : "f"(a), "f"(b)); o[9] = r;
    asm("{.reg .b16 h; cvt.rn.f16.f64 h, %1; cvt.f32.f16 %0, h;}" : "=f"(r) : "d"(e)); o[10] = r;
    asm("{.reg .pred p; testp.subnormal.f32 p, %1; selp.f32 %0, 1.0, 0.0, p;}" : "=f"(r) : "f"(a)); o[11] = r;
    double q;
    asm("add.rz.f64 %0, %1, %2;" : "=d"(q) : "d"(e), "d"((double)a)); dout[3 * i] = q;
    asm("fma.rm.f64 %0, %1, %2, %3;" : "=d"(q) : "d"(e), "d"((double)b), "d"((double)a)); dout[3 * i + 1] = q;
    asm("mul.rp.f64 %0, %1, %2;" : "=d"(q) : "d"(e), "d"(e)); dout[3 * i + 2] = q;
}
extern "C" __global__ void asmDiv(const int *x, const int *y, int *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int a = x[i], b = y[i], r;
    asm("rem.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); out[4 * i] = r;
    asm("rem.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); out[4 * i + 1] = r;
    asm("div.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); out[4 * i + 2] = r;
    asm("div.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); out[4 * i + 3] = r;
}
extern "C" __global__ void asmCvt(const long long *x, const float *f, unsigned long long *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    long long a = x[i];
    float b = f[i];
    unsigned long long *o = out + 10 * i;
    float r;
    double d;
    unsigned u;
    asm("cvt.rp.f32.s64 %0, %1;" : "=f"(r) : "l"(a)); o[0] = __float_as_uint(r);
    asm("cvt.rm.f32.u64 %0, %1;" : "=f"(r) : "l"(a)); o[1] = __float_as_uint(r);
    asm("cvt.rz.f64.s64 %0, %1;" : "=d"(d) : "l"(a)); o[2] = __double_as_longlong(d);
    asm("cvt.rn.f32.s64 %0, %1;" : "=f"(r) : "l"(a)); o[3] = __float_as_uint(r);
    asm("{.reg .b16 h; cvt.rz.f16.f32 h, %1; cvt.u32.u16 %0, h;}" : "=r"(u) : "f"(b)); o[4] = u;
    asm("{.reg .s16 h; cvt.rni.s16.f32 h, %1; cvt.s32.s16 %0, h;}" : "=r"(u) : "f"(b)); o[5] = u;
    asm("{.reg .u8 h; cvt.rzi.u8.f32 h, %1; cvt.u32.u8 %0, h;}" : "=r"(u) : "f"(b)); o[6] = u;
    asm("{.reg .u8 h; cvt.sat.u8.s64 h, %1; cvt.u32.u8 %0, h;}" : "=r"(u) : "l"(a)); o[7] = u;
    asm("cvt.rpi.u64.f32 %0, %1;" : "=l"(o[8]) : "f"(b));
    asm("{.reg .b16 h; cvt.rm.f16.s32 h, %1; cvt.u32.u16 %0, h;}" : "=r"(u) : "r"((int)a)); o[9] = u;
}
extern "C" __global__ void atomicSubnormal(float *g, float *out, float v) {
    __shared__ float s;
    if (threadIdx.x == 0) s = 0.0f;
    __syncthreads();
    atomicAdd(g, v);   // global: subnormal inputs and results flush to zero
    atomicAdd(&s, v);  // shared: subnormals kept
    __syncthreads();
    if (threadIdx.x == 0) out[0] = s;
}
extern "C" __global__ void asmMisc(const unsigned *x, const unsigned *y, const float *f, unsigned *out) {
    __shared__ int sh[4];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a = x[i], b = y[i], r;
    float c = f[i];
    unsigned *o = out + 10 * i;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(7)); o[0] = r;
    asm("dp2a.lo.s32.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(0)); o[1] = r;
    asm("dp2a.hi.u32.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(1)); o[2] = r;
    asm("set.lt.u32.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[3] = r;
    asm("{.reg .f32 t; set.ge.f32.f32 t, %1, 0f00000000; mov.b32 %0, t;}" : "=r"(r) : "f"(c)); o[4] = r;
    asm("slct.u32.f32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "f"(c)); o[5] = r;
    asm("fns.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b & 31), "r"(3)); o[6] = r;
    asm("{.reg .pred p; isspacep.shared p, %1; selp.u32 %0, 1, 0, p;}" : "=r"(r) : "l"((void *)&sh[1])); o[7] = r;
    asm("{.reg .pred p; isspacep.global p, %1; selp.u32 %0, 1, 0, p;}" : "=r"(r) : "l"((void *)x)); o[8] = r;
    asm("mad24.lo.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(5)); o[9] = r;
}
extern "C" __global__ void asmMask(const unsigned *x, const unsigned *y, unsigned *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a = x[i], b = y[i], r;
    asm("bmsk.clamp.b32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); out[4 * i] = r;
    asm("bmsk.wrap.b32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); out[4 * i + 1] = r;
    asm("szext.clamp.s32 %0, %1, %2;" : "=r"(r) : "r"(a * 2654435761u), "r"(b)); out[4 * i + 2] = r;
    asm("szext.wrap.u32 %0, %1, %2;" : "=r"(r) : "r"(a * 2654435761u), "r"(b)); out[4 * i + 3] = r;
}
