// Kernels of tests/programs/drv_texture.c: texture fetches and surface writes through objects made with the
// driver API.
extern "C" __global__ void fetch2d(cudaTextureObject_t t, float *out, int w, float dx, float dy, float sx,
                                   float sy) {
    int x = threadIdx.x, y = blockIdx.x;
    out[y * w + x] = tex2D<float>(t, (x + dx) * sx, (y + dy) * sy);
}

extern "C" __global__ void fetch1d(cudaTextureObject_t t, float *out) {
    int i = threadIdx.x;
    out[i] = tex1D<float>(t, i + 0.5f);
}

extern "C" __global__ void fetch_linear(cudaTextureObject_t t, int *out) {
    int i = threadIdx.x;
    out[i] = tex1Dfetch<int>(t, i);
}

extern "C" __global__ void fetch3d(cudaTextureObject_t t, float *out, int w, int h) {
    int x = threadIdx.x, y = threadIdx.y, z = blockIdx.x;
    out[(z * h + y) * w + x] = tex3D<float>(t, x + 0.5f, y + 0.5f, z + 0.5f);
}

extern "C" __global__ void surf_write(cudaSurfaceObject_t s) {
    int x = threadIdx.x, y = blockIdx.x;
    surf2Dwrite<unsigned>(x * 100 + y, s, x * 4, y);
}
