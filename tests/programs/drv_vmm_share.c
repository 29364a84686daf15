/* Driver API virtual memory management beyond create/map (CUDA Driver API reference, "Virtual Memory
 * Management"): cuMemGetAccess, cuMemRetainAllocationHandle, and sharing physical memory between two
 * processes with cuMemExportToShareableHandle / cuMemImportFromShareableHandle as a POSIX file descriptor
 * (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; the descriptor passes between the processes over a Unix socket,
 * SCM_RIGHTS), with the documented refusals. Two processes: the parent forks before cuInit, so each has its
 * own session. usage: drv_vmm_share */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "drv_common.h"

#define N 4096 /* ints written and read back */

static CUmemAllocationProp device_prop(CUdevice dev, int shareable) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    if (shareable) prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}

static CUdeviceptr map_rw(CUmemGenericAllocationHandle h, size_t g, CUdevice dev) {
    CUdeviceptr va;
    CU_CHECK(cuMemAddressReserve(&va, g, 0, 0, 0));
    CU_CHECK(cuMemMap(va, g, 0, h, 0));
    CUmemAccessDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = dev;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU_CHECK(cuMemSetAccess(va, g, &desc, 1));
    return va;
}

static void send_fd(int sock, int fd) {
    char byte = 'f';
    struct iovec iov = {&byte, 1};
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    REQUIRE(sendmsg(sock, &m, 0) == 1);
}

static int recv_fd(int sock) {
    char byte;
    struct iovec iov = {&byte, 1};
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    REQUIRE(recvmsg(sock, &m, 0) == 1);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    REQUIRE(c && c->cmsg_type == SCM_RIGHTS);
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

/* The importing process: maps the memory it was sent, checks the exporter's values, adds 1 to each. */
static int child(int sock) {
    CUdevice dev;
    use_primary_context(&dev);
    int fd = recv_fd(sock);
    CUmemGenericAllocationHandle h;
    CU_CHECK(cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd); /* the import holds the memory, not the descriptor */
    CUmemAllocationProp got;
    CU_CHECK(cuMemGetAllocationPropertiesFromHandle(&got, h));
    REQUIRE(got.location.id == dev && (got.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    size_t g = 0;
    CUmemAllocationProp prop = device_prop(dev, 1);
    CU_CHECK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUdeviceptr va = map_rw(h, g, dev);
    static int v[N];
    CU_CHECK(cuMemcpyDtoH(v, va, sizeof v));
    for (int i = 0; i < N; i++)
        if (v[i] != 3 * i) { fprintf(stderr, "importer read v[%d] = %d\n", i, v[i]); return 1; }
    for (int i = 0; i < N; i++) v[i] += 1;
    CU_CHECK(cuMemcpyHtoD(va, v, sizeof v));
    CU_CHECK(cuCtxSynchronize());
    CU_CHECK(cuMemUnmap(va, g));
    CU_CHECK(cuMemRelease(h));
    CU_CHECK(cuMemAddressFree(va, g));
    printf("importer read the exporter's memory and wrote it\n");
    fflush(stdout);
    char done = 'd';
    REQUIRE(write(sock, &done, 1) == 1);
    return 0;
}

int main(void) {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        _exit(child(sv[1]));
    }
    close(sv[1]);
    CUdevice dev;
    use_primary_context(&dev);
    int posix = 0;
    CU_CHECK(cuDeviceGetAttribute(&posix, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev));
    REQUIRE(posix == 1); /* one server over a Unix socket */
    CUmemAllocationProp prop = device_prop(dev, 1);
    size_t g = 0;
    CU_CHECK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));

    /* A plain allocation was not requested as shareable: exporting it is refused. */
    CUmemAllocationProp plain_prop = device_prop(dev, 0);
    CUmemGenericAllocationHandle plain;
    CU_CHECK(cuMemCreate(&plain, g, &plain_prop, 0));
    int fd = -1;
    CU_EXPECT(cuMemExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
              CUDA_ERROR_INVALID_VALUE);
    CU_CHECK(cuMemRelease(plain));

    CUmemGenericAllocationHandle h;
    CU_CHECK(cuMemCreate(&h, g, &prop, 0));
    CUdeviceptr va = map_rw(h, g, dev);

    /* cuMemGetAccess: the flags cuMemSetAccess gave this device; any address of the mapping; an address
     * nothing is mapped at is an invalid value. */
    CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
    unsigned long long flags = 99;
    CU_CHECK(cuMemGetAccess(&flags, &loc, va + 12345));
    REQUIRE(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CUdeviceptr hole;
    CU_CHECK(cuMemAddressReserve(&hole, g, 0, 0, 0));
    CU_EXPECT(cuMemGetAccess(&flags, &loc, hole), CUDA_ERROR_INVALID_VALUE);
    CU_EXPECT(cuMemGetAccess(NULL, &loc, va), CUDA_ERROR_INVALID_VALUE);
    printf("access %llu\n", flags);

    /* cuMemRetainAllocationHandle: any address in the mapping gives the handle mapped there, one more
     * reference to release; an unmapped address is an invalid value. */
    CUmemGenericAllocationHandle r;
    CU_CHECK(cuMemRetainAllocationHandle(&r, (void *)(va + 100)));
    REQUIRE(r == h);
    CU_EXPECT(cuMemRetainAllocationHandle(&r, (void *)hole), CUDA_ERROR_INVALID_VALUE);
    CU_CHECK(cuMemRelease(h)); /* the creation's reference: the retained one keeps the handle usable */
    CUmemAllocationProp got;
    CU_CHECK(cuMemGetAllocationPropertiesFromHandle(&got, h));
    REQUIRE(got.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);

    static int v[N];
    for (int i = 0; i < N; i++) v[i] = 3 * i;
    CU_CHECK(cuMemcpyHtoD(va, v, sizeof v));

    /* Handle types other than a POSIX descriptor are not emulated (NOT_SUPPORTED, logged). */
    char fabric[64];
    CU_EXPECT(cuMemExportToShareableHandle(fabric, h, CU_MEM_HANDLE_TYPE_FABRIC, 0), CUDA_ERROR_NOT_SUPPORTED);
    CU_EXPECT(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1),
              CUDA_ERROR_INVALID_VALUE); /* flags: must be 0 */

    /* A descriptor that no export made is refused: a pipe, an ordinary memfd whose size is not sealed. */
    int pfd[2];
    REQUIRE(pipe(pfd) == 0);
    CUmemGenericAllocationHandle bad;
    CU_EXPECT(cuMemImportFromShareableHandle(&bad, (void *)(intptr_t)pfd[0], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              CUDA_ERROR_INVALID_VALUE);
    int mfd = memfd_create("not-exported", 0);
    REQUIRE(mfd >= 0 && ftruncate(mfd, (off_t)g) == 0);
    CU_EXPECT(cuMemImportFromShareableHandle(&bad, (void *)(intptr_t)mfd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              CUDA_ERROR_INVALID_VALUE);
    close(mfd);
    close(pfd[0]);
    close(pfd[1]);

    /* Export, send the descriptor to the other process, which imports and writes the memory. */
    CU_CHECK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    REQUIRE(fd >= 0);
    send_fd(sv[0], fd);
    close(fd);
    char done = 0;
    REQUIRE(read(sv[0], &done, 1) == 1 && done == 'd');
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CU_CHECK(cuMemcpyDtoH(v, va, sizeof v));
    for (int i = 0; i < N; i++)
        if (v[i] != 3 * i + 1) { fprintf(stderr, "exporter read v[%d] = %d after the import\n", i, v[i]); return 1; }
    printf("exporter sees the importer's writes\n");

    CU_CHECK(cuMemUnmap(va, g));
    CU_CHECK(cuMemRelease(r)); /* the retained reference: the last one, so the memory goes */
    CU_EXPECT(cuMemRelease(r), CUDA_ERROR_INVALID_VALUE);
    CU_CHECK(cuMemAddressFree(va, g));
    CU_CHECK(cuMemAddressFree(hole, g));
    printf("vmm share ok\n");
    return 0;
}
