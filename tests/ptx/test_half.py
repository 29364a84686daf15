"""Half-precision (f16, f16x2, bf16) arithmetic and comparisons against exact rational references."""

from fractions import Fraction

import numpy as np
import pytest
import refs as R


@pytest.fixture(scope="module")
def half(dev_for):
    return dev_for("half", "sm_80")


def _bits(x):
    return int(np.float16(x).view(np.uint16))


def test_f16_arithmetic(half, rng):
    n = 512
    a = (rng.standard_normal(n) * 4).astype(np.float16)
    b = (rng.standard_normal(n) * 4).astype(np.float16)
    c = (rng.standard_normal(n) * 4).astype(np.float16)
    a[:6] = [0.0, -0.0, 1.0, 65504.0, 6e-8, np.nan]
    b[:6] = [-0.0, 0.0, 1.0, 2.0, 6e-8, 1.0]
    po, pc = half.empty(2 * 8 * n), half.empty(4 * 2 * n)
    half.launch("halfOps", n // 64, 64, half.array(a), half.array(b), half.array(c), po, pc)
    o = half.get(po, np.uint16, 8 * n).reshape(n, 8)
    cmp = half.get(pc, np.int32, 2 * n).reshape(n, 2)
    for i in range(n):
        x, y, z = (float(v) for v in (a[i], b[i], c[i]))
        if not all(np.isfinite(v) for v in (x, y, z)) or abs(x * y) > 60000 or abs(x + y) > 60000:
            continue
        exp = [
            R.round_half(Fraction(x) + Fraction(y), False, x + y),
            R.round_half(Fraction(x) - Fraction(y), False, x - y),
            R.round_half(Fraction(x) * Fraction(y), False, x * y),
            R.round_half(Fraction(x) * Fraction(y) + Fraction(z), False, x * y + z),
            _bits(a[i]) ^ 0x8000,
            _bits(b[i]) & 0x7FFF,
            _bits(-0.0) if (x == 0 and y == 0 and (np.signbit(a[i]) or np.signbit(b[i]))) else _bits(min(x, y)),
            None,
        ]
        s = R.half_value(exp[3], False)
        exp[7] = _bits(min(max(s, 0.0), 1.0))
        for j, e in enumerate(exp):
            assert int(o[i, j]) == e, (i, j, x, y, z, hex(int(o[i, j])), hex(e))
        assert cmp[i, 0] == (x < y) + 2 * (x >= z) + 4 * (y != z), i
        lo = R.round_half(Fraction(x) * Fraction(z) + Fraction(x), False, x * z + x)
        hi = R.round_half(Fraction(y) * Fraction(x) + Fraction(y), False, y * x + y)
        assert int(cmp[i, 1]) & 0xFFFFFFFF == lo | (hi << 16), i
    assert np.isnan(o[5:6, 0].view(np.float16)).all()  # NaN in, NaN out


def test_bf16_arithmetic(half, rng):
    n = 256
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    ab = (a.view(np.uint32) >> 16).astype(np.uint16)
    bb = (b.view(np.uint32) >> 16).astype(np.uint16)
    po = half.empty(2 * 4 * n)
    half.launch("bf16Ops", n // 64, 64, half.array(ab), half.array(bb), po)
    o = half.get(po, np.uint16, 4 * n).reshape(n, 4)
    for i in range(n):
        x, y = R.half_value(int(ab[i]), True), R.half_value(int(bb[i]), True)
        exp = [
            R.round_half(Fraction(x) + Fraction(y), True, x + y),
            R.round_half(Fraction(x) * Fraction(y), True, x * y),
            R.round_half(Fraction(x) * Fraction(y) + Fraction(x), True, x * y + x),
            int(ab[i]) if x >= y else int(bb[i]),
        ]
        assert o[i].tolist() == exp, (i, x, y, [hex(v) for v in o[i]], [hex(v) for v in exp])
