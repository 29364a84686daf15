// Prints what the runtime reports about every device, one "key=value" per line, so tests compare it
// with the server's model.
#include <cstring>
#include "common.h"

int main() {
    int rt = 0, drv = 0, n = 0;
    CHECK(cudaRuntimeGetVersion(&rt));
    CHECK(cudaDriverGetVersion(&drv));
    CHECK(cudaGetDeviceCount(&n));
    std::printf("runtime=%d\ndriver=%d\ncount=%d\nprop_size=%zu\n", rt, drv, n, sizeof(cudaDeviceProp));
    for (int d = 0; d < n; d++) {
        cudaDeviceProp p;
        std::memset(&p, 0xAB, sizeof p);
        CHECK(cudaGetDeviceProperties(&p, d));
        std::printf("dev%d.name=%s\n", d, p.name);
        std::printf("dev%d.totalGlobalMem=%zu\n", d, p.totalGlobalMem);
        std::printf("dev%d.cc=%d.%d\n", d, p.major, p.minor);
        std::printf("dev%d.multiProcessorCount=%d\n", d, p.multiProcessorCount);
        std::printf("dev%d.maxThreadsPerBlock=%d\n", d, p.maxThreadsPerBlock);
        std::printf("dev%d.maxThreadsDim=%d,%d,%d\n", d, p.maxThreadsDim[0], p.maxThreadsDim[1], p.maxThreadsDim[2]);
        std::printf("dev%d.maxGridSize=%d,%d,%d\n", d, p.maxGridSize[0], p.maxGridSize[1], p.maxGridSize[2]);
        std::printf("dev%d.warpSize=%d\n", d, p.warpSize);
        std::printf("dev%d.sharedMemPerBlock=%zu\n", d, p.sharedMemPerBlock);
        std::printf("dev%d.l2CacheSize=%d\n", d, p.l2CacheSize);
        std::printf("dev%d.uuid0=%d\n", d, (int)(unsigned char)p.uuid.bytes[0]);
        int v = 0;
        CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, d));
        std::printf("dev%d.attr.sms=%d\n", d, v);
        CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, d));
        std::printf("dev%d.attr.ccmajor=%d\n", d, v);
        CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxBlockDimZ, d));
        std::printf("dev%d.attr.maxBlockDimZ=%d\n", d, v);
        char bus[32];
        CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, d));
        int back = -1;
        CHECK(cudaDeviceGetByPCIBusId(&back, bus));
        std::printf("dev%d.pci=%s back=%d\n", d, bus, back);
    }
    size_t free_b = 0, total_b = 0;
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    std::printf("meminfo.total=%zu\nmeminfo.free_le_total=%d\n", total_b, free_b <= total_b);
    int least = 1, greatest = 1;
    CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    std::printf("priority=%d,%d\n", least, greatest);
    CHECK(cudaSetDevice(0));
    int cur = -1;
    CHECK(cudaGetDevice(&cur));
    std::printf("current=%d\n", cur);
    EXPECT_ERR(cudaSetDevice(n + 5), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaGetLastError(), cudaSuccess);
    cudaDeviceProp want;
    std::memset(&want, 0, sizeof want);
    want.major = 9;
    int chosen = -1;
    CHECK(cudaChooseDevice(&chosen, &want));
    std::printf("chosen=%d\n", chosen);
    CHECK(cudaDeviceSynchronize());
    std::printf("OK\n");
    return 0;
}
