// The calls the server worker's C fast path answers (gpushim/server/fastpath.c) and the states in which it
// must leave them to the Python path; tests/e2e/test_fastpath.py runs it with the fast path on and off and
// expects the same output. Prints key=value lines, then OK.
//
// A stream is held by a host function that waits until the main thread opens it (or gives up after 3 s and
// says so), so what a query sees while work is pending is deterministic.
#include <unistd.h>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>
#include "common.h"

__global__ void empty() {}
__global__ void empty_arg(int) {}
__global__ void bad() { *(volatile int *)16 = 1; }

struct Gate {
    std::atomic<int> open{0}, timed_out{0};
};
static void CUDART_CB gate_fn(void *p) {
    Gate *g = (Gate *)p;
    for (int i = 0; i < 300 && !g->open.load(); i++) usleep(10000);
    if (!g->open.load()) g->timed_out = 1;
}

int main() {
    const size_t N = 1 << 20;
    unsigned char *a;
    cudaStream_t s;
    cudaEvent_t e;
    CHECK(cudaMalloc(&a, N));
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaEventCreate(&e));

    // idle streams and a completed event: cudaSuccess every time
    int ok = 1;
    for (int i = 0; i < 2000; i++) ok &= cudaStreamQuery(0) == cudaSuccess && cudaStreamQuery(s) == cudaSuccess;
    std::printf("query_idle=%d\n", ok);
    CHECK(cudaEventRecord(e, s));
    CHECK(cudaEventSynchronize(e));
    ok = 1;
    for (int i = 0; i < 1000; i++) ok &= cudaEventQuery(e) == cudaSuccess;
    std::printf("event_idle=%d\n", ok);

    // bursts of memsets on both streams, then the bytes
    for (int i = 0; i < 2000; i++)
        CHECK(cudaMemsetAsync(a + (i % 256) * 4096, i & 0xff, 4096, i % 2 ? s : 0));
    CHECK(cudaDeviceSynchronize());
    std::vector<unsigned char> h(N);
    CHECK(cudaMemcpy(h.data(), a, N, cudaMemcpyDeviceToHost));
    ok = 1;
    for (size_t i = 0; i < N; i++) ok &= h[i] == (unsigned char)(i / 4096);  // block b: last written by i = b mod 256
    std::printf("memset_bytes=%d\n", ok);
    CHECK(cudaMemset(a + 5, 0xab, 3));
    CHECK(cudaMemcpy(h.data(), a, 16, cudaMemcpyDeviceToHost));
    std::printf("memset_sync=%d\n", h[4] == 0 && h[5] == 0xab && h[7] == 0xab && h[8] == 0);
    // out of the allocation: the same error as ever (cudaErrorInvalidValue)
    std::printf("memset_oob=%d\n", (int)cudaMemset(a, 0, N + 1));
    std::printf("memset_oob_after=%d\n", (int)cudaGetLastError());

    // empty kernels in several configurations, on both streams
    for (int i = 0; i < 1000; i++) {
        empty<<<1, 1>>>();
        empty<<<dim3(2, 2), 64, 0, s>>>();
        empty_arg<<<3, 32>>>(i);
    }
    std::printf("launch=%d\n", (int)cudaGetLastError());
    std::printf("launch_sync=%d\n", (int)cudaDeviceSynchronize());

    // a stream held by a host function: queries see pending work (cudaErrorNotReady, Stream Management:
    // cudaStreamQuery), the legacy stream waits for it, a memset queued behind it runs after it
    Gate g;
    CHECK(cudaLaunchHostFunc(s, gate_fn, &g));
    CHECK(cudaMemsetAsync(a, 7, 16, s));
    empty<<<dim3(2, 2), 64, 0, s>>>();
    CHECK(cudaEventRecord(e, s));
    std::printf("held_query=%d\n", (int)cudaStreamQuery(s));
    std::printf("held_legacy_query=%d\n", (int)cudaStreamQuery(0));
    std::printf("held_event_query=%d\n", (int)cudaEventQuery(e));
    g.open = 1;
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(h.data(), a, 16, cudaMemcpyDeviceToHost));
    std::printf("held_memset=%d\n", h[0] == 7 && h[15] == 7);
    std::printf("timed_out=%d\n", g.timed_out.load());
    std::printf("released_query=%d\n", (int)cudaStreamQuery(s));

    // small synchronous copies, pageable and pinned, both ways
    unsigned char *pin;
    CHECK(cudaMallocHost(&pin, 8192));
    ok = 1;
    for (int i = 0; i < 500; i++) {
        std::memset(h.data(), i & 0xff, 4096);
        CHECK(cudaMemcpy(a + 8192, h.data(), 4096, cudaMemcpyHostToDevice));
        std::memset(pin, 0, 4096);
        CHECK(cudaMemcpy(pin, a + 8192, 4096, cudaMemcpyDeviceToHost));
        ok &= pin[0] == (i & 0xff) && pin[4095] == (i & 0xff);
        pin[4096] = (unsigned char)(i + 1);
        CHECK(cudaMemcpy(a + 100, pin + 4096, 1, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(h.data(), a + 100, 1, cudaMemcpyDeviceToHost));
        ok &= h[0] == (unsigned char)(i + 1);
    }
    std::printf("copies=%d\n", ok);
    // past the end of the allocation: the same error as ever
    std::printf("copy_oob=%d\n", (int)cudaMemcpy(h.data(), a + N - 8, 16, cudaMemcpyDeviceToHost));
    std::printf("copy_oob_after=%d\n", (int)cudaGetLastError());
    // cudaMemGetInfo: an allocation takes its size from the free bytes, its free gives them back
    size_t free0, free1, free2, total;
    unsigned char *b;
    CHECK(cudaMemGetInfo(&free0, &total));
    CHECK(cudaMalloc(&b, 1 << 20));
    CHECK(cudaMemGetInfo(&free1, &total));
    CHECK(cudaFree(b));
    CHECK(cudaMemGetInfo(&free2, &total));
    std::printf("meminfo_drop=%zu\nmeminfo_back=%d\n", free0 - free1, free2 == free0);
    // a synchronous copy on the legacy stream returns after prior work of the blocking stream s (CUDA Runtime API,
    // "API synchronization behavior" and "Stream synchronization behavior"): held by a host function that a
    // thread releases while the copies wait
    Gate g2;
    CHECK(cudaLaunchHostFunc(s, gate_fn, &g2));
    CHECK(cudaMemsetAsync(a, 9, 16, s));
    std::thread opener([&g2] {
        usleep(50000);
        g2.open = 1;
    });
    std::memset(pin, 0, 16);
    CHECK(cudaMemcpy(pin, a, 16, cudaMemcpyDeviceToHost));
    opener.join();
    std::printf("held_copy=%d\n", pin[0] == 9 && pin[15] == 9 && !g2.timed_out.load());
    CHECK(cudaFreeHost(pin));

    // a sticky error: every later call reports it
    bad<<<1, 1>>>();
    std::printf("sticky_sync=%d\n", (int)cudaDeviceSynchronize());
    std::printf("sticky_query=%d\n", (int)cudaStreamQuery(0));
    std::printf("sticky_memset=%d\n", (int)cudaMemset(a, 1, 16));
    std::printf("OK\n");
    return 0;
}
