// Streams and events: flags and priorities, record/query/synchronize/elapsed time, cross-stream waits,
// host functions and stream callbacks running in order, per-thread default stream calls.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>
#include "common.h"

static std::vector<int> order;
static std::atomic<int> running{0};

static void CUDART_CB host_fn(void *arg) {
    // Sleep so that work queued after the function would overtake it if the stream did not wait.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    order.push_back((int)(intptr_t)arg);
}

static void CUDART_CB stream_cb(cudaStream_t, cudaError_t status, void *arg) {
    order.push_back(status == cudaSuccess ? (int)(intptr_t)arg : -1);
}

int main() {
    cudaStream_t a, b, hi;
    CHECK(cudaStreamCreate(&a));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    int least, greatest;
    CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CHECK(cudaStreamCreateWithPriority(&hi, cudaStreamDefault, greatest));
    unsigned flags = 9;
    int prio = 9;
    CHECK(cudaStreamGetFlags(b, &flags));
    CHECK(cudaStreamGetPriority(hi, &prio));
    std::printf("flags=%u prio=%d (range %d..%d)\n", flags, prio, least, greatest);

    cudaEvent_t e0, e1, nt;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreateWithFlags(&e1, cudaEventDefault));
    CHECK(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming));
    CHECK(cudaEventQuery(e0));  // never recorded: complete

    const size_t n = 8 << 20;
    char *d, *d2, *h;
    CHECK(cudaMalloc(&d, n));
    CHECK(cudaMalloc(&d2, n));
    CHECK(cudaMallocHost((void **)&h, n));
    CHECK(cudaEventRecord(e0, a));
    CHECK(cudaMemsetAsync(d, 3, n, a));
    CHECK(cudaEventRecord(e1, a));
    CHECK(cudaEventSynchronize(e1));
    CHECK(cudaEventQuery(e1));
    float ms = -1;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    std::printf("elapsed_nonneg=%d\n", ms >= 0.0f);
    CHECK(cudaEventRecord(nt, a));
    EXPECT_ERR(cudaEventElapsedTime(&ms, e0, nt), cudaErrorInvalidResourceHandle);

    // Host functions: the memset queued after the slow function must not run before it.
    CHECK(cudaLaunchHostFunc(a, host_fn, (void *)1));
    CHECK(cudaStreamAddCallback(a, stream_cb, (void *)2, 0));
    CHECK(cudaMemsetAsync(d, 7, n, a));
    CHECK(cudaLaunchHostFunc(a, host_fn, (void *)3));
    // Stream b waits for everything recorded so far on a, then copies the result of the second memset.
    CHECK(cudaEventRecord(e1, a));
    CHECK(cudaStreamWaitEvent(b, e1, 0));
    CHECK(cudaMemcpyAsync(d2, d, n, cudaMemcpyDeviceToDevice, b));
    CHECK(cudaMemcpyAsync(h, d2, n, cudaMemcpyDeviceToHost, b));
    CHECK(cudaStreamSynchronize(b));
    std::printf("order=");
    for (int v : order) std::printf("%d,", v);
    std::printf("\ncross_stream=%d\n", h[0] == 7 && h[n - 1] == 7);
    CHECK(cudaStreamQuery(a));
    CHECK(cudaStreamSynchronize(a));

    // Query while a stream is held by a running host function: not ready; after synchronising: ready.
    CHECK(cudaLaunchHostFunc(a, host_fn, (void *)4));
    CHECK(cudaEventRecord(e1, a));
    cudaError_t q1 = cudaStreamQuery(a), q2 = cudaEventQuery(e1);
    CHECK(cudaStreamSynchronize(a));
    std::printf("query_pending=%d,%d query_after=%d,%d\n", (int)q1, (int)q2, (int)cudaStreamQuery(a),
                (int)cudaEventQuery(e1));

    // A host function with no later CUDA call from the application: it must still run.
    std::atomic<int> flag{0};
    CHECK(cudaLaunchHostFunc(hi, [](void *p) { ((std::atomic<int> *)p)->store(1); }, &flag));
    for (int i = 0; i < 500 && !flag.load(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::printf("callback_without_sync=%d\n", flag.load());

    // Per-thread default stream variants and the legacy/per-thread stream handles.
    CHECK(cudaMemsetAsync(d, 9, n, cudaStreamPerThread));
    CHECK(cudaStreamSynchronize(cudaStreamPerThread));
    CHECK(cudaMemcpyAsync(h, d, 16, cudaMemcpyDeviceToHost, cudaStreamLegacy));
    CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    std::printf("per_thread=%d\n", h[15] == 9);

    EXPECT_ERR(cudaStreamDestroy((cudaStream_t)0x12345), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaEventRecord((cudaEvent_t)0x999, a), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidResourceHandle);  // the last failure, then cleared
    CHECK(cudaGetLastError());
    CHECK(cudaEventDestroy(e0));
    EXPECT_ERR(cudaEventQuery(e0), cudaErrorInvalidResourceHandle);
    CHECK(cudaEventDestroy(e1));
    CHECK(cudaEventDestroy(nt));
    CHECK(cudaStreamDestroy(a));
    CHECK(cudaStreamDestroy(b));
    CHECK(cudaStreamDestroy(hi));
    CHECK(cudaFreeHost(h));
    CHECK(cudaFree(d));
    CHECK(cudaFree(d2));
    CHECK(cudaDeviceSynchronize());
    std::printf("OK\n");
    return 0;
}
