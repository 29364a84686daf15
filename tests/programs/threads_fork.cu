// Many application threads calling at once, each with its own current device and last error; then a
// forked child that opens its own session.
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>
#include "common.h"

static void worker(int id, int *ok) {
    *ok = 0;
    int ndev = 0;
    CHECK(cudaGetDeviceCount(&ndev));
    CHECK(cudaSetDevice(id % ndev));
    const size_t n = 1 << 16;
    std::vector<int> h(n), back(n);
    for (int iter = 0; iter < 20; iter++) {
        for (size_t i = 0; i < n; i++) h[i] = id * 1000003 + iter * 7 + (int)i;
        int *d;
        CHECK(cudaMalloc(&d, n * sizeof(int)));
        CHECK(cudaMemcpy(d, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(back.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
        CHECK(cudaFree(d));
        for (size_t i = 0; i < n; i++) if (back[i] != h[i]) return;
        if (cudaSetDevice(999) != cudaErrorInvalidDevice) return;
        if (cudaGetLastError() != cudaErrorInvalidDevice) return;  // this thread's own last error
        int cur = -1;
        CHECK(cudaGetDevice(&cur));
        if (cur != id % ndev) return;
    }
    *ok = 1;
}

int main() {
    const int T = 8;
    std::vector<std::thread> ts;
    int ok[T];
    for (int i = 0; i < T; i++) ts.emplace_back(worker, i, &ok[i]);
    for (auto &t : ts) t.join();
    int good = 0;
    for (int i = 0; i < T; i++) good += ok[i];
    std::printf("threads_ok=%d/%d\n", good, T);

    int *d;
    CHECK(cudaMalloc(&d, 4096));
    CHECK(cudaMemset(d, 0x42, 4096));
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        // The child has a session of its own: it allocates and copies on its own.
        int *c;
        CHECK(cudaMalloc(&c, 4096));
        CHECK(cudaMemset(c, 0x17, 4096));
        unsigned char b[16];
        CHECK(cudaMemcpy(b, c, 16, cudaMemcpyDeviceToHost));
        std::printf("child=%d\n", b[3]);
        std::fflush(stdout);
        _exit(b[3] == 0x17 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    unsigned char b[16];
    CHECK(cudaMemcpy(b, d, 16, cudaMemcpyDeviceToHost));
    std::printf("parent=%d child_status=%d\n", b[0], WEXITSTATUS(status));
    std::printf("%s\n", good == T && b[0] == 0x42 && WEXITSTATUS(status) == 0 ? "OK" : "FAILED");
    return 0;
}
