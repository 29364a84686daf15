"""atom.add.noftz on .f16, .f16x2, .bf16 and .bf16x2 (atomicAdd on __half, __half2, __nv_bfloat16,
__nv_bfloat162; CuPy's kernels use them): each add rounded to nearest even, subnormals kept (PTX ISA, atom:
.noftz), old values returned. The emulator applies a block's atomics in thread order, so the expected values
are numpy's sums in that order."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def half_atomics(dev_for):
    return dev_for("halfatomics", "sm_90")


def bf16(x: np.ndarray) -> np.ndarray:
    """f32 -> bf16 bits, rounded to nearest even (finite values)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, np.uint32) << 16).view(np.float32)


def test_half_and_bfloat16_atomic_add(half_atomics, rng):
    d, n = half_atomics, 64
    v = (rng.standard_normal(n) * 4).astype(np.float32)
    v[:4] = [3e-6, 2.5e-6, -1e-7, 7e-6]  # f16 subnormals: .noftz keeps them
    shapes = ((4, np.uint16), (1, np.uint32), (2, np.uint16), (1, np.uint32))
    h, h2, b, b2 = (d.array(np.zeros(k, t)) for k, t in shapes)
    old_h, old_b = d.empty(2 * n), d.empty(2 * n)
    d.launch("halfAtomics", 1, n, h, h2, b, b2, d.array(v), old_h, old_b)

    want_h, want_old_h = np.zeros(4, np.float16), np.zeros(n, np.float16)
    want_h2 = np.zeros(2, np.float16)
    want_b, want_old_b = np.zeros(2, np.uint16), np.zeros(n, np.uint16)
    want_b2 = np.zeros(2, np.uint16)
    for i in range(n):
        want_old_h[i] = want_h[i % 4]
        want_h[i % 4] = want_h[i % 4] + np.float16(v[i])
        want_h2 += np.array([v[i], -2 * v[i]], np.float32).astype(np.float16)
        want_old_b[i] = want_b[i % 2]
        want_b[i % 2] = bf16(bf16_f32(want_b[i % 2]) + bf16_f32(bf16(v[i])))
        want_b2 = bf16(bf16_f32(want_b2) + bf16_f32(bf16(np.array([v[i], 0.5 * v[i]], np.float32))))
    assert np.array_equal(d.get(h, np.uint16, 4), want_h.view(np.uint16))
    assert np.array_equal(d.get(old_h, np.uint16, n), want_old_h.view(np.uint16))
    assert np.array_equal(d.get(h2, np.uint16, 2), want_h2.view(np.uint16))
    assert np.array_equal(d.get(b, np.uint16, 2), want_b)
    assert np.array_equal(d.get(old_b, np.uint16, n), want_old_b)
    assert np.array_equal(d.get(b2, np.uint16, 2), want_b2)
    # the subnormal first adds survived: thread 0's add left 3e-6 (not 0) for thread 4 to see
    assert want_old_h[4] == np.float16(3e-6) != 0
