"""CuPy on gpushim (tests/e2e/test_cupy.py): array work checked against numpy, one key=value line per check.
`random` as the first argument adds random numbers (slow on the emulator: curand_init's skip-ahead)."""

import os
import sys

import cupy as cp
import numpy as np

x = np.arange(1000, dtype=np.float32)
a = cp.asarray(x)
print("env", os.environ.get("CUPY_COMPILE_WITH_PTX"), repr(os.environ.get("CUPY_ACCELERATORS")))
print("asnumpy=", np.array_equal(cp.asnumpy(a), x))
print("elementwise=", np.allclose(cp.asnumpy(cp.sqrt(a) * 2 + 1), np.sqrt(x) * 2 + 1))
print("sum=", float(a.sum()), float(x.sum()))
print("max_mean=", float(a.max()), float(a.mean()))
m = cp.arange(12, dtype=cp.float64).reshape(3, 4)
print("axis_sum=", cp.asnumpy(m.sum(axis=1)).tolist())
print("argmax=", int(cp.argmax(cp.asarray([3, 9, 2, 9, 1]))))
k = cp.RawKernel(r'''
extern "C" __global__ void sq(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i];
}''', "sq")
y = cp.empty_like(a)
k((4,), (256,), (a, y, cp.int32(1000)))
print("rawkernel=", np.allclose(cp.asnumpy(y), x * x))
add3 = cp.ElementwiseKernel("float32 p, float32 q", "float32 r", "r = p + 3 * q", "add3")
print("elementwise_kernel=", np.allclose(cp.asnumpy(add3(a, a)), 4 * x))
if sys.argv[1:] == ["random"]:
    r = cp.asnumpy(cp.random.default_rng(1).random(1000))
    print("random=", bool(r.min() >= 0 and r.max() < 1 and 0.4 < r.mean() < 0.6))
print("OK")
