// CUDA arrays, texture and surface objects, profiler calls: every result checked against a host reference.
// Prints "name=ok" per check (or what differed) and exits 1 on an API failure.
#include <cmath>
#include <cstring>
#include <cuda_profiler_api.h>
#include <vector>

#include "common.h"

static int bad = 0;
static void report(const char *name, int errors) {
    std::printf("%s=%s\n", name, errors ? "MISMATCH" : "ok");
    if (errors) { std::printf("%s_errors=%d\n", name, errors); bad = 1; }
}

// Host references (CUDA C++ Programming Guide, appendix "Texture Fetching")
static float w9(float f) { return std::floor(f * 256.0f + 0.5f) / 256.0f; }
static int address(int i, int n, cudaTextureAddressMode m, bool norm, bool *ok) {
    *ok = true;
    if (m == cudaAddressModeBorder) { *ok = i >= 0 && i < n; return *ok ? i : 0; }
    if (norm && m == cudaAddressModeWrap) return ((i % n) + n) % n;
    if (norm && m == cudaAddressModeMirror) { int k = ((i % (2 * n)) + 2 * n) % (2 * n); return k < n ? k : 2 * n - 1 - k; }
    return i < 0 ? 0 : (i >= n ? n - 1 : i);
}
static float ref2d(const std::vector<float> &img, int w, int h, float x, float y, cudaTextureAddressMode m,
                   bool linear, bool norm, float border) {
    if (norm) { x *= w; y *= h; }
    auto tap = [&](int i, int j) {
        bool oi, oj;
        int ii = address(i, w, m, norm, &oi), jj = address(j, h, m, norm, &oj);
        return oi && oj ? img[jj * w + ii] : border;
    };
    if (!linear) return tap((int)std::floor(x), (int)std::floor(y));
    float xb = x - 0.5f, yb = y - 0.5f;
    int i = (int)std::floor(xb), j = (int)std::floor(yb);
    float a = w9(xb - i), b = w9(yb - j);
    return (1 - a) * (1 - b) * tap(i, j) + a * (1 - b) * tap(i + 1, j) + (1 - a) * b * tap(i, j + 1) +
           a * b * tap(i + 1, j + 1);
}

__global__ void sample2d(cudaTextureObject_t t, const float2 *xy, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<float>(t, xy[i].x, xy[i].y);
}
__global__ void sample2d4(cudaTextureObject_t t, const float2 *xy, float4 *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<float4>(t, xy[i].x, xy[i].y);
}
__global__ void fetch1d(cudaTextureObject_t t, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1Dfetch<int>(t, i);
}
__global__ void sample3d(cudaTextureObject_t t, float *out, int w, int h, int d) {
    int x = threadIdx.x, y = blockIdx.x, z = blockIdx.y;
    out[(z * h + y) * w + x] = tex3D<float>(t, x + 0.5f, y + 0.5f, z + 0.5f);
}
__global__ void sample_layered(cudaTextureObject_t t, float *out, int w, int h) {
    int x = threadIdx.x, y = blockIdx.x, l = blockIdx.y;
    out[(l * h + y) * w + x] = tex2DLayered<float>(t, x + 0.5f, y + 0.5f, l);
}
__global__ void sample_cube(cudaTextureObject_t t, float *out) {
    const float d[6][3] = {{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {0, 0, -1}};
    int f = threadIdx.x;
    out[f] = texCubemap<float>(t, d[f][0], d[f][1], d[f][2]);
}
__global__ void surface_scale(cudaSurfaceObject_t s, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w && y < h) surf2Dwrite(surf2Dread<float>(s, x * 4, y) * 2.0f + y, s, x * 4, y);
}

static cudaTextureDesc tex_desc(cudaTextureAddressMode m, cudaTextureFilterMode f, bool norm,
                                cudaTextureReadMode read = cudaReadModeElementType) {
    cudaTextureDesc t;
    std::memset(&t, 0, sizeof t);
    t.addressMode[0] = t.addressMode[1] = t.addressMode[2] = m;
    t.filterMode = f;
    t.readMode = read;
    t.normalizedCoords = norm;
    t.borderColor[0] = 7.5f;
    return t;
}

static cudaResourceDesc array_res(cudaArray_t a) {
    cudaResourceDesc r;
    std::memset(&r, 0, sizeof r);
    r.resType = cudaResourceTypeArray;
    r.res.array.array = a;
    return r;
}

static void test_profiler() {
    CHECK(cudaProfilerStart());
    CHECK(cudaProfilerStop());
    report("profiler", 0);
}

static void test_array2d() {
    const int w = 13, h = 7, n = 400;
    std::vector<float> img(w * h);
    for (int i = 0; i < w * h; i++) img[i] = std::sin(i * 0.7f) * 10;
    cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
    cudaArray_t arr;
    CHECK(cudaMallocArray(&arr, &cd, w, h));
    CHECK(cudaMemcpy2DToArray(arr, 0, 0, img.data(), w * sizeof(float), w * sizeof(float), h,
                              cudaMemcpyHostToDevice));
    cudaChannelFormatDesc got;
    cudaExtent ext;
    unsigned flags;
    CHECK(cudaArrayGetInfo(&got, &ext, &flags, arr));
    report("array_info", !(got.x == 32 && got.y == 0 && got.f == cudaChannelFormatKindFloat && ext.width == w &&
                           ext.height == h && ext.depth == 0 && flags == 0));
    std::vector<float> back(w * h);
    CHECK(cudaMemcpy2DFromArray(back.data(), w * sizeof(float), arr, 0, 0, w * sizeof(float), h,
                                cudaMemcpyDeviceToHost));
    report("array_roundtrip", std::memcmp(back.data(), img.data(), back.size() * 4) != 0);
    // array to array: rows 2.. of arr into rows 0.. of a second array, then the first 3 elements of its row 0
    // over the start of its row 1 (the deprecated 1D form)
    cudaArray_t arr2;
    CHECK(cudaMallocArray(&arr2, &cd, w, h));
    CHECK(cudaMemcpy2DArrayToArray(arr2, 0, 0, arr, 0, 2, w * sizeof(float), h - 2, cudaMemcpyDeviceToDevice));
    CHECK(cudaMemcpyArrayToArray(arr2, 0, 1, arr2, 0, 0, 3 * sizeof(float), cudaMemcpyDeviceToDevice));
    CHECK(cudaMemcpy2DFromArray(back.data(), w * sizeof(float), arr2, 0, 0, w * sizeof(float), h - 2,
                                cudaMemcpyDeviceToHost));
    int a2a = 0;
    for (int y = 0; y < h - 2; y++)
        for (int x = 0; x < w; x++) a2a += back[y * w + x] != (y == 1 && x < 3 ? img[2 * w + x] : img[(y + 2) * w + x]);
    report("array_to_array", a2a);
    // the asynchronous forms, on a stream: to the array and back
    cudaStream_t st;
    CHECK(cudaStreamCreate(&st));
    std::vector<float> rev(img.rbegin(), img.rend()), back2(w * h);
    CHECK(cudaMemcpy2DToArrayAsync(arr2, 0, 0, rev.data(), w * sizeof(float), w * sizeof(float), h,
                                   cudaMemcpyHostToDevice, st));
    CHECK(cudaMemcpy2DFromArrayAsync(back2.data(), w * sizeof(float), arr2, 0, 0, w * sizeof(float), h,
                                     cudaMemcpyDeviceToHost, st));
    CHECK(cudaStreamSynchronize(st));
    CHECK(cudaStreamDestroy(st));
    report("array_async", std::memcmp(back2.data(), rev.data(), rev.size() * 4) != 0);
    EXPECT_ERR(cudaMemcpy2DArrayToArray(arr2, 0, 0, arr, 0, 1, w * sizeof(float), h, cudaMemcpyDeviceToDevice),
               cudaErrorInvalidValue);
    CHECK(cudaFreeArray(arr2));

    std::vector<float2> xy(n);
    for (int i = 0; i < n; i++) xy[i] = make_float2(-0.6f + 2.2f * ((i * 37) % 101) / 101.0f,
                                                    -0.6f + 2.2f * ((i * 53) % 97) / 97.0f);
    float2 *dxy;
    float *dout;
    CHECK(cudaMalloc(&dxy, n * sizeof(float2)));
    CHECK(cudaMalloc(&dout, n * sizeof(float)));
    CHECK(cudaMemcpy(dxy, xy.data(), n * sizeof(float2), cudaMemcpyHostToDevice));
    cudaResourceDesc res = array_res(arr);
    const char *mode_names[] = {"wrap", "clamp", "mirror", "border"};
    for (int m = 0; m < 4; m++) {
        for (int lin = 0; lin < 2; lin++) {
            for (int norm = 0; norm < 2; norm++) {
                cudaTextureDesc td = tex_desc((cudaTextureAddressMode)m, lin ? cudaFilterModeLinear : cudaFilterModePoint,
                                              norm);
                cudaTextureObject_t t;
                CHECK(cudaCreateTextureObject(&t, &res, &td, nullptr));
                std::vector<float2> c(xy);
                if (!norm) for (auto &p : c) { p.x *= w; p.y *= h; }
                CHECK(cudaMemcpy(dxy, c.data(), n * sizeof(float2), cudaMemcpyHostToDevice));
                sample2d<<<(n + 127) / 128, 128>>>(t, dxy, dout, n);
                std::vector<float> out(n);
                CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
                int errors = 0;
                for (int i = 0; i < n; i++) {
                    float want = ref2d(img, w, h, c[i].x, c[i].y, (cudaTextureAddressMode)m, lin, norm, 7.5f);
                    if (std::fabs(out[i] - want) > 1e-4f) errors++;
                }
                char name[64];
                std::snprintf(name, sizeof name, "tex2d_%s_%s%s", mode_names[m], lin ? "linear" : "point",
                              norm ? "_norm" : "");
                report(name, errors);
                CHECK(cudaDestroyTextureObject(t));
            }
        }
    }
    // the descriptions given are read back
    cudaTextureDesc td = tex_desc(cudaAddressModeMirror, cudaFilterModeLinear, true), td2;
    cudaTextureObject_t t;
    CHECK(cudaCreateTextureObject(&t, &res, &td, nullptr));
    cudaResourceDesc r2;
    CHECK(cudaGetTextureObjectResourceDesc(&r2, t));
    CHECK(cudaGetTextureObjectTextureDesc(&td2, t));
    report("tex_get_desc", !(r2.resType == cudaResourceTypeArray && r2.res.array.array == arr &&
                             td2.addressMode[1] == cudaAddressModeMirror && td2.filterMode == cudaFilterModeLinear &&
                             td2.normalizedCoords == 1 && td2.borderColor[0] == 7.5f));
    CHECK(cudaDestroyTextureObject(t));
    CHECK(cudaFreeArray(arr));
    CHECK(cudaFree(dxy));
    CHECK(cudaFree(dout));
}

static void test_uchar4_normalized() {
    const int w = 5, h = 3;
    std::vector<uchar4> img(w * h);
    for (int i = 0; i < w * h; i++) img[i] = make_uchar4(i * 17, 255 - i, i * 3, 128);
    cudaChannelFormatDesc cd = cudaCreateChannelDesc<uchar4>();
    cudaArray_t arr;
    CHECK(cudaMallocArray(&arr, &cd, w, h));
    CHECK(cudaMemcpy2DToArray(arr, 0, 0, img.data(), w * 4, w * 4, h, cudaMemcpyHostToDevice));
    cudaResourceDesc res = array_res(arr);
    cudaTextureDesc td = tex_desc(cudaAddressModeClamp, cudaFilterModePoint, false, cudaReadModeNormalizedFloat);
    cudaTextureObject_t t;
    CHECK(cudaCreateTextureObject(&t, &res, &td, nullptr));
    std::vector<float2> xy(w * h);
    for (int i = 0; i < w * h; i++) xy[i] = make_float2(i % w + 0.5f, i / w + 0.5f);
    float2 *dxy;
    float4 *dout;
    CHECK(cudaMalloc(&dxy, w * h * sizeof(float2)));
    CHECK(cudaMalloc(&dout, w * h * sizeof(float4)));
    CHECK(cudaMemcpy(dxy, xy.data(), w * h * sizeof(float2), cudaMemcpyHostToDevice));
    sample2d4<<<1, w * h>>>(t, dxy, dout, w * h);
    std::vector<float4> out(w * h);
    CHECK(cudaMemcpy(out.data(), dout, w * h * sizeof(float4), cudaMemcpyDeviceToHost));
    int errors = 0;
    for (int i = 0; i < w * h; i++)
        errors += out[i].x != img[i].x / 255.0f || out[i].y != img[i].y / 255.0f || out[i].z != img[i].z / 255.0f ||
                  out[i].w != img[i].w / 255.0f;
    report("uchar4_normalized_float", errors);
    CHECK(cudaDestroyTextureObject(t));
    CHECK(cudaFreeArray(arr));
    CHECK(cudaFree(dxy));
    CHECK(cudaFree(dout));
}

static void test_linear_and_pitch2d() {
    const int n = 100;
    int *lin, *dout;
    CHECK(cudaMalloc(&lin, n * sizeof(int)));
    CHECK(cudaMalloc(&dout, n * sizeof(int)));
    std::vector<int> v(n);
    for (int i = 0; i < n; i++) v[i] = i * i - 50;
    CHECK(cudaMemcpy(lin, v.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    cudaResourceDesc r;
    std::memset(&r, 0, sizeof r);
    r.resType = cudaResourceTypeLinear;
    r.res.linear.devPtr = lin;
    r.res.linear.desc = cudaCreateChannelDesc<int>();
    r.res.linear.sizeInBytes = n * sizeof(int);
    cudaTextureDesc td = tex_desc(cudaAddressModeClamp, cudaFilterModePoint, false);
    cudaTextureObject_t t;
    CHECK(cudaCreateTextureObject(&t, &r, &td, nullptr));
    fetch1d<<<1, n>>>(t, dout, n);
    std::vector<int> out(n);
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    report("tex1Dfetch_linear", std::memcmp(out.data(), v.data(), n * sizeof(int)) != 0);
    CHECK(cudaDestroyTextureObject(t));

    // a pitched 2D texture over cudaMallocPitch memory, linear filtering
    const int w = 9, h = 6;
    float *p;
    size_t pitch;
    CHECK(cudaMallocPitch(&p, &pitch, w * sizeof(float), h));
    std::vector<float> img(w * h);
    for (int i = 0; i < w * h; i++) img[i] = (float)((i * 7) % 11) - 3.0f;
    CHECK(cudaMemcpy2D(p, pitch, img.data(), w * 4, w * 4, h, cudaMemcpyHostToDevice));
    std::memset(&r, 0, sizeof r);
    r.resType = cudaResourceTypePitch2D;
    r.res.pitch2D.devPtr = p;
    r.res.pitch2D.desc = cudaCreateChannelDesc<float>();
    r.res.pitch2D.width = w;
    r.res.pitch2D.height = h;
    r.res.pitch2D.pitchInBytes = pitch;
    td = tex_desc(cudaAddressModeClamp, cudaFilterModeLinear, false);
    CHECK(cudaCreateTextureObject(&t, &r, &td, nullptr));
    const int m = 64;
    std::vector<float2> xy(m);
    for (int i = 0; i < m; i++) xy[i] = make_float2((i * 0.173f) * w / 11.0f, (i * 0.311f) * h / 20.0f);
    float2 *dxy;
    float *dres;
    CHECK(cudaMalloc(&dxy, m * sizeof(float2)));
    CHECK(cudaMalloc(&dres, m * sizeof(float)));
    CHECK(cudaMemcpy(dxy, xy.data(), m * sizeof(float2), cudaMemcpyHostToDevice));
    sample2d<<<1, m>>>(t, dxy, dres, m);
    std::vector<float> res(m);
    CHECK(cudaMemcpy(res.data(), dres, m * sizeof(float), cudaMemcpyDeviceToHost));
    int errors = 0;
    for (int i = 0; i < m; i++)
        errors += std::fabs(res[i] - ref2d(img, w, h, xy[i].x, xy[i].y, cudaAddressModeClamp, true, false, 0)) > 1e-4f;
    report("pitch2d_linear", errors);
    CHECK(cudaDestroyTextureObject(t));
    CHECK(cudaFree(p));
    CHECK(cudaFree(lin));
    CHECK(cudaFree(dout));
    CHECK(cudaFree(dxy));
    CHECK(cudaFree(dres));
}

static void test_3d_layered_cube() {
    const int w = 6, h = 4, d = 3;
    std::vector<float> vol(w * h * d), out(w * h * d), back(w * h * d);
    for (int i = 0; i < w * h * d; i++) vol[i] = i * 0.5f;
    cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
    cudaArray_t arr;
    CHECK(cudaMalloc3DArray(&arr, &cd, make_cudaExtent(w, h, d)));
    cudaMemcpy3DParms p = {};
    p.srcPtr = make_cudaPitchedPtr(vol.data(), w * sizeof(float), w, h);
    p.dstArray = arr;
    p.extent = make_cudaExtent(w, h, d);
    p.kind = cudaMemcpyHostToDevice;
    CHECK(cudaMemcpy3D(&p));
    cudaMemcpy3DParms q = {};
    q.srcArray = arr;
    q.dstPtr = make_cudaPitchedPtr(back.data(), w * sizeof(float), w, h);
    q.extent = make_cudaExtent(w, h, d);
    q.kind = cudaMemcpyDeviceToHost;
    CHECK(cudaMemcpy3D(&q));
    report("memcpy3d_array_roundtrip", std::memcmp(back.data(), vol.data(), vol.size() * 4) != 0);
    cudaResourceDesc res = array_res(arr);
    cudaTextureDesc td = tex_desc(cudaAddressModeClamp, cudaFilterModePoint, false);
    cudaTextureObject_t t;
    CHECK(cudaCreateTextureObject(&t, &res, &td, nullptr));
    float *dout;
    CHECK(cudaMalloc(&dout, vol.size() * sizeof(float)));
    sample3d<<<dim3(h, d), w>>>(t, dout, w, h, d);
    CHECK(cudaMemcpy(out.data(), dout, vol.size() * 4, cudaMemcpyDeviceToHost));
    report("tex3d", std::memcmp(out.data(), vol.data(), vol.size() * 4) != 0);
    CHECK(cudaDestroyTextureObject(t));
    CHECK(cudaFreeArray(arr));

    // a layered 2D array: d layers of w x h
    CHECK(cudaMalloc3DArray(&arr, &cd, make_cudaExtent(w, h, d), cudaArrayLayered));
    p.dstArray = arr;
    CHECK(cudaMemcpy3D(&p));
    res = array_res(arr);
    CHECK(cudaCreateTextureObject(&t, &res, &td, nullptr));
    sample_layered<<<dim3(h, d), w>>>(t, dout, w, h);
    CHECK(cudaMemcpy(out.data(), dout, vol.size() * 4, cudaMemcpyDeviceToHost));
    report("tex2d_layered", std::memcmp(out.data(), vol.data(), vol.size() * 4) != 0);
    unsigned flags;
    cudaExtent ext;
    CHECK(cudaArrayGetInfo(nullptr, &ext, &flags, arr));
    report("layered_info", !(flags == cudaArrayLayered && ext.depth == (size_t)d));
    CHECK(cudaDestroyTextureObject(t));
    CHECK(cudaFreeArray(arr));

    // a cubemap: face f filled with f; each axis direction reads its face (Programming Guide, "Cubemap Textures")
    const int c = 4;
    std::vector<float> faces(c * c * 6);
    for (int i = 0; i < c * c * 6; i++) faces[i] = (float)(i / (c * c));
    CHECK(cudaMalloc3DArray(&arr, &cd, make_cudaExtent(c, c, 6), cudaArrayCubemap));
    p.srcPtr = make_cudaPitchedPtr(faces.data(), c * sizeof(float), c, c);
    p.dstArray = arr;
    p.extent = make_cudaExtent(c, c, 6);
    CHECK(cudaMemcpy3D(&p));
    res = array_res(arr);
    td = tex_desc(cudaAddressModeClamp, cudaFilterModePoint, true);
    CHECK(cudaCreateTextureObject(&t, &res, &td, nullptr));
    sample_cube<<<1, 6>>>(t, dout);
    float cube[6];
    CHECK(cudaMemcpy(cube, dout, sizeof cube, cudaMemcpyDeviceToHost));
    int errors = 0;
    for (int f = 0; f < 6; f++) errors += cube[f] != (float)f;
    report("cubemap_faces", errors);
    CHECK(cudaDestroyTextureObject(t));
    CHECK(cudaFreeArray(arr));
    CHECK(cudaFree(dout));
}

static void test_surface() {
    const int w = 40, h = 5;
    std::vector<float> img(w * h), out(w * h);
    for (int i = 0; i < w * h; i++) img[i] = i * 0.25f;
    cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
    cudaArray_t arr;
    CHECK(cudaMallocArray(&arr, &cd, w, h, cudaArraySurfaceLoadStore));
    CHECK(cudaMemcpyToArray(arr, 0, 0, img.data(), img.size() * 4, cudaMemcpyHostToDevice));  // deprecated 1D form
    cudaResourceDesc res = array_res(arr);
    cudaSurfaceObject_t s;
    CHECK(cudaCreateSurfaceObject(&s, &res));
    surface_scale<<<dim3(2, h), 32>>>(s, w, h);
    CHECK(cudaMemcpy2DFromArray(out.data(), w * 4, arr, 0, 0, w * 4, h, cudaMemcpyDeviceToHost));
    int errors = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) errors += out[y * w + x] != img[y * w + x] * 2.0f + y;
    report("surface_read_write", errors);
    cudaResourceDesc r2;
    CHECK(cudaGetSurfaceObjectResourceDesc(&r2, s));
    report("surface_get_desc", !(r2.resType == cudaResourceTypeArray && r2.res.array.array == arr));
    CHECK(cudaDestroySurfaceObject(s));
    CHECK(cudaFreeArray(arr));
}

static void test_errors() {
    cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>(), three = cudaCreateChannelDesc(32, 32, 32, 0,
                                                                                             cudaChannelFormatKindFloat);
    cudaArray_t arr, plain;
    EXPECT_ERR(cudaMallocArray(&arr, &three, 4, 4), cudaErrorInvalidChannelDescriptor);
    EXPECT_ERR(cudaMalloc3DArray(&arr, &cd, make_cudaExtent(4, 5, 6), cudaArrayCubemap), cudaErrorInvalidValue);
    CHECK(cudaMallocArray(&plain, &cd, 8, 8));
    float host[64] = {};
    EXPECT_ERR(cudaMemcpy2DToArray(plain, 4, 0, host, 32, 32, 8, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    cudaResourceDesc res = array_res(plain);
    cudaSurfaceObject_t s;
    EXPECT_ERR(cudaCreateSurfaceObject(&s, &res), cudaErrorInvalidValue);  // no cudaArraySurfaceLoadStore
    cudaTextureDesc td = tex_desc(cudaAddressModeClamp, cudaFilterModePoint, false);
    td.addressMode[0] = (cudaTextureAddressMode)9;
    cudaTextureObject_t t;
    EXPECT_ERR(cudaCreateTextureObject(&t, &res, &td, nullptr), cudaErrorInvalidValue);
    td = tex_desc(cudaAddressModeClamp, cudaFilterModePoint, false);
    cudaResourceViewDesc view = {};
    EXPECT_ERR(cudaCreateTextureObject(&t, &res, &td, &view), cudaErrorNotSupported);
    res = array_res((cudaArray_t)0x1234);
    EXPECT_ERR(cudaCreateTextureObject(&t, &res, &td, nullptr), cudaErrorInvalidResourceHandle);
    // a linear resource past the end of its allocation
    float *d;
    CHECK(cudaMalloc(&d, 64));
    std::memset(&res, 0, sizeof res);
    res.resType = cudaResourceTypeLinear;
    res.res.linear.devPtr = d;
    res.res.linear.desc = cd;
    res.res.linear.sizeInBytes = 4096;
    EXPECT_ERR(cudaCreateTextureObject(&t, &res, &td, nullptr), cudaErrorInvalidValue);
    EXPECT_ERR(cudaDestroyTextureObject((cudaTextureObject_t)d), cudaErrorInvalidValue);
    EXPECT_ERR(cudaFreeArray((cudaArray_t)d), cudaErrorInvalidValue);
    CHECK(cudaFree(d));
    EXPECT_ERR(cudaFree(plain), cudaErrorInvalidValue);  // an array is freed with cudaFreeArray
    CHECK(cudaFreeArray(plain));
    EXPECT_ERR(cudaFreeArray(plain), cudaErrorInvalidValue);  // once
    // the failures above are not sticky: the last one is reported once, then the context works on
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidValue);
    CHECK(cudaGetLastError());
    report("errors", 0);
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : "";
    struct { const char *name; void (*fn)(); } tests[] = {
        {"profiler", test_profiler}, {"array2d", test_array2d}, {"uchar4", test_uchar4_normalized},
        {"linear", test_linear_and_pitch2d}, {"3d", test_3d_layered_cube}, {"surface", test_surface},
        {"errors", test_errors}};
    for (auto &t : tests)
        if (!*only || !std::strcmp(only, t.name)) t.fn();
    CHECK(cudaDeviceSynchronize());
    return bad;
}
