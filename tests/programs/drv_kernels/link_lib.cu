// JIT linking, part 2: the device function link_main.cu calls.
extern "C" __device__ float saxpy_op(float a, float x, float y) { return a * x + y; }
