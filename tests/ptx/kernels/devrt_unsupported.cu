// What the emulator cannot run in dynamic parallelism (tests/ptx/test_devrt.py), compiled with -rdc=true.

// a device runtime function the emulator does not provide
__global__ void device_attribute(int *out) { cudaDeviceGetAttribute(out, cudaDevAttrMaxThreadsPerBlock, 0); }

// a child kernel the engine cannot run (stacksave), launched from a kernel it can run
__global__ void odd_child(unsigned long long *out) {
    unsigned long long sp;
    asm volatile("stacksave.u64 %0;" : "=l"(sp));
    *out = sp;
}
__global__ void launches_odd_child(unsigned long long *out) { odd_child<<<1, 1>>>(out); }
