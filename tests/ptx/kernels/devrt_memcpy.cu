// A device runtime function the emulator does not provide (tests/ptx/test_devrt.py), compiled with -rdc=true.
__global__ void device_get_device(int *out) { cudaGetDevice(out); }
