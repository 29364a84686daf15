/* CUDA arrays, texture objects and surface objects through the driver API: cuArrayCreate / cuArray3DCreate,
 * their descriptors, cuMemcpy2D / cuMemcpy3D to and from arrays, cuTexObjectCreate on arrays and on linear
 * memory (point and linear filtering, clamp and wrap, 8-bit integers read as normalized floats, Driver API
 * reference "cuTexObjectCreate": without CU_TRSF_READ_AS_INTEGER integer data returns floats in [0, 1]),
 * cuSurfObjectCreate with surface writes, the GetResourceDesc queries and bad input. Results are compared with
 * values computed here. usage: drv_texture KERNEL_DIR; prints key=value lines. */
#include "drv_common.h"

#define W 8
#define H 4

static CUtexObject tex_on_array(CUarray a, CUaddress_mode mode, CUfilter_mode filter, unsigned flags) {
    CUDA_RESOURCE_DESC res;
    memset(&res, 0, sizeof res);
    res.resType = CU_RESOURCE_TYPE_ARRAY;
    res.res.array.hArray = a;
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = mode;
    td.filterMode = filter;
    td.flags = flags;
    CUtexObject t;
    CU_CHECK(cuTexObjectCreate(&t, &res, &td, NULL));
    return t;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    CUdevice dev;
    use_primary_context(&dev);
    char path[4096];
    snprintf(path, sizeof path, "%s/tex.ptx", argv[1]);
    CUmodule mod;
    CU_CHECK(cuModuleLoad(&mod, path));
    CUfunction fetch2d, fetch1d, fetch_linear, fetch3d, surf_write;
    CU_CHECK(cuModuleGetFunction(&fetch2d, mod, "fetch2d"));
    CU_CHECK(cuModuleGetFunction(&fetch1d, mod, "fetch1d"));
    CU_CHECK(cuModuleGetFunction(&fetch_linear, mod, "fetch_linear"));
    CU_CHECK(cuModuleGetFunction(&fetch3d, mod, "fetch3d"));
    CU_CHECK(cuModuleGetFunction(&surf_write, mod, "surf_write"));

    /* ---- a 2D float array: descriptor, copy in and back out ---- */
    float img[H][W], back[H][W];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) img[y][x] = (float)(y * 10 + x);
    CUDA_ARRAY_DESCRIPTOR ad = {.Width = W, .Height = H, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    CUarray arr;
    CU_CHECK(cuArrayCreate(&arr, &ad));
    CUDA_ARRAY_DESCRIPTOR got;
    CU_CHECK(cuArrayGetDescriptor(&got, arr));
    printf("descriptor=%zu,%zu,%#x,%u\n", got.Width, got.Height, (unsigned)got.Format, got.NumChannels);
    CUDA_MEMCPY2D c = {0};
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = img;
    c.srcPitch = sizeof img[0];
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c.dstArray = arr;
    c.WidthInBytes = sizeof img[0];
    c.Height = H;
    CU_CHECK(cuMemcpy2D(&c));
    CUDA_MEMCPY2D b = {0};
    b.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    b.srcArray = arr;
    b.srcXInBytes = 2 * sizeof(float);  /* a box: columns 2..5 of rows 1..2 */
    b.srcY = 1;
    b.dstMemoryType = CU_MEMORYTYPE_HOST;
    b.dstHost = back;
    b.dstPitch = sizeof back[0];
    b.WidthInBytes = 4 * sizeof(float);
    b.Height = 2;
    memset(back, 0, sizeof back);
    CU_CHECK(cuMemcpy2D(&b));
    int box_errors = 0;
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 4; x++) box_errors += back[y][x] != img[y + 1][x + 2];
    printf("box_errors=%d\n", box_errors);
    b.WidthInBytes = W * sizeof(float);  /* past the end of the array's rows */
    printf("box_too_wide=%d\n", (int)cuMemcpy2D(&b));

    /* ---- texture fetches: point sampling at texel centres, then clamped outside, then linear filtering
     * halfway between columns (weights 1/2 are exact in 9-bit fixed point) ---- */
    CUdeviceptr out;
    CU_CHECK(cuMemAlloc(&out, sizeof img));
    int w = W;
    float got2[H][W];
    int point_errors = 0, clamp_errors = 0, linear_errors = 0, wrap_errors = 0;
    CUtexObject tp = tex_on_array(arr, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, 0);
    float dx = 0.5f, dy = 0.5f, sx = 1.0f, sy = 1.0f;
    void *args[] = {&tp, &out, &w, &dx, &dy, &sx, &sy};
    CU_CHECK(cuLaunchKernel(fetch2d, H, 1, 1, W, 1, 1, 0, NULL, args, NULL));
    CU_CHECK(cuMemcpyDtoH(got2, out, sizeof got2));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) point_errors += got2[y][x] != img[y][x];
    dx = -3.5f;  /* x - 3.5 samples texel x - 4; columns below 0 clamp to column 0 */
    CU_CHECK(cuLaunchKernel(fetch2d, H, 1, 1, W, 1, 1, 0, NULL, args, NULL));
    CU_CHECK(cuMemcpyDtoH(got2, out, sizeof got2));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) clamp_errors += got2[y][x] != img[y][x < 4 ? 0 : x - 4];
    CUtexObject tw = tex_on_array(arr, CU_TR_ADDRESS_MODE_WRAP, CU_TR_FILTER_MODE_POINT,
                                  CU_TRSF_NORMALIZED_COORDINATES);
    CUtexObject tl = tex_on_array(arr, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_LINEAR, 0);
    args[0] = &tl;
    dx = 1.0f;  /* halfway between x and x + 1 */
    dy = 0.5f;
    CU_CHECK(cuLaunchKernel(fetch2d, H, 1, 1, W, 1, 1, 0, NULL, args, NULL));
    CU_CHECK(cuMemcpyDtoH(got2, out, sizeof got2));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            float want = x + 1 < W ? (img[y][x] + img[y][x + 1]) / 2 : img[y][x];
            linear_errors += got2[y][x] != want;
        }
    /* normalized coordinates with wrap: u = (x + 0.5) / W + 1 and v = (y + 0.5) / H - 1 are texel (x, y)
     * one period away */
    args[0] = &tw;
    dx = 0.5f + W;
    dy = 0.5f - H;
    sx = 1.0f / W;
    sy = 1.0f / H;
    CU_CHECK(cuLaunchKernel(fetch2d, H, 1, 1, W, 1, 1, 0, NULL, args, NULL));
    CU_CHECK(cuMemcpyDtoH(got2, out, sizeof got2));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) wrap_errors += got2[y][x] != img[y][x];
    CUdeviceptr out1;
    CU_CHECK(cuMemAlloc(&out1, W * sizeof(float)));
    CUtexObject t1;
    void *a1[] = {&t1, &out1};
    float row[W];
    printf("point_errors=%d\nclamp_errors=%d\nlinear_errors=%d\nwrap_errors=%d\n", point_errors, clamp_errors,
           linear_errors, wrap_errors);
    CUDA_RESOURCE_DESC rq;
    CU_CHECK(cuTexObjectGetResourceDesc(&rq, tp));
    CUDA_TEXTURE_DESC tq;
    CU_CHECK(cuTexObjectGetTextureDesc(&tq, tw));
    printf("resource_query=%d\n", rq.resType == CU_RESOURCE_TYPE_ARRAY && rq.res.array.hArray == arr &&
                                  tq.flags == CU_TRSF_NORMALIZED_COORDINATES && tq.addressMode[0] == CU_TR_ADDRESS_MODE_WRAP);

    /* ---- 8-bit unsigned integers in a 1D array, read as normalized floats ---- */
    unsigned char bytes[W] = {0, 1, 51, 127, 128, 200, 254, 255};
    CUDA_ARRAY_DESCRIPTOR bd = {.Width = W, .Height = 0, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
    CUarray barr;
    CU_CHECK(cuArrayCreate(&barr, &bd));
    CUDA_MEMCPY2D bc = {0};
    bc.srcMemoryType = CU_MEMORYTYPE_HOST;
    bc.srcHost = bytes;
    bc.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    bc.dstArray = barr;
    bc.WidthInBytes = W;
    bc.Height = 1;
    CU_CHECK(cuMemcpy2D(&bc));
    CUtexObject tb = tex_on_array(barr, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, 0);
    t1 = tb;
    CU_CHECK(cuLaunchKernel(fetch1d, 1, 1, 1, W, 1, 1, 0, NULL, a1, NULL));
    CU_CHECK(cuMemcpyDtoH(row, out1, sizeof row));
    int norm_errors = 0;
    for (int x = 0; x < W; x++) norm_errors += row[x] != bytes[x] / 255.0f;
    printf("normalized_errors=%d\n", norm_errors);

    /* ---- linear memory: tex1Dfetch on a CU_RESOURCE_TYPE_LINEAR object of 32-bit ints ---- */
    int ints[W];
    for (int i = 0; i < W; i++) ints[i] = i * i - 7;
    CUdeviceptr lin, iout;
    CU_CHECK(cuMemAlloc(&lin, sizeof ints));
    CU_CHECK(cuMemAlloc(&iout, sizeof ints));
    CU_CHECK(cuMemcpyHtoD(lin, ints, sizeof ints));
    CUDA_RESOURCE_DESC lr;
    memset(&lr, 0, sizeof lr);
    lr.resType = CU_RESOURCE_TYPE_LINEAR;
    lr.res.linear.devPtr = lin;
    lr.res.linear.format = CU_AD_FORMAT_SIGNED_INT32;
    lr.res.linear.numChannels = 1;
    lr.res.linear.sizeInBytes = sizeof ints;
    CUDA_TEXTURE_DESC ltd;
    memset(&ltd, 0, sizeof ltd);
    ltd.flags = CU_TRSF_READ_AS_INTEGER;
    CUtexObject tlin;
    CU_CHECK(cuTexObjectCreate(&tlin, &lr, &ltd, NULL));
    void *a2[] = {&tlin, &iout};
    CU_CHECK(cuLaunchKernel(fetch_linear, 1, 1, 1, W, 1, 1, 0, NULL, a2, NULL));
    int igot[W];
    CU_CHECK(cuMemcpyDtoH(igot, iout, sizeof igot));
    printf("linear_memory=%d\n", !memcmp(igot, ints, sizeof ints));

    /* ---- a 3D array: cuMemcpy3D in, tex3D out ---- */
    enum { X = 4, Y = 3, Z = 2 };
    float vol[Z][Y][X], vgot[Z][Y][X];
    for (int z = 0; z < Z; z++)
        for (int y = 0; y < Y; y++)
            for (int x = 0; x < X; x++) vol[z][y][x] = (float)(z * 100 + y * 10 + x);
    CUDA_ARRAY3D_DESCRIPTOR vd = {.Width = X, .Height = Y, .Depth = Z, .Format = CU_AD_FORMAT_FLOAT,
                                  .NumChannels = 1};
    CUarray varr;
    CU_CHECK(cuArray3DCreate(&varr, &vd));
    CUDA_ARRAY3D_DESCRIPTOR vq;
    CU_CHECK(cuArray3DGetDescriptor(&vq, varr));
    CUDA_MEMCPY3D c3 = {0};
    c3.srcMemoryType = CU_MEMORYTYPE_HOST;
    c3.srcHost = vol;
    c3.srcPitch = X * sizeof(float);
    c3.srcHeight = Y;
    c3.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c3.dstArray = varr;
    c3.WidthInBytes = X * sizeof(float);
    c3.Height = Y;
    c3.Depth = Z;
    CU_CHECK(cuMemcpy3D(&c3));
    CUtexObject t3 = tex_on_array(varr, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, 0);
    CUdeviceptr vout;
    CU_CHECK(cuMemAlloc(&vout, sizeof vol));
    int vx = X, vy = Y;
    void *a3[] = {&t3, &vout, &vx, &vy};
    CU_CHECK(cuLaunchKernel(fetch3d, Z, 1, 1, X, Y, 1, 0, NULL, a3, NULL));
    CU_CHECK(cuMemcpyDtoH(vgot, vout, sizeof vgot));
    printf("volume=%d descriptor3d=%zu,%zu,%zu\n", !memcmp(vgot, vol, sizeof vol), vq.Width, vq.Height, vq.Depth);

    /* ---- a surface: kernels write a 2D array of u32, cuMemcpy2D reads it back ---- */
    CUDA_ARRAY3D_DESCRIPTOR sd = {.Width = W, .Height = H, .Depth = 0, .Format = CU_AD_FORMAT_UNSIGNED_INT32,
                                  .NumChannels = 1, .Flags = CUDA_ARRAY3D_SURFACE_LDST};
    CUarray sarr;
    CU_CHECK(cuArray3DCreate(&sarr, &sd));
    CUDA_RESOURCE_DESC sr;
    memset(&sr, 0, sizeof sr);
    sr.resType = CU_RESOURCE_TYPE_ARRAY;
    sr.res.array.hArray = sarr;
    CUsurfObject surf;
    CU_CHECK(cuSurfObjectCreate(&surf, &sr));
    void *a4[] = {&surf};
    CU_CHECK(cuLaunchKernel(surf_write, H, 1, 1, W, 1, 1, 0, NULL, a4, NULL));
    unsigned sgot[H][W];
    CUDA_MEMCPY2D sc = {0};
    sc.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    sc.srcArray = sarr;
    sc.dstMemoryType = CU_MEMORYTYPE_HOST;
    sc.dstHost = sgot;
    sc.dstPitch = sizeof sgot[0];
    sc.WidthInBytes = sizeof sgot[0];
    sc.Height = H;
    CU_CHECK(cuMemcpy2D(&sc));
    int surf_errors = 0;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) surf_errors += sgot[y][x] != (unsigned)(x * 100 + y);
    printf("surface_errors=%d\n", surf_errors);

    /* ---- bad input ---- */
    CUDA_ARRAY_DESCRIPTOR bad = {.Width = 4, .Height = 4, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 3};
    CUarray nope;
    printf("three_channels=%d\n", (int)cuArrayCreate(&nope, &bad));
    bad.NumChannels = 1;
    bad.Format = CU_AD_FORMAT_NV12;
    printf("nv12=%d\n", (int)cuArrayCreate(&nope, &bad));
    printf("null_desc=%d\n", (int)cuArrayCreate(&nope, NULL));
    printf("surface_without_ldst=%d\n", (int)cuSurfObjectCreate(&surf, &(CUDA_RESOURCE_DESC){
                                                                     .resType = CU_RESOURCE_TYPE_ARRAY,
                                                                     .res.array.hArray = arr}));
    printf("descriptor_of_3d=%d\n", (int)cuArrayGetDescriptor(&got, varr));

    CU_CHECK(cuTexObjectDestroy(tp));
    printf("query_destroyed=%d\n", (int)cuTexObjectGetResourceDesc(&rq, tp));
    CU_CHECK(cuTexObjectDestroy(tw));
    CU_CHECK(cuTexObjectDestroy(tl));
    CU_CHECK(cuTexObjectDestroy(tb));
    CU_CHECK(cuTexObjectDestroy(tlin));
    CU_CHECK(cuTexObjectDestroy(t3));
    CU_CHECK(cuSurfObjectDestroy(surf));
    CU_CHECK(cuArrayDestroy(arr));
    CU_CHECK(cuArrayDestroy(barr));
    CU_CHECK(cuArrayDestroy(varr));
    CU_CHECK(cuArrayDestroy(sarr));
    printf("destroy_twice=%d\n", (int)cuArrayDestroy(arr));
    printf("done=1\n");
    return 0;
}
