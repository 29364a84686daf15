// Registered host memory that kernels reach. CUDA Runtime API, cudaHostRegister: cudaHostRegisterMapped "Maps
// the allocation into the CUDA address space. The device pointer to the memory may be obtained by calling
// cudaHostGetDevicePointer()"; the memory "must be unregistered with cudaHostUnregister()"; an already
// registered range is cudaErrorHostMemoryAlreadyRegistered. Driver API, cuMemHostRegister: the device pointer
// matches the host pointer only where CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM is non-zero
// (the emulator reports 0: the device address is distinct, "Unified Addressing", "Disjoint Addressing").
// Prints key=value lines. usage: registered [tcp]
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

__global__ void scale(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = p[i] * 3 + 1;
}

// Whether the page holding p is private memory (/proc/self/maps: a 'p' mapping of no file)
static int private_page(const void *p) {
    FILE *f = std::fopen("/proc/self/maps", "r");
    char line[512];
    int priv = 0;
    while (f && std::fgets(line, sizeof line, f)) {
        unsigned long a, b, inode;
        char perms[8];
        if (std::sscanf(line, "%lx-%lx %7s %*s %*s %lu", &a, &b, perms, &inode) == 4 && a <= (unsigned long)p &&
            (unsigned long)p < b)
            priv = perms[3] == 'p' && inode == 0;
    }
    if (f) std::fclose(f);
    return priv;
}

int main(int argc, char **argv) {
    const bool tcp = argc > 1 && !std::strcmp(argv[1], "tcp");
    std::setvbuf(stdout, nullptr, _IONBF, 0);
    int attr = -1;
    CHECK(cudaDeviceGetAttribute(&attr, cudaDevAttrCanUseHostPointerForRegisteredMem, 0));
    std::printf("can_use_host_pointer=%d\n", attr);

    // malloc'd memory, not page aligned, with the application's own data on the same pages before and after
    const int n = 2000;
    char *block = nullptr;
    if (posix_memalign((void **)&block, 4096, 3 * 4096)) return 1;
    std::memset(block, 'b', 3 * 4096);
    int *h = (int *)(block + 40); // bytes [40, 8040): pages 0 and 1
    for (int i = 0; i < n; i++) h[i] = i;
    CHECK(cudaHostRegister(h, n * sizeof(int), cudaHostRegisterMapped));
    int *d = nullptr;
    if (tcp) {
        // over TCP the server cannot reach the client's memory: pinned, but no device pointer, with the reason
        EXPECT_ERR(cudaHostGetDevicePointer((void **)&d, h, 0), cudaErrorNotSupported);
        CHECK(cudaHostUnregister(h));
        std::printf("tcp=refused\n");
        std::free(block);
        return 0;
    }
    unsigned flags = 0;
    CHECK(cudaHostGetFlags(&flags, h));
    std::printf("flags=%u\n", flags);
    int kept = 1;
    for (int i = 0; i < n; i++) kept &= h[i] == i;
    std::printf("data_kept=%d neighbours_kept=%d\n", kept, block[0] == 'b' && block[39] == 'b' && block[8040] == 'b');
    CHECK(cudaHostGetDevicePointer((void **)&d, h, 0));
    int *d5 = nullptr;
    CHECK(cudaHostGetDevicePointer((void **)&d5, h + 5, 0));
    std::printf("same_pointer=%d interior=%d\n", d == h, d5 == d + 5);

    // a kernel reads and writes through the device pointer; the host sees its writes after synchronising
    scale<<<(n + 255) / 256, 256>>>(d, n);
    CHECK(cudaDeviceSynchronize());
    int errors = 0;
    for (int i = 0; i < n; i++) errors += h[i] != i * 3 + 1;
    std::printf("kernel_rw_errors=%d\n", errors);
    // the host writes, the kernel sees it
    for (int i = 0; i < n; i++) h[i] = 7 * i;
    block[39] = 'x'; // a neighbour on the same page, written meanwhile
    scale<<<(n + 255) / 256, 256>>>(d, n);
    CHECK(cudaDeviceSynchronize());
    errors = 0;
    for (int i = 0; i < n; i++) errors += h[i] != 21 * i + 1;
    std::printf("host_write_errors=%d neighbour=%c\n", errors, block[39]);
    // copies take the device pointer as device memory
    int back[4] = {0, 0, 0, 0};
    CHECK(cudaMemcpy(back, d + 1, sizeof back, cudaMemcpyDeviceToHost));
    std::printf("dtoh=%d\n", back[0] == 22 && back[3] == 85);

    // the same range again, or one overlapping it: already registered
    EXPECT_ERR(cudaHostRegister(h, 64, cudaHostRegisterMapped), cudaErrorHostMemoryAlreadyRegistered);
    EXPECT_ERR(cudaHostRegister(h + n - 2, 64, cudaHostRegisterMapped), cudaErrorHostMemoryAlreadyRegistered);
    // a second registration on the first one's pages shares them
    int *h2 = (int *)(block + 8100);
    h2[0] = 5;
    CHECK(cudaHostRegister(h2, 64, cudaHostRegisterMapped));
    int *d2 = nullptr;
    CHECK(cudaHostGetDevicePointer((void **)&d2, h2, 0));
    scale<<<1, 16>>>(d2, 16);
    CHECK(cudaDeviceSynchronize());
    std::printf("shared_pages=%d\n", h2[0] == 16 && h[n - 1] == 21 * (n - 1) + 1);
    std::printf("moved=%d\n", !private_page(h));
    // one that covers some of those pages and more: pinned, not mapped (said why); the others are unharmed
    int *h3 = (int *)(block + 8176);
    CHECK(cudaHostRegister(h3, 64, cudaHostRegisterMapped));
    EXPECT_ERR(cudaHostGetDevicePointer((void **)&d5, h3, 0), cudaErrorNotSupported);
    CHECK(cudaHostUnregister(h3));
    std::printf("partial_overlap_refused=%d\n", !private_page(h) && h2[0] == 16);

    // a forked child gets a private copy of the pages, as of any private memory: its writes stay its own
    pid_t child = fork();
    if (child == 0) {
        h[0] = -1;
        block[39] = 'c';
        _exit(private_page(h) ? 0 : 3);
    }
    int status = -1;
    waitpid(child, &status, 0);
    std::printf("fork_child_private=%d fork_parent_kept=%d\n", WIFEXITED(status) && WEXITSTATUS(status) == 0,
                h[0] == 1 && block[39] == 'x');

    // unregistering keeps the data, and the pages stay the application's
    CHECK(cudaHostUnregister(h));
    CHECK(cudaHostUnregister(h2));
    errors = 0;
    for (int i = 0; i < n; i++) errors += h[i] != 21 * i + 1;
    h[0] = 99;
    std::printf("after_unregister_errors=%d writable=%d neighbour=%c h2=%d private=%d\n", errors, h[0] == 99, block[39],
                h2[0], private_page(h));
    EXPECT_ERR(cudaHostGetDevicePointer((void **)&d, h, 0), cudaErrorInvalidValue);
    EXPECT_ERR(cudaHostUnregister(h), cudaErrorHostMemoryNotRegistered);
    // registered again after unregistering: mapped anew
    CHECK(cudaHostRegister(h, n * sizeof(int), cudaHostRegisterMapped));
    CHECK(cudaHostGetDevicePointer((void **)&d, h, 0));
    scale<<<1, 1>>>(d, 1);
    CHECK(cudaDeviceSynchronize());
    std::printf("reregistered=%d\n", h[0] == 298);
    // the device alias is not host memory of its own: cudaFreeHost and cudaHostUnregister refuse it
    EXPECT_ERR(cudaFreeHost(d), cudaErrorInvalidValue);
    EXPECT_ERR(cudaHostUnregister(d), cudaErrorHostMemoryNotRegistered);
    CHECK(cudaHostUnregister(h));
    std::free(block);

    // registered without cudaHostRegisterMapped: pinned only, no device pointer (said why)
    int *p = (int *)std::malloc(4096);
    CHECK(cudaHostRegister(p, 4096, cudaHostRegisterDefault));
    EXPECT_ERR(cudaHostGetDevicePointer((void **)&d, p, 0), cudaErrorNotSupported);
    CHECK(cudaHostUnregister(p));
    std::free(p);

    // a file mapping is not moved (it would lose its file): pinned, no device pointer
    char path[] = "/tmp/gpushim-registered-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || ftruncate(fd, 4096)) return 1;
    unlink(path);
    char *f = (char *)mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    f[0] = 'f';
    CHECK(cudaHostRegister(f, 4096, cudaHostRegisterMapped));
    EXPECT_ERR(cudaHostGetDevicePointer((void **)&d, f, 0), cudaErrorNotSupported);
    CHECK(cudaHostUnregister(f));
    char c = 0;
    std::printf("file_kept=%d\n", pread(fd, &c, 1, 0) == 1 && c == 'f');
    munmap(f, 4096);
    close(fd);
    (void)cudaGetLastError();
    std::printf("done=1\n");
    return 0;
}
