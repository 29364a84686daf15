// 8-bit float conversions on the device against cuda_fp8.hpp's host code for the same functions (which computes
// them in software, as the PTX ISA's cvt defines them: .rn.satfinite to e4m3/e5m2, exact back to f16): every
// f16 value, and f32 values around each e4m3/e5m2 value and midpoint. Prints key=value lines.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstring>
#include <vector>

#include "common.h"

__global__ void to_fp8(const float2 *in, const __half2_raw *hin, __nv_fp8x2_storage_t *f32e4, __nv_fp8x2_storage_t *f32e5,
                       __nv_fp8x2_storage_t *h16e4, __nv_fp8x2_storage_t *h16e5, __half2_raw *back4, __half2_raw *back5,
                       int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    f32e4[i] = __nv_cvt_float2_to_fp8x2(in[i], __NV_SATFINITE, __NV_E4M3);
    f32e5[i] = __nv_cvt_float2_to_fp8x2(in[i], __NV_SATFINITE, __NV_E5M2);
    h16e4[i] = __nv_cvt_halfraw2_to_fp8x2(hin[i], __NV_SATFINITE, __NV_E4M3);
    h16e5[i] = __nv_cvt_halfraw2_to_fp8x2(hin[i], __NV_SATFINITE, __NV_E5M2);
    back4[i] = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(i & 0xFFFF), __NV_E4M3);
    back5[i] = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(i & 0xFFFF), __NV_E5M2);
}

int main() {
    // inputs: every f16 bit pattern (as f16 pairs and widened to f32), and f32 values just around them
    const int n = 65536;
    std::vector<float2> in(n);
    std::vector<__half2_raw> hin(n);
    for (int i = 0; i < n; i++) {
        __half_raw h;
        h.x = (unsigned short)i;
        float f = __half2float(__half(h));
        unsigned u;
        std::memcpy(&u, &f, 4);
        unsigned v = u + (i % 3 == 0 ? 1u : i % 3 == 1 ? 0u : (unsigned)-1);
        float g;
        std::memcpy(&g, &v, 4);
        in[i] = make_float2(f, g);
        hin[i].x = (unsigned short)i;
        hin[i].y = (unsigned short)(n - 1 - i);
    }
    float2 *din;
    __half2_raw *dh, *db4, *db5;
    __nv_fp8x2_storage_t *d4, *d5, *dh4, *dh5;
    CHECK(cudaMalloc(&din, n * sizeof(float2)));
    CHECK(cudaMalloc(&dh, n * sizeof(__half2_raw)));
    CHECK(cudaMalloc(&d4, n * 2));
    CHECK(cudaMalloc(&d5, n * 2));
    CHECK(cudaMalloc(&dh4, n * 2));
    CHECK(cudaMalloc(&dh5, n * 2));
    CHECK(cudaMalloc(&db4, n * 4));
    CHECK(cudaMalloc(&db5, n * 4));
    CHECK(cudaMemcpy(din, in.data(), n * sizeof(float2), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dh, hin.data(), n * sizeof(__half2_raw), cudaMemcpyHostToDevice));
    to_fp8<<<n / 256, 256>>>(din, dh, d4, d5, dh4, dh5, db4, db5, n);
    CHECK(cudaDeviceSynchronize());
    std::vector<__nv_fp8x2_storage_t> r4(n), r5(n), rh4(n), rh5(n);
    std::vector<__half2_raw> b4(n), b5(n);
    CHECK(cudaMemcpy(r4.data(), d4, n * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(r5.data(), d5, n * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(rh4.data(), dh4, n * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(rh5.data(), dh5, n * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(b4.data(), db4, n * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(b5.data(), db5, n * 4, cudaMemcpyDeviceToHost));
    int bad_f32 = 0, bad_f16 = 0, bad_back = 0, first = -1;
    for (int i = 0; i < n; i++) {
        bool a = r4[i] != __nv_cvt_float2_to_fp8x2(in[i], __NV_SATFINITE, __NV_E4M3) ||
                 r5[i] != __nv_cvt_float2_to_fp8x2(in[i], __NV_SATFINITE, __NV_E5M2);
        bool b = rh4[i] != __nv_cvt_halfraw2_to_fp8x2(hin[i], __NV_SATFINITE, __NV_E4M3) ||
                 rh5[i] != __nv_cvt_halfraw2_to_fp8x2(hin[i], __NV_SATFINITE, __NV_E5M2);
        __half2_raw w4 = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(i & 0xFFFF), __NV_E4M3);
        __half2_raw w5 = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(i & 0xFFFF), __NV_E5M2);
        bool c = b4[i].x != w4.x || b4[i].y != w4.y || b5[i].x != w5.x || b5[i].y != w5.y;
        bad_f32 += a;
        bad_f16 += b;
        bad_back += c;
        if ((a || b || c) && first < 0) first = i;
    }
    if (first >= 0)
        std::printf("first_bad=%d in=%a,%a dev=%04x,%04x host=%04x,%04x\n", first, in[first].x, in[first].y,
                    r4[first], r5[first], __nv_cvt_float2_to_fp8x2(in[first], __NV_SATFINITE, __NV_E4M3),
                    __nv_cvt_float2_to_fp8x2(in[first], __NV_SATFINITE, __NV_E5M2));
    std::printf("f32_mismatches=%d f16_mismatches=%d back_mismatches=%d\n", bad_f32, bad_f16, bad_back);
    std::printf("done=1\n");
    return 0;
}
