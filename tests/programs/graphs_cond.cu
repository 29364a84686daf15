// Conditional graph nodes (CUDA C++ Programming Guide, "Conditional Graph Nodes"): IF (with and without an
// ELSE body), WHILE and SWITCH nodes whose condition a kernel sets with cudaGraphSetConditional, handles with
// cudaGraphCondAssignDefault, a nested conditional, and the errors. Results checked on the host; prints
// key=value lines. "count": pauses (reads a line) before and after 20 launches so the test can count frames;
// "forever": a WHILE loop of 2^30 steps, which the server's watchdog ends.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <thread>

#include "common.h"

__global__ void set_cond(cudaGraphConditionalHandle h, const int *value) { cudaGraphSetConditional(h, *value); }

__global__ void add(int *p, int v) { atomicAdd(p, v); }

// WHILE body: one step of a countdown; the loop goes on while the counter is above 0.
__global__ void countdown(cudaGraphConditionalHandle h, int *counter, int *steps) {
    int c = --*counter;
    ++*steps;
    cudaGraphSetConditional(h, c > 0);
}

static cudaGraphNode_t add_kernel(cudaGraph_t g, const cudaGraphNode_t *deps, size_t nd, void *fn, void **args) {
    cudaKernelNodeParams p = {};
    p.func = fn;
    p.gridDim = dim3(1);
    p.blockDim = dim3(1);
    p.kernelParams = args;
    cudaGraphNode_t n;
    CHECK(cudaGraphAddKernelNode(&n, g, deps, nd, &p));
    return n;
}

static cudaGraphNode_t add_cond(cudaGraph_t g, const cudaGraphNode_t *deps, size_t nd, cudaGraphConditionalHandle h,
                                cudaGraphConditionalNodeType type, unsigned size, cudaGraph_t **bodies) {
    cudaGraphNodeParams p = {};
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = h;
    p.conditional.type = type;
    p.conditional.size = size;
    cudaGraphNode_t n;
    CHECK(cudaGraphAddNode(&n, g, deps, nullptr, nd, &p));
    *bodies = p.conditional.phGraph_out;
    return n;
}

static int get(const int *d) {
    int h;
    CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    return h;
}
static void put(int *d, int v) { CHECK(cudaMemcpy(d, &v, sizeof v, cudaMemcpyHostToDevice)); }

static void pause_line() {
    char buf[8];
    std::fflush(stdout);
    if (!std::fgets(buf, sizeof buf, stdin)) std::exit(2);
}

int main(int argc, char **argv) {
    int *flag, *acc, *counter, *steps;
    CHECK(cudaMalloc(&flag, sizeof(int)));
    CHECK(cudaMalloc(&acc, sizeof(int)));
    CHECK(cudaMalloc(&counter, sizeof(int)));
    CHECK(cudaMalloc(&steps, sizeof(int)));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));

    // IF/ELSE: set_cond copies *flag into the handle; body 0 adds 1, body 1 (else) adds 100.
    {
        cudaGraph_t g;
        CHECK(cudaGraphCreate(&g, 0));
        cudaGraphConditionalHandle h;
        CHECK(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
        void *a1[] = {&h, &flag};
        cudaGraphNode_t k = add_kernel(g, nullptr, 0, (void *)set_cond, a1);
        cudaGraph_t *bodies;
        add_cond(g, &k, 1, h, cudaGraphCondTypeIf, 2, &bodies);
        int one = 1, hundred = 100;
        void *b0[] = {&acc, &one}, *b1[] = {&acc, &hundred};
        add_kernel(bodies[0], nullptr, 0, (void *)add, b0);
        add_kernel(bodies[1], nullptr, 0, (void *)add, b1);
        // a body belongs to its node: cudaGraphDestroy refuses it
        std::printf("destroy_body=%d\n", (int)cudaGraphDestroy(bodies[0]));
        cudaGraphExec_t x;
        CHECK(cudaGraphInstantiate(&x, g, 0));
        put(acc, 0);
        int seq[] = {1, 0, 7, 0, 0};
        for (int v : seq) {
            put(flag, v);
            CHECK(cudaGraphLaunch(x, s));
            CHECK(cudaStreamSynchronize(s));
        }
        std::printf("if_else=%d\n", get(acc));  // 2 taken (1, 7), 3 else: 2 + 300
        CHECK(cudaGraphExecDestroy(x));
        CHECK(cudaGraphDestroy(g));
    }

    // IF without ELSE, and a SWITCH of three bodies nested in the IF's body
    {
        cudaGraph_t g;
        CHECK(cudaGraphCreate(&g, 0));
        cudaGraphConditionalHandle h, hs;
        CHECK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
        cudaGraph_t *bodies;
        add_cond(g, nullptr, 0, h, cudaGraphCondTypeIf, 1, &bodies);
        CHECK(cudaGraphConditionalHandleCreate(&hs, bodies[0], 0, 0));
        void *a1[] = {&hs, &flag};
        cudaGraphNode_t k = add_kernel(bodies[0], nullptr, 0, (void *)set_cond, a1);
        cudaGraph_t *cases;
        add_cond(bodies[0], &k, 1, hs, cudaGraphCondTypeSwitch, 3, &cases);
        int v[3] = {10, 20, 40};
        void *c0[] = {&acc, &v[0]}, *c1[] = {&acc, &v[1]}, *c2[] = {&acc, &v[2]};
        add_kernel(cases[0], nullptr, 0, (void *)add, c0);
        add_kernel(cases[1], nullptr, 0, (void *)add, c1);
        add_kernel(cases[2], nullptr, 0, (void *)add, c2);
        cudaGraphExec_t x;
        CHECK(cudaGraphInstantiate(&x, g, 0));
        put(acc, 0);
        int seq[] = {2, 0, 5, 1};  // 5 matches no body
        for (int w : seq) {
            put(flag, w);
            CHECK(cudaGraphLaunch(x, s));
        }
        CHECK(cudaStreamSynchronize(s));
        std::printf("switch=%d\n", get(acc));  // 40 + 10 + 0 + 20
        CHECK(cudaGraphExecDestroy(x));
        CHECK(cudaGraphDestroy(g));
    }

    // WHILE: the default value 1 (cudaGraphCondAssignDefault) enters the loop at each launch; the body counts
    // down to 0.
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle h;
    CHECK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
    cudaGraph_t *bodies;
    cudaGraphNode_t w = add_cond(g, nullptr, 0, h, cudaGraphCondTypeWhile, 1, &bodies);
    void *a[] = {&h, &counter, &steps};
    add_kernel(bodies[0], nullptr, 0, (void *)countdown, a);
    int two = 2;
    void *after[] = {&steps, &two};
    add_kernel(g, &w, 1, (void *)add, after);  // runs once the loop is over
    cudaGraphExec_t x;
    CHECK(cudaGraphInstantiate(&x, g, 0));
    put(steps, 0);
    put(counter, 10);
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    int first = get(steps), left = get(counter);
    put(counter, 3);
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    std::printf("while=%d,%d,%d\n", first, left, get(steps));  // 12,0,17

    // a clone runs the same loop; a body filled by stream capture (cudaStreamBeginCaptureToGraph) works too
    {
        cudaGraph_t c;
        CHECK(cudaGraphClone(&c, g));
        cudaGraphExec_t xc;
        CHECK(cudaGraphInstantiate(&xc, c, 0));
        CHECK(cudaGraphDestroy(c));  // the executable graph keeps what it needs (the handle's memory too)
        put(counter, 4);
        put(steps, 0);
        CHECK(cudaGraphLaunch(xc, s));
        CHECK(cudaStreamSynchronize(s));
        int cloned = get(steps);
        CHECK(cudaGraphExecDestroy(xc));

        cudaGraph_t g2;
        CHECK(cudaGraphCreate(&g2, 0));
        cudaGraphConditionalHandle h2;
        CHECK(cudaGraphConditionalHandleCreate(&h2, g2, 1, cudaGraphCondAssignDefault));
        cudaGraph_t *b2;
        add_cond(g2, nullptr, 0, h2, cudaGraphCondTypeWhile, 1, &b2);
        cudaStream_t cs;
        CHECK(cudaStreamCreate(&cs));
        CHECK(cudaStreamBeginCaptureToGraph(cs, b2[0], nullptr, nullptr, 0, cudaStreamCaptureModeGlobal));
        countdown<<<1, 1, 0, cs>>>(h2, counter, steps);
        CHECK(cudaStreamEndCapture(cs, nullptr));
        cudaGraphExec_t x2;
        CHECK(cudaGraphInstantiate(&x2, g2, 0));
        put(counter, 3);
        put(steps, 0);
        CHECK(cudaGraphLaunch(x2, s));
        CHECK(cudaStreamSynchronize(s));
        std::printf("clone=%d\ncaptured=%d\n", cloned, get(steps));  // 4 steps and +2 after the loop; 3 steps
        CHECK(cudaGraphExecDestroy(x2));
        CHECK(cudaGraphDestroy(g2));
        CHECK(cudaStreamDestroy(cs));
        put(steps, 17);  // as the modes below expect
    }

    // the stream held by a host function when the graph is launched: the server queues the conditional node
    // and runs its loop when the stream gets there
    {
        static std::atomic<int> release{0};
        put(counter, 3);
        put(steps, 0);
        CHECK(cudaLaunchHostFunc(s, [](void *) { while (!release.load()) std::this_thread::yield(); }, nullptr));
        CHECK(cudaGraphLaunch(x, s));
        cudaStream_t peek;  // s is held: read through a non-blocking stream (the legacy one would wait for s)
        CHECK(cudaStreamCreateWithFlags(&peek, cudaStreamNonBlocking));
        int seen = -1;
        CHECK(cudaMemcpyAsync(&seen, steps, 4, cudaMemcpyDeviceToHost, peek));
        CHECK(cudaStreamSynchronize(peek));
        release = 1;
        CHECK(cudaStreamSynchronize(s));
        std::printf("held=%d,%d\n", seen, get(steps));  // 0 while held, then 3 steps and +2
        CHECK(cudaStreamDestroy(peek));
        put(steps, 17);
    }

    if (argc > 1 && std::strcmp(argv[1], "count") == 0) {
        put(counter, 0);  // every launch: one step (the counter goes below 0)
        std::printf("phase=ready\n");
        pause_line();
        for (int i = 0; i < 20; i++) CHECK(cudaGraphLaunch(x, s));
        CHECK(cudaStreamSynchronize(s));
        std::printf("phase=launched\n");
        pause_line();
        std::printf("count_steps=%d\n", get(steps) - 17);  // 20 launches of one step and +2: 60
        return 0;
    }

    if (argc > 1 && std::strcmp(argv[1], "forever") == 0) {  // the loop outlives the server's watchdog
        put(counter, 1 << 30);
        CHECK(cudaGraphLaunch(x, s));
        std::printf("forever=%d\n", (int)cudaStreamSynchronize(s));
        return 0;
    }

    // errors
    cudaGraphConditionalHandle bad;
    std::printf("bad_flags=%d\n", (int)cudaGraphConditionalHandleCreate(&bad, g, 0, 2));
    std::printf("null_graph=%d\n", (int)cudaGraphConditionalHandleCreate(&bad, nullptr, 0, 0));
    cudaGraph_t other;
    CHECK(cudaGraphCreate(&other, 0));
    cudaGraphNodeParams p = {};
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = h;  // made for g, not for other
    p.conditional.type = cudaGraphCondTypeIf;
    p.conditional.size = 1;
    cudaGraphNode_t n;
    std::printf("foreign_handle=%d\n", (int)cudaGraphAddNode(&n, other, nullptr, nullptr, 0, &p));
    p.conditional.type = cudaGraphCondTypeWhile;
    p.conditional.size = 2;
    std::printf("while_two_bodies=%d\n", (int)cudaGraphAddNode(&n, g, nullptr, nullptr, 0, &p));
    // a host node in a body: CUDA allows only kernels, memsets, device copies, child graphs, conditionals
    p.conditional.size = 1;
    CHECK(cudaGraphAddNode(&n, g, nullptr, nullptr, 0, &p));
    cudaHostNodeParams hp = {};
    hp.fn = [](void *) {};
    cudaGraphNode_t hn;
    CHECK(cudaGraphAddHostNode(&hn, p.conditional.phGraph_out[0], nullptr, 0, &hp));
    cudaGraphExec_t x2;
    std::printf("host_in_body=%d\n", (int)cudaGraphInstantiate(&x2, g, 0));
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaGraphDestroy(other));
    std::printf("done=1\n");
    return 0;
}
