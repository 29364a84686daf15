"""A cuda.core program through gpushim's libcuda.so.1: NVRTC compiles C++ to PTX (cuda.core.Program), the
kernel is launched with cuda.core.launch on a cuda.core stream, device memory comes from the device's memory pool.
Prints `cuda.core ... match True`."""

import numpy as np
from cuda.bindings import driver as cu
from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

CODE = r"""
extern "C" __global__ void scale_add(const float *x, float *y, float a, size_t n) {
    size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""
dev = Device(0)
dev.set_current()
stream = dev.create_stream()
prog = Program(CODE, code_type="c++", options=ProgramOptions(arch=f"compute_{dev.arch}"))
mod = prog.compile("ptx")
kernel = mod.get_kernel("scale_add")
n = 3000
x = np.linspace(0, 1, n, dtype=np.float32)
y = np.full(n, 2.0, dtype=np.float32)
dx = dev.allocate(x.nbytes, stream=stream)
dy = dev.allocate(y.nbytes, stream=stream)
for buf, arr in ((dx, x), (dy, y)):  # host arrays go in through the driver API
    (err,) = cu.cuMemcpyHtoDAsync(int(buf.handle), arr.ctypes.data, arr.nbytes, int(stream.handle))
    assert int(err) == 0, err
launch(stream, LaunchConfig(grid=(n + 255) // 256, block=256), kernel, dx, dy, np.float32(3.0), np.uint64(n))
out = np.empty_like(y)
(err,) = cu.cuMemcpyDtoHAsync(out.ctypes.data, int(dy.handle), out.nbytes, int(stream.handle))
assert int(err) == 0, err
stream.sync()
print("cuda.core", dev.name, "match", np.allclose(out, 3.0 * x + 2.0))
