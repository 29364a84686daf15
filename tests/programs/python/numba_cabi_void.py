"""A CUDA C function without a return value, linked into a numba kernel with declare_device(abi="c"): numba's
PTX prototype of it has a return value, the definition none (linking goes by name; the value is undefined and
unused). The emulator refused the call ("call to store with the wrong number of arguments"). Prints `cabi ok`
on success."""

import cffi
import numpy as np
from numba import cuda, types

source = cuda.CUSource("""
extern "C" __device__ void store(int *p, int v) { *p = 3 * v + 1; }
""")
store = cuda.declare_device("store", types.void(types.CPointer(types.int32), types.int32), link=source, abi="c")
ffi = cffi.FFI()


@cuda.jit
def kernel(out, x):
    i = cuda.grid(1)
    if i < len(out):
        store(ffi.from_buffer(out[i:]), x[i])


x = np.arange(40, dtype=np.int32)
out = np.zeros_like(x)
kernel[2, 32](out, x)
np.testing.assert_equal(out, 3 * x + 1)
print("cabi ok")
