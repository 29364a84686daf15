// Texture and surface objects at the PTX level: the tests build descriptors (gpushim/ptx/texdesc.py) in device
// memory and compare with host references.
extern "C" __global__ void f2d(cudaTextureObject_t t, const float *xs, const float *ys, float4 *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<float4>(t, xs[i], ys[i]);
}
extern "C" __global__ void f1d(cudaTextureObject_t t, const float *xs, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1D<float>(t, xs[i]);
}
extern "C" __global__ void f3d(cudaTextureObject_t t, const float *xs, const float *ys, const float *zs, float *out,
                               int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex3D<float>(t, xs[i], ys[i], zs[i]);
}
extern "C" __global__ void fa2d(cudaTextureObject_t t, const float *xs, const float *ys, const int *ls, float *out,
                                int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2DLayered<float>(t, xs[i], ys[i], ls[i]);
}
extern "C" __global__ void fa1d(cudaTextureObject_t t, const float *xs, const int *ls, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1DLayered<float>(t, xs[i], ls[i]);
}
extern "C" __global__ void fcube(cudaTextureObject_t t, const float *xs, const float *ys, const float *zs,
                                 float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = texCubemap<float>(t, xs[i], ys[i], zs[i]);
}
extern "C" __global__ void fetch(cudaTextureObject_t t, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1Dfetch<int>(t, i - 2);
}
extern "C" __global__ void elem2d(cudaTextureObject_t t, const float *xs, const float *ys, uchar4 *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<uchar4>(t, xs[i], ys[i]);
}
extern "C" __global__ void gather(cudaTextureObject_t t, const float *xs, const float *ys, float4 *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2Dgather<float4>(t, xs[i], ys[i], 0);
}
extern "C" __global__ void query(cudaTextureObject_t t, int *out) {
    int w, h, d;
    asm("txq.width.b32 %0, [%1];" : "=r"(w) : "l"(t));
    asm("txq.height.b32 %0, [%1];" : "=r"(h) : "l"(t));
    asm("txq.depth.b32 %0, [%1];" : "=r"(d) : "l"(t));
    out[0] = w; out[1] = h; out[2] = d;
}
// every element of a w x h float surface: out = in + 1, read from row y, written to row y of the second surface
extern "C" __global__ void surf(cudaSurfaceObject_t s, cudaSurfaceObject_t o, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w && y < h) surf2Dwrite<float>(surf2Dread<float>(s, x * 4, y) + 1.0f, o, x * 4, y);
}
extern "C" __global__ void surf_modes(cudaSurfaceObject_t s, int *out, int w) {
    int x = threadIdx.x;  // reads past the row's end
    out[2 * x] = surf1Dread<int>(s, x * 4, cudaBoundaryModeZero);
    out[2 * x + 1] = surf1Dread<int>(s, x * 4, cudaBoundaryModeClamp);
}
extern "C" __global__ void surf_trap(cudaSurfaceObject_t s, int *out, int w) {
    out[threadIdx.x] = surf1Dread<int>(s, threadIdx.x * 4);
}
extern "C" __global__ void surf_layered(cudaSurfaceObject_t s, int w, int h, int layers) {
    int x = threadIdx.x, y = blockIdx.x, l = blockIdx.y;
    surf2DLayeredwrite<short2>(make_short2(x + 100 * y, l), s, x * 4, y, l);
}
extern "C" __global__ void surf_bytes(cudaSurfaceObject_t s, unsigned char *out, int w) {
    int x = threadIdx.x;
    surf1Dwrite<unsigned char>((unsigned char)(x * 3 + 1), s, x);
    __syncthreads();
    out[x] = surf1Dread<unsigned char>(s, (w - 1 - x));
}
