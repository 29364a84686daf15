"""libdevice math inlined by nvcc: long instruction mixes checked against numpy within CUDA's documented ulp
bounds (an instruction bug shows up as a gross error)."""

import math

import numpy as np
import pytest


@pytest.fixture(scope="module")
def mathlib(dev_for):
    return dev_for("mathlib")


def ulps(got, ref, dtype):
    ref = np.asarray(ref, np.float64)
    sp = np.spacing(np.abs(ref).astype(dtype)).astype(np.float64)
    u = np.abs(got.astype(np.float64) - ref) / sp
    return np.where((got == ref) | (np.isnan(got) & np.isnan(ref)), 0.0, u)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_float_math_functions(mathlib, rng):
    n = 1024
    x = rng.uniform(-10, 10, n).astype(np.float32)
    y = rng.uniform(-3, 3, n).astype(np.float32)
    x[:4] = [0.0, 1.0, -1.0, 3.14159]
    po = mathlib.empty(4 * 12 * n)
    mathlib.launch("mathf", n // 128, 128, mathlib.array(x), mathlib.array(y), po, n)
    o = mathlib.get(po, np.float32, 12 * n).reshape(n, 12)
    a, b = x.astype(np.float64), y.astype(np.float64)
    x1e3 = (np.abs(x) + np.float32(1e-3)).astype(np.float64)  # the f32 sum the kernel takes the log of
    lg = np.array([math.lgamma(v) for v in (np.abs(a) + 0.5)])
    erf = np.array([math.erf(v) for v in a])
    cases = [(0, np.sin(a), 2), (1, np.cos(a), 2), (2, np.exp(b), 2), (3, np.log(x1e3), 1),
             (4, np.power(np.abs(a), b), 4), (5, np.tanh(a), 2), (6, np.arctan2(a, b), 3), (7, erf, 2),
             (8, np.cbrt(a), 1), (9, np.fmod(x, y).astype(np.float64), 0), (10, np.hypot(a, b), 3)]  # fmt: skip
    for col, ref, bound in cases:
        u = ulps(o[:, col], ref, np.float32)
        assert np.max(u) <= bound + 0.5, (col, float(np.max(u)), int(np.argmax(u)))
    assert np.allclose(o[:, 11], lg, rtol=2e-6, atol=2e-6)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_double_math_functions(mathlib, rng):
    n = 512
    x = rng.uniform(-10, 10, n)
    y = rng.uniform(-3, 3, n)
    po = mathlib.empty(8 * 8 * n)
    mathlib.launch("mathd", n // 128, 128, mathlib.array(x), mathlib.array(y), po, n)
    o = mathlib.get(po, np.float64, 8 * n).reshape(n, 8)
    cases = [(0, np.sin(x), 2), (1, np.exp(y), 1), (2, np.log(np.abs(x) + 1e-3), 1), (3, np.power(np.abs(x), y), 2),
             (4, np.arctan2(x, y), 2), (5, np.sqrt(np.abs(x)) / y, 0), (6, np.tanh(x), 2)]  # fmt: skip
    for col, ref, bound in cases:
        u = ulps(o[:, col], ref, np.float64)
        assert np.max(u) <= bound + 0.5, (col, float(np.max(u)))
    assert np.array_equal(o[:, 7], np.trunc(x * 1e6) / 7)


def test_integer_math(mathlib, rng):
    n = 1024
    x = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    po = mathlib.empty(4 * 8 * n)
    mathlib.launch("intmath", n // 128, 128, mathlib.array(x), po, n)
    o = mathlib.get(po, np.int32, 8 * n).reshape(n, 8)
    for i, a in enumerate(x.tolist()):
        u = a & 0xFFFFFFFF
        q7 = int(a / 7) if a >= 0 else -((-a) // 7)
        r13 = a - int(math.copysign(abs(a) // 13, a)) * 13 if a else 0
        bytes_u = [(u >> (8 * k)) & 0xFF for k in range(4)]
        exp = [q7, r13, u // 1000, u % 97, ((u & 0xFFFFFF) * 3) & 0xFFFFFFFF,
               int((a * 1234567) / 1000003) if a * 1234567 >= 0 else -((-a * 1234567) // 1000003),
               abs(u - 5) + 1 + bin(((a & 0xFFFFFFFFFFFFFFFF) << 7) & 0xFFFFFFFFFFFFFFFF).count("1"),
               sum(abs(bv - 0x80) << (8 * k) for k, bv in enumerate(bytes_u))]  # fmt: skip
        exp = [((e + 2**31) % 2**32) - 2**31 for e in exp]
        assert o[i].tolist() == exp, (i, a)
