// Copies of 1 B to 64 MiB in every direction, memset, pitched 2D copies, cudaMemcpyDefault, pinned and
// registered host memory, and pointer attributes. Prints OK when every byte survived.
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include "common.h"

static uint32_t rng = 12345;
static void fill(unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) { rng = rng * 1664525u + 1013904223u; p[i] = (unsigned char)(rng >> 24); }
}
static void expect_same(const void *a, const void *b, size_t n, const char *what, size_t size) {
    if (std::memcmp(a, b, n) != 0) { std::fprintf(stderr, "%s: data differs at size %zu\n", what, size); std::exit(1); }
}

// Whether [p, p+n) lies inside an inaccessible mapping of this process (the shim reserves device ranges).
static int reserved(const void *p, size_t n) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    uintptr_t a = (uintptr_t)p;
    while (std::getline(maps, line)) {
        uintptr_t lo = 0, hi = 0;
        char perms[8] = {0};
        if (std::sscanf(line.c_str(), "%lx-%lx %7s", &lo, &hi, perms) == 3 && lo <= a && a + n <= hi)
            return std::strncmp(perms, "---p", 4) == 0;
    }
    return 0;
}

int main() {
    const size_t sizes[] = {1, 7, 512, 4096, 65537, 1 << 20, 16 << 20, 16 << 20 | 3, 64 << 20};
    for (size_t n : sizes) {
        std::vector<unsigned char> src(n), dst(n, 0);
        fill(src.data(), n);
        unsigned char *a, *b;
        CHECK(cudaMalloc(&a, n));
        CHECK(cudaMalloc(&b, n));
        CHECK(cudaMemcpy(a, src.data(), n, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
        CHECK(cudaMemcpy(dst.data(), b, n, cudaMemcpyDeviceToHost));
        expect_same(src.data(), dst.data(), n, "H2D/D2D/D2H", n);
        std::fill(dst.begin(), dst.end(), 0);
        CHECK(cudaMemcpy(dst.data(), a, n, cudaMemcpyDefault));  // classified by pointer
        expect_same(src.data(), dst.data(), n, "default", n);
        CHECK(cudaFree(a));
        CHECK(cudaFree(b));
    }
    std::printf("copies 1 B .. 64 MiB ok\n");
    {
        char *r1, *r2;
        CHECK(cudaMalloc(&r1, 100));
        CHECK(cudaMalloc(&r2, 100000));
        int both = reserved(r1, 100) && reserved(r2, 100000);
        CHECK(cudaFree(r1));
        int after_free = reserved(r2, 100000);
        CHECK(cudaFree(r2));
        std::printf("reserved=%d,%d\n", both, after_free);
    }

    // memset, and a partial memset at an offset
    unsigned char *m;
    const size_t mn = 100000;
    CHECK(cudaMalloc(&m, mn));
    CHECK(cudaMemset(m, 0x5A, mn));
    CHECK(cudaMemset(m + 1000, 0x11, 10));
    std::vector<unsigned char> back(mn);
    CHECK(cudaMemcpy(back.data(), m, mn, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < mn; i++) {
        unsigned char want = (i >= 1000 && i < 1010) ? 0x11 : 0x5A;
        if (back[i] != want) { std::fprintf(stderr, "memset wrong at %zu\n", i); return 1; }
    }
    CHECK(cudaFree(m));
    std::printf("memset ok\n");

    // pitched 2D: host rows of width w with host pitch hp, device pitch from cudaMallocPitch
    const size_t w = 301, h = 67, hp = 320;
    std::vector<unsigned char> host2d(hp * h), out2d(hp * h, 0);
    fill(host2d.data(), host2d.size());
    unsigned char *d2;
    size_t pitch = 0;
    CHECK(cudaMallocPitch((void **)&d2, &pitch, w, h));
    if (pitch < w || pitch % 256) { std::fprintf(stderr, "bad pitch %zu\n", pitch); return 1; }
    CHECK(cudaMemset2D(d2, pitch, 0, w, h));
    CHECK(cudaMemcpy2D(d2, pitch, host2d.data(), hp, w, h, cudaMemcpyHostToDevice));
    unsigned char *d3;
    size_t pitch3 = 0;
    CHECK(cudaMallocPitch((void **)&d3, &pitch3, w, h));
    CHECK(cudaMemcpy2D(d3, pitch3, d2, pitch, w, h, cudaMemcpyDeviceToDevice));
    CHECK(cudaMemcpy2D(out2d.data(), hp, d3, pitch3, w, h, cudaMemcpyDeviceToHost));
    for (size_t y = 0; y < h; y++) expect_same(&host2d[y * hp], &out2d[y * hp], w, "2D", w);
    CHECK(cudaMemset2D(d3, pitch3, 0x7F, 5, 3));
    CHECK(cudaMemcpy2D(out2d.data(), hp, d3, pitch3, w, h, cudaMemcpyDeviceToHost));
    if (out2d[2 * hp + 4] != 0x7F || out2d[2 * hp + 5] != host2d[2 * hp + 5]) { std::fprintf(stderr, "memset2D\n"); return 1; }
    EXPECT_ERR(cudaMemcpy2D(d3, 100, host2d.data(), hp, w, h, cudaMemcpyHostToDevice), cudaErrorInvalidPitchValue);
    CHECK(cudaFree(d2));
    CHECK(cudaFree(d3));
    std::printf("2D ok pitch=%zu\n", pitch);

    // 3D: a pitched volume, a sub-box copied in and out, a slab memset
    {
        const size_t W = 40, H = 9, D = 5;
        cudaExtent ext = make_cudaExtent(W, H, D);
        cudaPitchedPtr vol;
        CHECK(cudaMalloc3D(&vol, ext));
        CHECK(cudaMemset3D(vol, 0, ext));
        std::vector<unsigned char> box(W * H * D), out(W * H * D, 0xFF);
        fill(box.data(), box.size());
        cudaMemcpy3DParms in = {};
        in.srcPtr = make_cudaPitchedPtr(box.data(), W, W, H);
        in.dstPtr = vol;
        in.extent = make_cudaExtent(W - 8, H - 2, D - 1);
        in.dstPos = make_cudaPos(8, 2, 1);
        in.kind = cudaMemcpyHostToDevice;
        CHECK(cudaMemcpy3D(&in));
        CHECK(cudaMemset3D(make_cudaPitchedPtr(vol.ptr, vol.pitch, W, H), 0x33, make_cudaExtent(3, H, 1)));
        cudaMemcpy3DParms back = {};
        back.srcPtr = vol;
        back.dstPtr = make_cudaPitchedPtr(out.data(), W, W, H);
        back.extent = ext;
        back.kind = cudaMemcpyDeviceToHost;
        CHECK(cudaMemcpy3D(&back));
        int bad = 0;
        for (size_t z = 0; z < D; z++)
            for (size_t y = 0; y < H; y++)
                for (size_t x = 0; x < W; x++) {
                    unsigned char want = 0;
                    if (z >= 1 && y >= 2 && x >= 8) want = box[(z - 1) * W * H + (y - 2) * W + (x - 8)];
                    if (z == 0 && x < 3) want = 0x33;
                    bad += out[z * W * H + y * W + x] != want;
                }
        std::printf("3d=%s pitch=%zu\n", bad ? "wrong" : "ok", vol.pitch);
        CHECK(cudaFree(vol.ptr));
    }

    // pinned memory: cudaMallocHost, cudaHostAlloc, cudaHostRegister, async copies on a stream
    const size_t pn = 3 << 20;
    unsigned char *pinned, *pinned2, *dev;
    CHECK(cudaMallocHost((void **)&pinned, pn));
    CHECK(cudaHostAlloc((void **)&pinned2, pn, cudaHostAllocPortable));
    CHECK(cudaMalloc(&dev, pn));
    fill(pinned, pn);
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMemcpyAsync(dev, pinned, pn, cudaMemcpyHostToDevice, s));
    CHECK(cudaMemcpyAsync(pinned2, dev, pn, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    expect_same(pinned, pinned2, pn, "pinned", pn);
    std::vector<unsigned char> reg(pn);
    CHECK(cudaHostRegister(reg.data(), pn, cudaHostRegisterDefault));
    EXPECT_ERR(cudaHostRegister(reg.data(), pn, cudaHostRegisterDefault), cudaErrorHostMemoryAlreadyRegistered);
    CHECK(cudaMemcpy(reg.data(), dev, pn, cudaMemcpyDefault));
    expect_same(pinned, reg.data(), pn, "registered", pn);
    unsigned flags = 99;
    CHECK(cudaHostGetFlags(&flags, pinned2));
    std::printf("hostalloc flags=%u\n", flags);

    cudaPointerAttributes at;
    CHECK(cudaPointerGetAttributes(&at, dev + 10));
    std::printf("attr.device type=%d device=%d ptr_ok=%d\n", (int)at.type, at.device, at.devicePointer == dev + 10);
    CHECK(cudaPointerGetAttributes(&at, pinned));
    std::printf("attr.pinned type=%d host_ok=%d\n", (int)at.type, at.hostPointer == pinned);
    int stackvar = 0;
    CHECK(cudaPointerGetAttributes(&at, &stackvar));
    std::printf("attr.plain type=%d\n", (int)at.type);

    CHECK(cudaHostUnregister(reg.data()));
    EXPECT_ERR(cudaHostUnregister(reg.data()), cudaErrorHostMemoryNotRegistered);
    CHECK(cudaFreeHost(pinned));
    CHECK(cudaFreeHost(pinned2));
    CHECK(cudaFree(dev));
    CHECK(cudaStreamDestroy(s));
    std::printf("OK\n");
    return 0;
}
