"""numba-cuda kernels through gpushim's libcuda.so.1 (the PTX path: without nvJitLink numba links with
cuLinkCreate/cuLinkAddData/cuLinkComplete), checked against numpy. Prints `numba ok` on success."""

import numpy as np
from numba import cuda


@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def block_sums(x, total):
    # shared-memory tree reduction per block, then one atomic per block
    buf = cuda.shared.array(128, dtype=np.float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    step = 64
    while step > 0:
        if t < step:
            buf[t] += buf[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        cuda.atomic.add(total, 0, buf[0])


@cuda.jit
def transpose(a, b):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        b[j, i] = a[i, j]


rng = np.random.default_rng(7)
x = rng.standard_normal(10_000).astype(np.float32)
y = rng.standard_normal(10_000).astype(np.float32)
dx, dy = cuda.to_device(x), cuda.to_device(y)
dout = cuda.device_array_like(x)
axpy[(x.size + 255) // 256, 256](np.float32(1.5), dx, dy, dout)
# CUDA contracts a * x + y to one fused multiply-add: compare within float32 rounding
assert np.allclose(dout.copy_to_host(), 1.5 * x + y, rtol=1e-5, atol=1e-6), "axpy"

v = rng.standard_normal(5000)
total = cuda.to_device(np.zeros(1))
block_sums[(v.size + 127) // 128, 128](cuda.to_device(v), total)
assert np.isclose(total.copy_to_host()[0], v.sum()), "reduction"

m = rng.standard_normal((37, 53)).astype(np.float32)
dt = cuda.device_array((53, 37), dtype=np.float32)
transpose[(3, 4), (16, 16)](cuda.to_device(m), dt)
assert np.array_equal(dt.copy_to_host(), m.T), "transpose"
print("numba ok:", cuda.get_current_device().name.decode() if isinstance(cuda.get_current_device().name, bytes)
      else cuda.get_current_device().name)
