// A device runtime function the emulator does not provide (tests/ptx/test_devrt.py), compiled with -rdc=true.
__global__ void device_memcpy(int *dst, const int *src) { cudaMemcpyAsync(dst, src, 4, cudaMemcpyDeviceToDevice, 0); }
