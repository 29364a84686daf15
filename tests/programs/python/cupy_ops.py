"""CuPy on gpushim (tests/e2e/test_cupy.py): array work checked against numpy, one key=value line per check.
With no argument the basic checks run; arguments name parts (`base` for those): `random` (default_rng: slow
on the emulator, curand_init's skip-ahead), `cub` (CUB's device-wide reductions and scan on several dtypes),
`unrunnable` (a kernel the emulator cannot run), `randomstate` (cuRAND's host API), `status` (what
`gpushim status` says of this process)."""

import os
import sys

import cupy as cp
import numpy as np

x = np.arange(1000, dtype=np.float32)
a = cp.asarray(x)
print("env", os.environ.get("CUPY_COMPILE_WITH_PTX"), repr(os.environ.get("CUPY_ACCELERATORS")))
parts = sys.argv[1:]
if not parts or "base" in parts:  # the basic checks, unless only other parts were asked for
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
if "cub" in parts:
    from cupy._core import _accelerator

    print("cub_on=", _accelerator.get_reduction_accelerators() == [_accelerator.ACCELERATOR_CUB])
    i16 = np.array([5, -3, 700, -900, 12, 0, 32767, -32768, 9] * 37, np.int16)
    u16 = i16.view(np.uint16)
    checks = {
        "sum_f64": (cp.asarray(x, np.float64).sum(), x.astype(np.float64).sum()),
        "sum_i32": (cp.arange(100000, dtype=cp.int32).sum(), np.arange(100000, dtype=np.int32).sum()),
        "min_i16": (cp.asarray(i16).min(), i16.min()),
        "max_i16": (cp.asarray(i16).max(), i16.max()),
        "min_u16": (cp.asarray(u16).min(), u16.min()),
        "max_u16": (cp.asarray(u16).max(), u16.max()),
        "argmax_f32": (cp.argmax(cp.asarray(np.sin(x))), np.argmax(np.sin(x))),
        "argmin_i64": (cp.argmin(cp.asarray(i16.astype(np.int64))), np.argmin(i16.astype(np.int64))),
    }
    for name, (got, want) in checks.items():
        print(f"{name}=", got.item() == want, got.item(), want)
    c = cp.cumsum(cp.arange(5000, dtype=cp.int64))
    print("cumsum=", np.array_equal(cp.asnumpy(c), np.cumsum(np.arange(5000, dtype=np.int64))))
    # Thrust (cupy/cuda/thrust: another static runtime, another compute_120 module)
    z = np.random.default_rng(0).standard_normal(3000).astype(np.float32)
    print("thrust_sort=", np.array_equal(cp.asnumpy(cp.sort(cp.asarray(z))), np.sort(z)))
if "unrunnable" in parts:
    # multimem (NVLink multicast memory) is an instruction the PTX engine lacks: the launch fails and the next
    # synchronising call says so, rather than the output reading as if the kernel had run
    bad = cp.RawKernel(r'''
extern "C" __global__ void multicast_add(float *y) {
    asm volatile("multimem.red.relaxed.sys.global.add.f32 [%0], %1;" :: "l"(y + threadIdx.x), "f"(1.0f) : "memory");
    y[threadIdx.x] = 1.0f;
}''', "multicast_add")
    y = cp.zeros(32, cp.float32)
    try:
        bad((1,), (32,), (y,))
        print("unrunnable_result=", cp.asnumpy(y).tolist()[:2])
    except Exception as e:  # CuPy's CUDARuntimeError / CUDADriverError
        print("unrunnable_error=", type(e).__name__, str(e).replace("\n", " ")[:300])
    print("after_error=", np.allclose(cp.asnumpy(cp.sqrt(a)), np.sqrt(x)))
if "status" in parts:
    import json
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    st = json.loads(subprocess.run([sys.executable, "-m", "gpushim", "status", "--json"], env=env,
                                   capture_output=True, text=True, check=True).stdout)
    mine = [s for s in st["sessions"] if s.get("pid") == os.getpid()]
    print("status_runtime=", mine[0]["runtime"] if mine else None)
if "randomstate" in parts:
    try:
        r = cp.asnumpy(cp.random.RandomState(1234).rand(1000))
        r2 = cp.asnumpy(cp.random.RandomState(1234).rand(1000))
        print("randomstate=", bool(r.min() >= 0 and r.max() < 1 and 0.4 < r.mean() < 0.6), np.array_equal(r, r2))
    except Exception as e:  # cupy_backends.cuda.libs.curand.CURANDError
        print("randomstate_error=", type(e).__name__, e)
if "random" in parts:
    r = cp.asnumpy(cp.random.default_rng(1).random(1000))
    print("random=", bool(r.min() >= 0 and r.max() < 1 and 0.4 < r.mean() < 0.6))
print("OK")
