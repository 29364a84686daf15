// Stream capture and CUDA graphs: a sequence captured on one stream (memset, a kernel taking a struct, a
// kernel reading its output, an async copy from pinned memory, a device-to-device copy), instantiated and
// launched several times on another stream with the inputs changed in between; a host function node;
// cudaStreamIsCapturing; and CUDA's error rules for capture.
#include <atomic>
#include <cstring>
#include <vector>
#include "common.h"

struct Params {
    float scale;
    int offset;
    int n;
};

__global__ void affine(Params p, const float *in, float *mid) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n) mid[i] = in[i] * p.scale + (float)p.offset;
}

__global__ void add(const float *mid, const float *bias, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] += mid[i] + bias[i];  // out was set to 0 by the captured memset
}

static std::atomic<int> host_calls{0};
static void CUDART_CB count_call(void *) { host_calls++; }

static int status_of(cudaStream_t s) {
    cudaStreamCaptureStatus st;
    CHECK(cudaStreamIsCapturing(s, &st));
    return (int)st;
}

int main() {
    const int n = 1000, threads = 128, blocks = (n + threads - 1) / threads;
    const size_t bytes = n * sizeof(float);
    cudaStream_t cs, ls;
    CHECK(cudaStreamCreate(&cs));
    CHECK(cudaStreamCreateWithFlags(&ls, cudaStreamNonBlocking));
    float *d_in, *d_mid, *d_bias, *d_out, *d_copy, *h_bias;
    CHECK(cudaMalloc(&d_in, bytes));
    CHECK(cudaMalloc(&d_mid, bytes));
    CHECK(cudaMalloc(&d_bias, bytes));
    CHECK(cudaMalloc(&d_out, bytes));
    CHECK(cudaMalloc(&d_copy, bytes));
    CHECK(cudaMallocHost((void **)&h_bias, bytes));
    CHECK(cudaMemset(d_copy, 0, bytes));
    CHECK(cudaMemset(d_out, 0x7f, bytes));
    std::vector<float> h_in(n), h_out(n);

    // ---- capture ----
    std::printf("before=%d\n", status_of(cs));
    CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
    std::printf("during=%d other=%d\n", status_of(cs), status_of(ls));
    CHECK(cudaMemsetAsync(d_out, 0, bytes, cs));
    Params p = {2.0f, 1, n};
    affine<<<blocks, threads, 0, cs>>>(p, d_in, d_mid);
    CHECK(cudaGetLastError());
    p.scale = 100.0f;  // the graph keeps the value the kernel was captured with
    CHECK(cudaMemcpyAsync(d_bias, h_bias, bytes, cudaMemcpyHostToDevice, cs));
    add<<<blocks, threads, 0, cs>>>(d_mid, d_bias, d_out, n);
    CHECK(cudaMemcpyAsync(d_copy, d_out, bytes, cudaMemcpyDeviceToDevice, cs));
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamEndCapture(cs, &graph));
    std::printf("after=%d graph=%d\n", status_of(cs), graph != nullptr);
    size_t nodes = 0;
    CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
    std::printf("nodes=%zu\n", nodes);

    // Nothing ran while capturing.
    CHECK(cudaStreamSynchronize(cs));
    CHECK(cudaMemcpy(h_out.data(), d_copy, bytes, cudaMemcpyDeviceToHost));
    bool untouched = true;
    for (int i = 0; i < n; i++) untouched &= h_out[i] == 0.0f;
    std::printf("untouched=%d\n", untouched);

    cudaGraphExec_t exec;
#if CUDART_VERSION >= 12000
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
#else  // the 11.x ABI: an error node and a log buffer instead of flags
    cudaGraphNode_t err_node = (cudaGraphNode_t)0x1;
    char log[64] = "x";
    CHECK(cudaGraphInstantiate(&exec, graph, &err_node, log, sizeof log));
    std::printf("instantiate11 err_node=%d log=%d\n", err_node == nullptr, log[0] == 0);
#endif
    for (int iter = 0; iter < 3; iter++) {
        for (int i = 0; i < n; i++) {
            h_in[i] = (float)(i + 1000 * iter);
            h_bias[i] = 0.5f * (float)iter - (float)i;  // pinned: the graph reads it when it runs
        }
        CHECK(cudaMemcpy(d_in, h_in.data(), bytes, cudaMemcpyHostToDevice));
        CHECK(cudaGraphLaunch(exec, ls));
        CHECK(cudaStreamSynchronize(ls));
        CHECK(cudaMemcpy(h_out.data(), d_copy, bytes, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (int i = 0; i < n; i++) bad += h_out[i] != h_in[i] * 2.0f + 1.0f + h_bias[i];
        std::printf("launch%d=%s first=%g last=%g\n", iter, bad ? "BAD" : "ok", h_out[0], h_out[n - 1]);
        if (iter == 0) CHECK(cudaGraphDestroy(graph));  // the executable graph does not need it
    }
    // Launched on the capturing stream too (any stream will do), then twice in a row without waiting.
    CHECK(cudaGraphLaunch(exec, cs));
    CHECK(cudaGraphLaunch(exec, ls));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h_out.data(), d_copy, bytes, cudaMemcpyDeviceToHost));
    std::printf("relaunch=%s\n", h_out[5] == h_in[5] * 2.0f + 1.0f + h_bias[5] ? "ok" : "BAD");
    CHECK(cudaGraphExecDestroy(exec));

    // A host function node runs at every launch, in stream order.
    CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
    CHECK(cudaMemsetAsync(d_out, 0, bytes, cs));
    CHECK(cudaLaunchHostFunc(cs, count_call, nullptr));
    CHECK(cudaStreamEndCapture(cs, &graph));
    std::printf("host_calls_captured=%d\n", host_calls.load());
    CHECK(cudaGraphInstantiateWithFlags(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, ls));
    CHECK(cudaGraphLaunch(exec, ls));
    CHECK(cudaStreamSynchronize(ls));
    std::printf("host_calls=%d\n", host_calls.load());
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));

    // More node kinds: 2D memset and copy, a copy from pageable memory, a copy back into pinned memory; and
    // a graph launched into a capture becomes part of the outer graph.
    {
        const size_t w = 64, h = 8, pitch = 128;
        char *d2a, *d2b, *hpin;
        CHECK(cudaMalloc(&d2a, pitch * h));
        CHECK(cudaMalloc(&d2b, pitch * h));
        CHECK(cudaMallocHost((void **)&hpin, w * h));
        std::vector<char> pageable(w * h);
        CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
        CHECK(cudaMemset2DAsync(d2a, pitch, 5, w, h, cs));
        CHECK(cudaMemcpy2DAsync(d2a, pitch, pageable.data(), w, w, 2, cudaMemcpyHostToDevice, cs));
        CHECK(cudaMemcpy2DAsync(d2b, pitch, d2a, pitch, w, h, cudaMemcpyDeviceToDevice, cs));
        CHECK(cudaMemcpy2DAsync(hpin, w, d2b, pitch, w, h, cudaMemcpyDeviceToHost, cs));
        cudaGraph_t inner, outer;
        CHECK(cudaStreamEndCapture(cs, &inner));
        cudaGraphExec_t inner_exec, outer_exec;
        CHECK(cudaGraphInstantiateWithFlags(&inner_exec, inner, 0));
        CHECK(cudaStreamBeginCapture(ls, cudaStreamCaptureModeGlobal));
        CHECK(cudaGraphLaunch(inner_exec, ls));
        CHECK(cudaStreamEndCapture(ls, &outer));
        size_t inner_nodes = 0;  // (the outer graph holds copies of its nodes, not one child-graph node)
        CHECK(cudaGraphGetNodes(inner, nullptr, &inner_nodes));
        CHECK(cudaGraphInstantiateWithFlags(&outer_exec, outer, 0));
        int ok = 1;
        for (int iter = 1; iter <= 2; iter++) {
            std::memset(pageable.data(), iter, pageable.size());
            std::memset(hpin, 0, w * h);
            CHECK(cudaGraphLaunch(iter == 1 ? inner_exec : outer_exec, ls));
            CHECK(cudaStreamSynchronize(ls));
            for (size_t y = 0; y < h; y++)
                for (size_t x = 0; x < w; x++) ok &= hpin[y * w + x] == (y < 2 ? iter : 5);
        }
        std::printf("kinds=%s nodes=%zu\n", ok ? "ok" : "BAD", inner_nodes);
        CHECK(cudaGraphExecDestroy(inner_exec));
        CHECK(cudaGraphExecDestroy(outer_exec));
        CHECK(cudaGraphDestroy(inner));
        CHECK(cudaGraphDestroy(outer));
        CHECK(cudaFree(d2a));
        CHECK(cudaFree(d2b));
        CHECK(cudaFreeHost(hpin));
    }

    // ---- CUDA's rules ----
    // A synchronous call on a capturing stream fails and invalidates the capture.
    CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
    CHECK(cudaMemsetAsync(d_out, 0, bytes, cs));
    cudaError_t sync = cudaStreamSynchronize(cs);
    int invalidated = status_of(cs);
    cudaError_t more = cudaMemsetAsync(d_out, 0, bytes, cs);
    graph = (cudaGraph_t)0x1;
    cudaError_t end = cudaStreamEndCapture(cs, &graph);
    std::printf("sync_in_capture=%d status=%d more=%d end=%d graph_null=%d after=%d\n", (int)sync, invalidated,
                (int)more, (int)end, graph == nullptr, status_of(cs));
    cudaGetLastError();

    CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
    cudaError_t dsync = cudaDeviceSynchronize();
    end = cudaStreamEndCapture(cs, &graph);
    std::printf("device_sync_in_capture=%d end=%d\n", (int)dsync, (int)end);

    CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeRelaxed));
    cudaError_t twice = cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal);
    CHECK(cudaStreamEndCapture(cs, &graph));  // the capture itself is unharmed
    CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
    CHECK(cudaGraphDestroy(graph));
    cudaError_t not_capturing = cudaStreamEndCapture(cs, &graph);
    cudaError_t legacy = cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal);
    std::printf("begin_twice=%d empty_nodes=%zu end_not_capturing=%d legacy=%d\n", (int)twice, nodes,
                (int)not_capturing, (int)legacy);

    // A fork that never joins back: cudaStreamEndCapture fails with cudaErrorStreamCaptureUnjoined (904).
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
    CHECK(cudaEventRecord(ev, cs));
    CHECK(cudaStreamWaitEvent(cs, ev, 0));  // within the stream: fine
    cudaError_t fork = cudaStreamWaitEvent(ls, ev, 0);
    end = cudaStreamEndCapture(cs, &graph);
    std::printf("fork=%d end=%d\n", (int)fork, (int)end);
    CHECK(cudaEventRecord(ev, cs));  // an ordinary event again once the capture is over
    CHECK(cudaStreamWaitEvent(ls, ev, 0));
    CHECK(cudaDeviceSynchronize());
    cudaGetLastError();

    CHECK(cudaEventDestroy(ev));
    CHECK(cudaStreamDestroy(cs));
    CHECK(cudaStreamDestroy(ls));
    CHECK(cudaFreeHost(h_bias));
    CHECK(cudaFree(d_in));
    CHECK(cudaFree(d_mid));
    CHECK(cudaFree(d_bias));
    CHECK(cudaFree(d_out));
    CHECK(cudaFree(d_copy));
    std::printf("OK\n");
    return 0;
}
