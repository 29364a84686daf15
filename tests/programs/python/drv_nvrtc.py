"""NVRTC compiles a kernel to PTX for the device's compute capability; cuda-python's driver bindings load it
with cuModuleLoadData and launch it. Prints `nvrtc ... match True`."""

import numpy as np
from cuda.bindings import driver as cu
from cuda.bindings import nvrtc

SRC = b"""
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def check(res):
    err, *rest = res if isinstance(res, tuple) else (res,)
    if int(err) != 0:
        raise RuntimeError(f"{err}")
    return rest[0] if len(rest) == 1 else rest


check(cu.cuInit(0))
dev = check(cu.cuDeviceGet(0))
attr = cu.CUdevice_attribute
major = check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
minor = check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
prog = check(nvrtc.nvrtcCreateProgram(SRC, b"saxpy.cu", 0, [], []))
opts = [f"--gpu-architecture=compute_{major}{minor}".encode()]
(err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
if int(err):
    size = check(nvrtc.nvrtcGetProgramLogSize(prog))
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    raise SystemExit(log.decode())
ptx = b" " * check(nvrtc.nvrtcGetPTXSize(prog))
check(nvrtc.nvrtcGetPTX(prog, ptx))

ctx = check(cu.cuDevicePrimaryCtxRetain(dev))
check(cu.cuCtxSetCurrent(ctx))
mod = check(cu.cuModuleLoadData(ptx))
fn = check(cu.cuModuleGetFunction(mod, b"saxpy"))
n = 5000
x = np.arange(n, dtype=np.float32)
y = np.ones(n, dtype=np.float32)
dx = check(cu.cuMemAlloc(x.nbytes))
dy = check(cu.cuMemAlloc(y.nbytes))
stream = check(cu.cuStreamCreate(0))
check(cu.cuMemcpyHtoDAsync(dx, x.ctypes.data, x.nbytes, stream))
check(cu.cuMemcpyHtoDAsync(dy, y.ctypes.data, y.nbytes, stream))
# kernelParams: an array of pointers to each argument's value
values = [np.array([2.5], dtype=np.float32), np.array([int(dx)], dtype=np.uint64),
          np.array([int(dy)], dtype=np.uint64), np.array([n], dtype=np.int32)]
params = np.array([v.ctypes.data for v in values], dtype=np.uint64)
check(cu.cuLaunchKernel(fn, (n + 127) // 128, 1, 1, 128, 1, 1, 0, stream, params.ctypes.data, 0))
out = np.empty_like(y)
check(cu.cuMemcpyDtoHAsync(out.ctypes.data, dy, out.nbytes, stream))
check(cu.cuStreamSynchronize(stream))
version = check(nvrtc.nvrtcVersion())
print(f"nvrtc {version[0]}.{version[1]} match", np.allclose(out, 2.5 * x + 1))
