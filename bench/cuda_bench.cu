// The CUDA side of gpushim's benchmark suite (`make bench`): an ordinary CUDA program, built with
// `nvcc -cudart shared`, that bench/run.py runs through gpushim (LD_PRELOAD=libgpushim.so) against a
// Unix-socket server and a TCP-loopback server. It never knows it is remoted.
//
// Each measurement prints one JSON object on a line of stdout:
//   {"bench": "sync", "op": "cudaStreamQuery", "n": 20000, "median_us": ..., "p99_us": ..., ...}
// A call that fails prints {"bench": ..., "error": "..."} and the suite carries on with the next one.
//
// Usage: cuda_bench [-s SYNC] [-a ASYNC] [-k LAUNCHES] [-m MALLOC] [-b BYTES_PER_SIZE] [-z SIZES]
//   -s  iterations of each synchronous round trip (cudaStreamQuery, cudaEventQuery, cudaMemGetInfo)  default 20000
//   -a  asynchronous cudaMemsetAsync calls before one synchronise            default 100000
//   -k  empty kernel launches before one synchronise                         default 100000
//   -r  repetitions of each asynchronous batch (median/p99 over them)         default 3
//   -m  cudaMalloc/cudaFree pairs                                            default 5000
//   -z  comma-separated copy sizes in bytes                                   default 4096,1048576,268435456
//   -b  bytes each copy size moves in total (iterations = max(10, b/size), capped at 20000)  default 1 GiB
//   -w  which parts to run: any of "lsakmc" (local, sync, async, kernels, malloc, copies)  default all
//   -H  host memory for copies: pageable, pinned or both                      default both
//   -D  copy directions: h2d, d2h or both                                     default both
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>
#include <cuda_runtime.h>

__global__ void empty() {}

static double now_us() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

struct Stats {
    size_t n = 0;
    double median = 0, p99 = 0, mean = 0, min = 0, max = 0;
};

// Median (mean of the two middle values for even n) and nearest-rank 99th percentile.
static Stats stats(std::vector<double> v) {
    Stats s;
    s.n = v.size();
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    size_t rank = (size_t)((99 * n + 99) / 100);  // ceil(0.99 n)
    s.p99 = v[(rank ? rank : 1) - 1];
    double sum = 0;
    for (double x : v) sum += x;
    s.mean = sum / n;
    s.min = v.front();
    s.max = v.back();
    return s;
}

static void print_stats(const char *bench, const char *op, const Stats &s, const char *extra = "") {
    std::printf("{\"bench\": \"%s\", \"op\": \"%s\", \"n\": %zu, \"median_us\": %.4f, \"p99_us\": %.4f, "
                "\"mean_us\": %.4f, \"min_us\": %.4f, \"max_us\": %.4f%s}\n",
                bench, op, s.n, s.median, s.p99, s.mean, s.min, s.max, extra);
    std::fflush(stdout);
}

static bool failed(const char *bench, const char *what, cudaError_t e) {
    if (e == cudaSuccess) return false;
    std::printf("{\"bench\": \"%s\", \"error\": \"%s: %s (%d)\"}\n", bench, what, cudaGetErrorName(e), (int)e);
    std::fflush(stdout);
    cudaGetLastError();
    return true;
}

#define TRY(bench, call)                                 \
    do {                                                 \
        if (failed(bench, #call, (call))) return;        \
    } while (0)

// A call the client answers itself (no round trip): the floor of any intercepted call.
static void bench_local(int iters) {
    std::vector<double> t(iters);
    int dev = -1;
    for (int i = 0; i < iters; i++) {
        double t0 = now_us();
        cudaError_t e = cudaGetDevice(&dev);
        t[i] = now_us() - t0;
        if (failed("local", "cudaGetDevice", e)) return;
    }
    print_stats("local", "cudaGetDevice", stats(t));
}

// Synchronous round trips, each call asking the server every time: cudaStreamQuery on the idle legacy stream
// (the goal's call: the server's answer is a table lookup, so this is the per-call path itself), cudaEventQuery
// on a completed event, and cudaMemGetInfo (the server also reads its host-RAM ledger, shared by all sessions).
template <typename F>
static void bench_round_trip(const char *bench, const char *op, int iters, F call) {
    for (int i = 0; i < 100; i++) TRY(bench, call());  // warm-up
    std::vector<double> t(iters);
    for (int i = 0; i < iters; i++) {
        double t0 = now_us();
        cudaError_t e = call();
        t[i] = now_us() - t0;
        if (failed(bench, op, e)) return;
    }
    print_stats(bench, op, stats(t));
}

static void bench_sync(int iters) {
    bench_round_trip("sync", "cudaStreamQuery", iters, [] { return cudaStreamQuery(0); });
    cudaEvent_t ev;
    TRY("sync_event", cudaEventCreate(&ev));
    TRY("sync_event", cudaEventRecord(ev, 0));
    TRY("sync_event", cudaEventSynchronize(ev));
    bench_round_trip("sync_event", "cudaEventQuery", iters, [&] { return cudaEventQuery(ev); });
    cudaEventDestroy(ev);
    size_t fr = 0, total = 0;
    bench_round_trip("sync_meminfo", "cudaMemGetInfo", iters, [&] { return cudaMemGetInfo(&fr, &total); });
}

// The cost of an asynchronous call: `calls` async calls back to back, then one synchronise. Reports the
// per-call issue time (what the application's thread pays per call) and, per batch, the whole batch's
// time including the final synchronise divided by `calls` (the amortised cost of one call).
template <typename F>
static void bench_async_batch(const char *bench, const char *op, int calls, int reps, F issue) {
    for (int i = 0; i < 100 && i < calls; i++)
        if (failed(bench, op, issue())) return;  // warm-up (and a launch's first-time module upload)
    if (failed(bench, "cudaDeviceSynchronize", cudaDeviceSynchronize())) return;
    std::vector<double> per_call, amortised, sync_wait;
    per_call.reserve((size_t)calls * reps);
    for (int r = 0; r < reps; r++) {
        double start = now_us();
        for (int i = 0; i < calls; i++) {
            double t0 = now_us();
            cudaError_t e = issue();
            per_call.push_back(now_us() - t0);
            if (failed(bench, op, e)) return;
        }
        double t_sync = now_us();
        if (failed(bench, "cudaDeviceSynchronize", cudaDeviceSynchronize())) return;
        double end = now_us();
        amortised.push_back((end - start) / calls);
        sync_wait.push_back(end - t_sync);
    }
    Stats a = stats(amortised), w = stats(sync_wait);
    char extra[256];
    std::snprintf(extra, sizeof extra,
                  ", \"calls\": %d, \"reps\": %d, \"amortised_us\": %.4f, \"amortised_max_us\": %.4f, "
                  "\"final_sync_us\": %.4f",
                  calls, reps, a.median, a.max, w.median);
    print_stats(bench, op, stats(per_call), extra);
}

static void bench_async(int calls, int reps) {
    void *d = nullptr;
    TRY("async", cudaMalloc(&d, 4096));
    bench_async_batch("async", "cudaMemsetAsync", calls, reps, [&] { return cudaMemsetAsync(d, 1, 4096, 0); });
    cudaFree(d);
}

static void bench_launch(int calls, int reps) {
    bench_async_batch("launch", "empty<<<1,1>>>", calls, reps, [] {
        empty<<<1, 1>>>();
        return cudaGetLastError();
    });
}

static void bench_malloc(int iters) {
    const size_t bytes = 1 << 20;
    void *p = nullptr;
    for (int i = 0; i < 20; i++) {
        TRY("malloc", cudaMalloc(&p, bytes));
        TRY("malloc", cudaFree(p));
    }
    std::vector<double> t(iters);
    for (int i = 0; i < iters; i++) {
        double t0 = now_us();
        cudaError_t e = cudaMalloc(&p, bytes);
        if (failed("malloc", "cudaMalloc", e)) return;
        e = cudaFree(p);
        t[i] = now_us() - t0;
        if (failed("malloc", "cudaFree", e)) return;
    }
    print_stats("malloc", "cudaMalloc+cudaFree 1 MiB", stats(t));
}

// cudaMemcpy H2D and D2H from pageable (malloc'ed, pre-touched) and pinned (cudaMallocHost) memory.
static void bench_copies(const std::vector<size_t> &sizes, size_t budget, const std::string &hosts,
                         const std::string &dirs) {
    size_t maxsz = 0;
    for (size_t s : sizes) maxsz = std::max(maxsz, s);
    if (!maxsz) return;
    void *dev = nullptr, *pinned = nullptr;
    TRY("copy", cudaMalloc(&dev, maxsz));
    TRY("copy", cudaMemset(dev, 0x5a, maxsz));
    TRY("copy", cudaMallocHost(&pinned, maxsz));
    void *pageable = std::malloc(maxsz);
    if (!pageable) {
        std::printf("{\"bench\": \"copy\", \"error\": \"malloc(%zu) failed\"}\n", maxsz);
        return;
    }
    std::memset(pageable, 0xa5, maxsz);  // touch every page so page faults stay out of the timings
    std::memset(pinned, 0xa5, maxsz);
    for (size_t size : sizes) {
        size_t iters = std::max<size_t>(10, std::min<size_t>(20000, budget / size));
        for (int host_kind = 0; host_kind < 2; host_kind++) {
            if (hosts != "both" && hosts != (host_kind ? "pinned" : "pageable")) continue;
            void *host = host_kind ? pinned : pageable;
            const char *hk = host_kind ? "pinned" : "pageable";
            for (int dir = 0; dir < 2; dir++) {
                if (dirs != "both" && dirs != (dir ? "d2h" : "h2d")) continue;
                cudaMemcpyKind kind = dir ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
                const char *op = dir ? "D2H" : "H2D";
                void *dst = dir ? host : dev;
                const void *src = dir ? dev : host;
                if (failed("copy", op, cudaMemcpy(dst, src, size, kind))) continue;  // warm-up
                if (failed("copy", "cudaDeviceSynchronize", cudaDeviceSynchronize())) continue;
                // call: what cudaMemcpy itself takes. done: until the copy has completed. CUDA completes a
                // D2H copy and an H2D copy from pinned memory before cudaMemcpy returns (docs/semantics.md),
                // so done = call there; an H2D copy from pageable memory may return once the data is taken,
                // before the device holds it, so done also counts a cudaDeviceSynchronize after it.
                // Bandwidth is size / done.
                bool sync_after = !dir && !host_kind;
                std::vector<double> call(iters), done(iters);
                bool ok = true;
                for (size_t i = 0; i < iters && ok; i++) {
                    double t0 = now_us();
                    cudaError_t e = cudaMemcpy(dst, src, size, kind);
                    double t1 = now_us();
                    if (e == cudaSuccess && sync_after) e = cudaDeviceSynchronize();
                    double t2 = now_us();
                    call[i] = t1 - t0;
                    done[i] = t2 - t0;
                    ok = !failed("copy", op, e);
                }
                if (!ok) continue;
                Stats s = stats(done), c = stats(call);
                char name[64], extra[384];
                std::snprintf(name, sizeof name, "%s %s %zu", op, hk, size);
                std::snprintf(extra, sizeof extra,
                              ", \"dir\": \"%s\", \"host\": \"%s\", \"bytes\": %zu, \"gbps_median\": %.4f, "
                              "\"gbps_p99\": %.4f, \"call_median_us\": %.4f, \"call_p99_us\": %.4f",
                              op, hk, size, size / s.median / 1e3, size / s.p99 / 1e3, c.median, c.p99);
                print_stats("copy", name, s, extra);
            }
        }
    }
    std::free(pageable);
    cudaFreeHost(pinned);
    cudaFree(dev);
}

static std::vector<size_t> parse_sizes(const char *s) {
    std::vector<size_t> out;
    std::string str(s);
    size_t pos = 0;
    while (pos <= str.size()) {
        size_t comma = str.find(',', pos);
        std::string tok = str.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (!tok.empty()) out.push_back(std::strtoull(tok.c_str(), nullptr, 0));
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}

int main(int argc, char **argv) {
    int sync_iters = 20000, async_calls = 100000, launches = 100000, reps = 3, malloc_iters = 5000;
    size_t budget = (size_t)1 << 30;
    std::vector<size_t> sizes = {4096, 1 << 20, (size_t)256 << 20};
    std::string which = "lsakmc", hosts = "both", dirs = "both";
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *f = argv[i], *v = argv[i + 1];
        if (!std::strcmp(f, "-s")) sync_iters = std::atoi(v);
        else if (!std::strcmp(f, "-a")) async_calls = std::atoi(v);
        else if (!std::strcmp(f, "-k")) launches = std::atoi(v);
        else if (!std::strcmp(f, "-r")) reps = std::max(1, std::atoi(v));
        else if (!std::strcmp(f, "-m")) malloc_iters = std::atoi(v);
        else if (!std::strcmp(f, "-b")) budget = std::strtoull(v, nullptr, 0);
        else if (!std::strcmp(f, "-z")) sizes = parse_sizes(v);
        else if (!std::strcmp(f, "-w")) which = v;
        else if (!std::strcmp(f, "-H")) hosts = v;
        else if (!std::strcmp(f, "-D")) dirs = v;
        else {
            std::fprintf(stderr, "usage: %s [-s N] [-a N] [-k N] [-r N] [-m N] [-b BYTES] [-z SIZES] [-w lsakmc] "
                         "[-H pageable|pinned|both] [-D h2d|d2h|both]\n",
                         argv[0]);
            return 2;
        }
    }
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDeviceProp prop;
    if (failed("info", "cudaGetDeviceProperties", cudaGetDeviceProperties(&prop, 0))) return 1;
    std::printf("{\"bench\": \"info\", \"device\": \"%s\", \"runtime\": %d}\n", prop.name, rt);
    std::fflush(stdout);
    auto has = [&](char c) { return which.find(c) != std::string::npos; };
    if (has('l')) bench_local(sync_iters);
    if (has('s')) bench_sync(sync_iters);
    if (has('a')) bench_async(async_calls, reps);
    if (has('k')) bench_launch(launches, reps);
    if (has('m')) bench_malloc(malloc_iters);
    if (has('c')) bench_copies(sizes, budget, hosts, dirs);
    return 0;
}
