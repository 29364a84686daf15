// CUDA's synchronisation semantics, one case per argument (docs/semantics.md maps each to CUDA's docs).
// Built twice: `sync` (legacy default stream) and `sync_ptds` (nvcc --default-stream per-thread), where
// stream 0 and the synchronous calls mean the thread's own default stream.
//
// Orderings are made deterministic by holding a stream with a host function (hold: it sleeps; gate: it
// waits until the main thread opens it, or gives up after 3 s and says so), then checking what the
// caller sees right after the call under test returns.
#include <sys/mman.h>
#include <unistd.h>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>
#include "common.h"

#define HOLD_MS 250

static void CUDART_CB sleep_fn(void *ms) { usleep((useconds_t)(intptr_t)ms * 1000); }
static void hold(cudaStream_t s) { CHECK(cudaLaunchHostFunc(s, sleep_fn, (void *)(intptr_t)HOLD_MS)); }

struct Gate {
    std::atomic<int> open{0}, timed_out{0};
};
static void CUDART_CB gate_fn(void *p) {
    Gate *g = (Gate *)p;
    for (int i = 0; i < 300 && !g->open.load(); i++) usleep(10000);
    if (!g->open.load()) g->timed_out = 1;
}

__global__ void copyk(int *dst, const int *src, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}

__device__ int sym[1024];

static int all_bytes(const void *p, size_t n, int v) {
    const unsigned char *c = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != (unsigned char)v) return 0;
    return 1;
}
static int all_ints(const int *p, size_t n, int v) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return 0;
    return 1;
}
static void fill_ints(int *p, size_t n, int v) {
    for (size_t i = 0; i < n; i++) p[i] = v;
}
static int device_count() {
    int n = 0;
    CHECK(cudaGetDeviceCount(&n));
    return n;
}

static const size_t N = 1 << 20;  // bytes: above the shim's 256 KiB staging threshold
static const int K = 1024;        // ints a kernel copies (the emulator interprets PTX: keep kernels small)

// 1. A synchronous H2D from pinned memory has read the buffer when it returns: the caller may reuse it,
// and a kernel on a non-blocking stream launched right after sees the data. Same for cudaMemcpyToSymbol.
static void pinned_h2d() {
    int *pin, *d, *d2;
    std::vector<int> h(N / 4);
    CHECK(cudaMallocHost(&pin, N));
    CHECK(cudaMalloc(&d, N));
    CHECK(cudaMalloc(&d2, N));
    fill_ints(pin, N / 4, 1);
    hold(0);
    CHECK(cudaMemcpy(d, pin, N, cudaMemcpyHostToDevice));
    fill_ints(pin, N / 4, 2);  // reuse the buffer for the "next batch"
    CHECK(cudaMemcpy(h.data(), d, N, cudaMemcpyDeviceToHost));
    std::printf("pinned_reuse=%d\n", all_ints(h.data(), N / 4, 1));

    cudaStream_t nb;
    CHECK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    fill_ints(pin, N / 4, 3);
    hold(0);
    CHECK(cudaMemcpy(d, pin, N, cudaMemcpyHostToDevice));
    copyk<<<K / 256, 256, 0, nb>>>(d2, d, K);
    CHECK(cudaStreamSynchronize(nb));
    CHECK(cudaMemcpy(h.data(), d2, K * 4, cudaMemcpyDeviceToHost));
    std::printf("pinned_nb_kernel=%d\n", all_ints(h.data(), K, 3));

    fill_ints(pin, K, 4);
    hold(0);
    CHECK(cudaMemcpyToSymbol(sym, pin, K * 4));
    fill_ints(pin, K, 5);
    CHECK(cudaMemcpyFromSymbol(h.data(), sym, K * 4));
    std::printf("to_symbol_pinned=%d\n", all_ints(h.data(), K, 4));
    CHECK(cudaStreamDestroy(nb));
    CHECK(cudaFreeHost(pin));
    CHECK(cudaFree(d));
    CHECK(cudaFree(d2));
}

// 2. A synchronous H2D from any host memory is ordered after earlier work on its stream: an earlier
// asynchronous D2H into pinned memory has landed when it returns.
static void h2d_order() {
    char *d, *din, *out, *pin, *reg;
    std::vector<char> pageable(N, 1);
    CHECK(cudaMalloc(&d, N));
    CHECK(cudaMalloc(&din, N));
    CHECK(cudaMallocHost(&out, N));
    CHECK(cudaMallocHost(&pin, N));
    reg = (char *)mmap(nullptr, N, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(cudaHostRegister(reg, N, cudaHostRegisterDefault));
    const char *names[] = {"pageable_small", "pageable_large", "registered", "pinned"};
    const char *srcs[] = {pageable.data(), pageable.data(), reg, pin};
    size_t sizes[] = {4096, N, N, N};
    for (int k = 0; k < 4; k++) {
        CHECK(cudaMemset(d, 10 + k, N));
        std::memset(out, 0, N);
        hold(0);
        CHECK(cudaMemcpyAsync(out, d, N, cudaMemcpyDeviceToHost, 0));
        CHECK(cudaMemcpy(din, srcs[k], sizes[k], cudaMemcpyHostToDevice));
        std::printf("h2d_order_%s=%d\n", names[k], all_bytes(out, N, 10 + k));
    }
    CHECK(cudaHostUnregister(reg));
    munmap(reg, N);
    CHECK(cudaFreeHost(out));
    CHECK(cudaFreeHost(pin));
    CHECK(cudaFree(d));
    CHECK(cudaFree(din));
}

// 3. Waiting on the legacy stream does not wait for non-blocking streams (a non-blocking stream is held
// by a host function that waits for this thread: waiting for it would deadlock). Item 10: nor does a
// query of the default stream report it busy.
static void legacy_nb() {
    char *d, *dnb, *pin;
    char h[256];
    CHECK(cudaMalloc(&d, N));
    CHECK(cudaMalloc(&dnb, N));
    CHECK(cudaMallocHost(&pin, N));
    CHECK(cudaMemset(d, 1, N));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t nb;
    CHECK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    Gate g;
    CHECK(cudaLaunchHostFunc(nb, gate_fn, &g));
    CHECK(cudaMemsetAsync(dnb, 2, N, nb));
    cudaError_t q0 = cudaStreamQuery(0), ql = cudaStreamQuery(cudaStreamLegacy);
    CHECK(cudaStreamSynchronize(0));
    CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(pin, d, N, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, cudaStreamLegacy));
    int data = all_bytes(h, sizeof h, 1) && all_bytes(pin, N, 1);
    g.open = 1;
    CHECK(cudaStreamSynchronize(nb));
    std::printf("legacy_nb=query=%d,%d timed_out=%d data=%d\n", (int)q0, (int)ql, g.timed_out.load(), data);
    CHECK(cudaStreamDestroy(nb));
    CHECK(cudaFree(d));
    CHECK(cudaFree(dnb));
    CHECK(cudaFreeHost(pin));
}

// 4. D2H copies issued on a blocking stream wait for earlier legacy-stream work (small pageable, 2D, and
// in per-thread builds the synchronous cudaMemcpy on the thread's stream).
static void blocking_d2h() {
    char *d;
    char h[256];
    CHECK(cudaMalloc(&d, N));
    CHECK(cudaMemset(d, 0, N));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    hold(cudaStreamLegacy);
    CHECK(cudaMemsetAsync(d, 7, N, cudaStreamLegacy));
    CHECK(cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s));
    std::printf("blocking_d2h=%d\n", all_bytes(h, sizeof h, 7));
    hold(cudaStreamLegacy);
    CHECK(cudaMemsetAsync(d, 8, N, cudaStreamLegacy));
    CHECK(cudaMemcpy2DAsync(h, 16, d, 32, 16, 8, cudaMemcpyDeviceToHost, s));
    std::printf("blocking_d2h_2d=%d\n", all_bytes(h, 128, 8));
    hold(cudaStreamLegacy);
    CHECK(cudaMemsetAsync(d, 9, N, cudaStreamLegacy));
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));  // per-thread builds: the thread's stream
    std::printf("default_d2h=%d\n", all_bytes(h, sizeof h, 9));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(d));
}

// 5. Each device has its own legacy stream.
static void two_devices() {
    if (device_count() < 2) { std::printf("two_devices=skip\n"); return; }
    CHECK(cudaSetDevice(1));
    int *d1, *d1b, *pin;
    int h[64];
    CHECK(cudaMalloc(&d1, N));
    CHECK(cudaMalloc(&d1b, N));
    CHECK(cudaMallocHost(&pin, N));
    CHECK(cudaMemset(d1, 0, N));
    cudaStream_t s1, nb1;
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaStreamCreateWithFlags(&nb1, cudaStreamNonBlocking));
    hold(cudaStreamLegacy);
    CHECK(cudaMemsetAsync(d1, 7, N, cudaStreamLegacy));
    CHECK(cudaMemcpyAsync(h, d1, sizeof h, cudaMemcpyDeviceToHost, s1));
    std::printf("dev1_blocking=%d\n", all_bytes(h, sizeof h, 7));
    hold(cudaStreamLegacy);
    CHECK(cudaMemsetAsync(d1, 8, N, cudaStreamLegacy));
    CHECK(cudaMemcpyAsync(pin, d1, N, cudaMemcpyDeviceToHost, cudaStreamLegacy));
    CHECK(cudaDeviceSynchronize());
    std::printf("dev1_device_sync=%d\n", all_bytes(pin, N, 8));
    cudaEvent_t e;
    CHECK(cudaEventCreate(&e));
    hold(nb1);
    CHECK(cudaMemsetAsync(d1, 9, N, nb1));
    CHECK(cudaEventRecord(e, nb1));
    CHECK(cudaStreamWaitEvent(cudaStreamLegacy, e, 0));
    copyk<<<K / 256, 256, 0, cudaStreamLegacy>>>(d1b, d1, K);
    CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    CHECK(cudaMemcpy(pin, d1b, K * 4, cudaMemcpyDeviceToHost));
    std::printf("dev1_wait_event=%d\n", all_bytes(pin, K * 4, 9));
    CHECK(cudaEventDestroy(e));
    CHECK(cudaStreamDestroy(s1));
    CHECK(cudaStreamDestroy(nb1));
    CHECK(cudaFree(d1));
    CHECK(cudaFree(d1b));
    CHECK(cudaFreeHost(pin));
    CHECK(cudaSetDevice(0));
}

// 6. cudaMemcpyPeer is serialised with all pending and future work on the current, source and destination
// devices, non-blocking streams included.
static void peer() {
    if (device_count() < 2) { std::printf("peer=skip\n"); return; }
    char *dst0, *src1, *pin;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&dst0, N));
    CHECK(cudaMemset(dst0, 0, N));
    CHECK(cudaMallocHost(&pin, N));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&src1, N));
    CHECK(cudaMemset(src1, 1, N));
    cudaStream_t nb1, nb0;
    CHECK(cudaStreamCreateWithFlags(&nb1, cudaStreamNonBlocking));
    hold(nb1);
    CHECK(cudaMemsetAsync(src1, 4, N, nb1));
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamCreateWithFlags(&nb0, cudaStreamNonBlocking));
    CHECK(cudaMemcpyPeer(dst0, 0, src1, 1, N));
    CHECK(cudaMemcpyAsync(pin, dst0, N, cudaMemcpyDeviceToHost, nb0));
    CHECK(cudaStreamSynchronize(nb0));
    std::printf("peer=%d\n", all_bytes(pin, N, 4));
    CHECK(cudaStreamDestroy(nb0));
    CHECK(cudaStreamDestroy(nb1));
    CHECK(cudaFree(dst0));
    CHECK(cudaFree(src1));
    CHECK(cudaFreeHost(pin));
}

// 7. A synchronous cudaMemcpyFromSymbol into pinned memory has completed when it returns (legacy builds:
// after the blocking per-thread stream's work; per-thread builds: on that stream).
static void from_symbol() {
    int *pin;
    std::vector<int> hv(K, 11);
    CHECK(cudaMallocHost(&pin, K * 4));
    CHECK(cudaMemcpyToSymbol(sym, hv.data(), K * 4));
    hold(cudaStreamPerThread);
    fill_ints(hv.data(), K, 12);
    CHECK(cudaMemcpyToSymbolAsync(sym, hv.data(), K * 4, 0, cudaMemcpyHostToDevice, cudaStreamPerThread));
    CHECK(cudaMemcpyFromSymbol(pin, sym, K * 4));
    std::printf("from_symbol_pinned=%d\n", all_ints(pin, K, 12));
    CHECK(cudaFreeHost(pin));
}

// 8. cudaMemset on pinned host memory and on managed memory is valid and fully synchronous (ordered after
// the stream's earlier work).
static void memset_host() {
    char *d, *pin, *m;
    CHECK(cudaMalloc(&d, N));
    CHECK(cudaMallocHost(&pin, N));
    CHECK(cudaMemset(d, 5, N));
    hold(0);
    CHECK(cudaMemcpyAsync(pin, d, N, cudaMemcpyDeviceToHost, 0));
    cudaError_t e = cudaMemset(pin, 3, N);
    std::printf("memset_pinned=%d,%d\n", (int)e, all_bytes(pin, N, 3));
    // cudaMemsetAsync on pinned memory is asynchronous: it returns while the stream is held (by a gate that
    // waits for this thread), and fills the bytes in stream order.
    Gate g;
    CHECK(cudaLaunchHostFunc(0, gate_fn, &g));
    e = cudaMemsetAsync(pin, 6, N, 0);
    if (!e) e = cudaMemsetAsync(pin, 7, N / 2, 0);
    int untouched = all_bytes(pin, N, 3);
    g.open = 1;
    CHECK(cudaStreamSynchronize(0));
    std::printf("memset_async_pinned=%d,%d timed_out=%d,%d\n", (int)e, untouched, g.timed_out.load(),
                all_bytes(pin, N / 2, 7) && all_bytes(pin + N / 2, N / 2, 6));
    CHECK(cudaMallocManaged(&m, N));
    std::memset(m, 0, N);
    hold(0);
    e = cudaMemset(m, 4, N);
    std::printf("memset_managed=%d,%d\n", (int)e, all_bytes(m, N, 4));
    CHECK(cudaFree(m));
    CHECK(cudaFreeHost(pin));
    CHECK(cudaFree(d));
}

// 10. Smaller ones: a freed managed range leaves nothing behind; a copy whose direction contradicts its
// pointers fails cleanly; 2D sizes that wrap around are rejected.
static void small() {
    char *m, *d, *d2;
    CHECK(cudaMallocManaged(&m, N));
    CHECK(cudaFree(m));
    CHECK(cudaMalloc(&d, N));  // the server may hand out the same range again
    std::printf("managed_reuse=%d\n", d == m);
    CHECK(cudaMalloc(&d2, N));
    char h[64] = {0};
    cudaError_t e1 = cudaMemcpy(d, d2, 64, cudaMemcpyHostToDevice);
    cudaError_t e2 = cudaMemcpy(d, d2, 64, cudaMemcpyDeviceToHost);
    cudaError_t e3 = cudaMemcpy(h, d, 64, cudaMemcpyHostToHost);
    cudaError_t e4 = cudaMemcpy2D(d, 64, d2, 64, 64, 1, cudaMemcpyHostToDevice);
    cudaError_t e5 = cudaMemcpy2D(d, 64, d2, 64, 64, 1, cudaMemcpyDeviceToHost);
    cudaError_t e6 = cudaMemcpyAsync(d, d2, 64, cudaMemcpyHostToDevice, 0);
    std::printf("direction=%d,%d,%d,%d,%d,%d\n", (int)e1, (int)e2, (int)e3, (int)e4, (int)e5, (int)e6);
    cudaError_t w1 = cudaMemset2D(d, (size_t)1 << 63, 1, 1, 3);
    cudaError_t w2 = cudaMemcpy2D(d, (size_t)1 << 63, h, 8, 8, 3, cudaMemcpyHostToDevice);
    cudaError_t w3 = cudaMemset2D(d, 64, 1, 64, SIZE_MAX / 32);
    std::printf("wrap=%d,%d,%d\n", (int)w1, (int)w2, (int)w3);
    cudaGetLastError();
    CHECK(cudaDeviceSynchronize());  // nothing bad was queued
    CHECK(cudaFree(d));
    CHECK(cudaFree(d2));
}

// 9. cudaDeviceReset after a sticky error: the context is destroyed and the next call starts a fresh one.
__global__ void oob(int *p) { p[threadIdx.x * 1000000] = 1; }
static void reset() {
    int *d;
    CHECK(cudaMalloc(&d, 1024));
    oob<<<1, 64>>>(d);
    cudaError_t s = cudaDeviceSynchronize();
    cudaError_t sticky = cudaMalloc(&d, 16);
    cudaError_t r = cudaDeviceReset();
    cudaError_t after = cudaMalloc(&d, N);
    int data = 0;
    if (!after) {
        std::vector<char> h(N);
        CHECK(cudaMemset(d, 6, N));
        CHECK(cudaMemcpy(h.data(), d, N, cudaMemcpyDeviceToHost));
        data = all_bytes(h.data(), N, 6);
    }
    std::printf("reset=sync=%d sticky=%d reset=%d after=%d data=%d last=%d\n", (int)s, (int)sticky, (int)r,
                (int)after, data, (int)cudaGetLastError());
}

int main(int argc, char **argv) {  // sync [all | reset | CASE...]
    const char *only = argc > 1 ? argv[1] : "all";
    struct { const char *name; void (*fn)(); } cases[] = {
        {"pinned_h2d", pinned_h2d}, {"h2d_order", h2d_order}, {"legacy_nb", legacy_nb},
        {"blocking_d2h", blocking_d2h}, {"two_devices", two_devices}, {"peer", peer},
        {"from_symbol", from_symbol}, {"memset_host", memset_host}, {"small", small},
    };
    if (!std::strcmp(only, "reset")) {  // leaves a sticky error behind: on its own
        reset();
    } else {
        for (auto &c : cases) {
            bool run = !std::strcmp(only, "all");
            for (int i = 1; i < argc; i++) run = run || !std::strcmp(argv[i], c.name);
            if (run) c.fn();
        }
    }
    CHECK(cudaDeviceSynchronize());
    std::printf("OK\n");
    return 0;
}
