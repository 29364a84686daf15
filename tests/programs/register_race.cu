// Registering and unregistering host memory loses no write by other threads. CUDA Runtime API, cudaHostRegister
// "Page-locks the memory range specified by ptr and size and maps it for the device(s)": the range (and the
// rest of its pages) stays the application's memory, so what other threads write to it meanwhile must stay
// written. gpushim moves those pages into the emulator's memory (shim/api_registered.c), which must not drop a
// write made during the move. Prints key=value lines.
// usage: register_race race ITERATIONS [WRITERS]  writer threads (2) check their slots while the main thread registers
//        register_race own_handler       the application's SIGSEGV handler still gets its own faults
//        register_race crash             a plain segfault still kills with SIGSEGV
//        register_race stack             the caller's own stack registered
#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

#include "common.h"

constexpr int kWriters = 2;
constexpr int kSlots = 1024;              // per writer
constexpr size_t kBytes = 1 << 20;        // the registered range: not page aligned, neighbours on its pages
constexpr int kStride = 512 / sizeof(long); // slots 512 bytes apart: the writers' slots cover all its pages
// (a large range: the old copy-then-remap lost writes made during the copy, and a longer copy shows it more often)
static std::atomic<bool> stop{false};
static std::atomic<long> lost{0};

__global__ void gather(const long *p, long *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = p[i * kStride];
}

// Writer w owns slots w, w + kWriters, ...: it checks each still holds what it wrote last, then writes the next
// number. last[] is the writer's own memory, away from the registered pages.
static void writer(volatile long *slots, long *last, int w) {
    long seq = 0;
    while (!stop.load(std::memory_order_relaxed)) {
        for (int k = 0; k < kSlots; k++) {
            int i = (k * kWriters + w) * kStride;
            if (slots[i] != last[k]) lost.fetch_add(1);
            last[k] = ++seq;
            slots[i] = last[k];
        }
    }
}

static int race(int iterations, int writers) {
    char *block = nullptr;
    if (posix_memalign((void **)&block, 4096, kBytes + 2 * 4096)) return 1;
    std::memset(block, 0, kBytes + 2 * 4096);
    long *slots = (long *)(block + 64); // the writers' slots lie on all the range's pages, the neighbours' too
    const int n = kWriters * kSlots;
    long *last[kWriters];
    std::thread threads[kWriters];
    for (int w = 0; w < kWriters; w++) {
        last[w] = (long *)std::calloc(kSlots, sizeof(long));
        if (w < writers) threads[w] = std::thread(writer, slots, last[w], w);
    }
    void *range = block + 100;
    for (int i = 0; i < iterations; i++) {
        CHECK(cudaHostRegister(range, kBytes, cudaHostRegisterMapped));
        CHECK(cudaHostUnregister(range));
    }
    // once more registered while the writers run, then a kernel reads the slots through the device pointer
    CHECK(cudaHostRegister(range, kBytes, cudaHostRegisterMapped));
    stop = true;
    for (auto &t : threads)
        if (t.joinable()) t.join();
    long final_errors = 0;
    for (int w = 0; w < kWriters; w++)
        for (int k = 0; k < kSlots; k++) final_errors += slots[(k * kWriters + w) * kStride] != last[w][k];
    char *d = nullptr;
    CHECK(cudaHostGetDevicePointer((void **)&d, range, 0));
    long *dslots = (long *)(d + ((char *)slots - (char *)range)), *dout = nullptr;
    CHECK(cudaMalloc(&dout, n * sizeof(long)));
    gather<<<(n + 255) / 256, 256>>>(dslots, dout, n);
    long *out = (long *)std::malloc(n * sizeof(long));
    CHECK(cudaMemcpy(out, dout, n * sizeof(long), cudaMemcpyDeviceToHost));
    long kernel_errors = 0;
    for (int w = 0; w < kWriters; w++)
        for (int k = 0; k < kSlots; k++) kernel_errors += out[k * kWriters + w] != last[w][k];
    CHECK(cudaHostUnregister(range));
    long writes = 0;
    for (int w = 0; w < kWriters; w++) writes += last[w][kSlots - 1];
    std::printf("iterations=%d writes=%ld lost=%ld final_errors=%ld kernel_errors=%ld\n", iterations, writes,
                lost.load(), final_errors, kernel_errors);
    return 0;
}

static sigjmp_buf jump;
static volatile sig_atomic_t faults;
static void *volatile fault_addr;
static void own(int, siginfo_t *si, void *) {
    faults = faults + 1;
    fault_addr = si->si_addr;
    siglongjmp(jump, 1);
}

// Faults on a PROT_NONE page reach the application's own handler, while registrations move pages (a thread
// faulting in a loop) and after.
static int own_handler() {
    struct sigaction sa = {};
    sa.sa_sigaction = own;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, nullptr);
    char *none = (char *)mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *buf = (char *)std::malloc(8 * 4096);
    std::atomic<int> tries{0};
    std::thread mover([&] {
        for (int i = 0; i < 100; i++) {
            CHECK(cudaHostRegister(buf, 8 * 4096, cudaHostRegisterMapped));
            CHECK(cudaHostUnregister(buf));
        }
    });
    // this thread faults meanwhile: each fault must reach the handler (never lost, never the move's)
    sigset_t none_blocked;
    sigemptyset(&none_blocked);
    int reached = 0;
    for (int i = 0; i < 2000; i++) {
        tries++;
        if (sigsetjmp(jump, 1) == 0) none[i % 4096] = 1;
        else reached += fault_addr == none + i % 4096;
    }
    mover.join();
    CHECK(cudaHostRegister(buf, 8 * 4096, cudaHostRegisterMapped));
    CHECK(cudaHostUnregister(buf));
    struct sigaction now = {};
    sigaction(SIGSEGV, nullptr, &now);
    int after = 0;
    if (sigsetjmp(jump, 1) == 0) none[7] = 1;
    else after = fault_addr == none + 7;
    std::printf("faults=%d reached=%d of=%d handler_kept=%d after=%d\n", (int)faults, reached, tries.load(),
                (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == own, after);
    return 0;
}

// With no handler of the application's, a segfault kills with SIGSEGV, also while registrations move pages.
static int crash() {
    char *buf = (char *)std::malloc(8 * 4096);
    std::thread mover([&] {
        for (;;) {
            CHECK(cudaHostRegister(buf, 8 * 4096, cudaHostRegisterMapped));
            CHECK(cudaHostUnregister(buf));
        }
    });
    mover.detach();
    usleep(200000);
    std::printf("faulting\n");
    std::fflush(stdout);
    *(volatile int *)mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) = 1;
    std::printf("survived\n");
    return 0;
}

__global__ void scale(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = p[i] * 3 + 1;
}

// The caller's own stack: the lowest page of the range also holds the frames of the calls below (the shim's
// own, while it moves the pages), which must keep running.
__attribute__((noinline)) static int stack() {
    volatile int guard_below = 5;
    int buf[3000];
    for (int i = 0; i < 3000; i++) buf[i] = i;
    std::printf("stack_page_shared=%d\n", (uintptr_t)buf % 4096 != 0);
    CHECK(cudaHostRegister(buf, sizeof buf, cudaHostRegisterMapped));
    int *d = nullptr;
    CHECK(cudaHostGetDevicePointer((void **)&d, buf, 0));
    scale<<<(3000 + 255) / 256, 256>>>(d, 3000);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaHostUnregister(buf));
    int errors = 0;
    for (int i = 0; i < 3000; i++) errors += buf[i] != 3 * i + 1;
    std::printf("stack_errors=%d guard=%d\n", errors, (int)guard_below);
    return 0;
}

int main(int argc, char **argv) {
    std::setvbuf(stdout, nullptr, _IONBF, 0);
    CHECK(cudaFree(nullptr));
    const char *mode = argc > 1 ? argv[1] : "race";
    if (!std::strcmp(mode, "race")) return race(argc > 2 ? std::atoi(argv[2]) : 200, argc > 3 ? std::atoi(argv[3]) : kWriters);
    if (!std::strcmp(mode, "own_handler")) return own_handler();
    if (!std::strcmp(mode, "crash")) return crash();
    if (!std::strcmp(mode, "stack")) return stack();
    return 2;
}
