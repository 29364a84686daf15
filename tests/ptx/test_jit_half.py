"""Half precision on the compiling engine (gpushim/ptx/jit/ops_half.py) against the interpreter, bit for bit,
on random bit patterns (every class of f16/bf16 value: zeros, subnormals, normals, infinities, NaNs) and on
values whose results round at a tie, plus CUDA's answer where it is simple: f16 addition rounds to nearest
even (PTX ISA, add.f16: .rn, the only and default rounding)."""

from __future__ import annotations

import numpy as np
import pytest
from harness import ENGINE, Dev, compile_ptx


@pytest.mark.parametrize("engine", ["jit"], indirect=True)  # compares the two engines itself
def test_half_arithmetic_and_conversions_match_the_interpreter(engine, rng):
    dev = Dev(compile_ptx("jithalf", "sm_90"))
    assert dev.mod.jit_kernel("halfOps") is not None
    n = 8192
    h = rng.integers(0, 2**16, 3 * n, dtype=np.uint32).astype(np.uint16)
    # ordinary magnitudes too (random bits are mostly huge, tiny or NaN in bf16), and specials
    h[3 * 1024 : 3 * 4096] = rng.standard_normal(3 * 3072).astype(np.float16).view(np.uint16)
    h[:24] = [0, 0x8000, 0x3C00, 0xBC00, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x0001, 0x8001, 0x03FF, 0x0400,
              0x7BFF, 0xFBFF, 0x3555, 0x1, 0x7FFF, 0x3C01, 0x3C00, 0x0200, 0x7F80, 0xFF80, 0x7FC0, 0x0080]  # fmt: skip
    f = rng.integers(0, 2**32, 4 * n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    f[4 * 1024 : 4 * 4096] = rng.standard_normal(4 * 3072).astype(np.float32) * 1000
    f[:8] = [65520.0, 65519.99, 65504.0, 2.0**-25, 2.0**-24 * 1.5, 1.0 + 2.0**-11, np.nan, -np.inf]
    ph = dev.array(h)
    got = {}
    for eng in ("interp", "jit"):
        ENGINE["name"] = eng
        po, p2, pf = dev.empty(80 * n), dev.empty(48 * n), dev.array(f)
        dev.launch("halfOps", n // 256, 256, ph, po, p2, pf, n)
        got[eng] = (dev.get(po, np.uint16, 40 * n).reshape(n, 40), dev.get(p2, np.uint32, 12 * n).reshape(n, 12),
                    dev.get(pf, np.uint32, 4 * n).reshape(n, 4))  # fmt: skip
    for k, what in enumerate(("f16/bf16 results", "f16x2/bf16x2 results", "f32 conversions")):
        bad = np.argwhere(got["interp"][k] != got["jit"][k])
        assert bad.size == 0, (what, bad[:5].tolist())
    # f16 add rounds the exact sum to nearest even (f32 holds the exact sum of two f16 normals of similar size)
    a, b = h[0::3].view(np.float16), h[1::3].view(np.float16)
    ok = np.isfinite(a) & np.isfinite(b)
    with np.errstate(over="ignore"):  # sums past 65520 round to infinity, as they should
        want = (a[ok].astype(np.float64) + b[ok].astype(np.float64)).astype(np.float16)
    res = got["jit"][0][ok, 0].view(np.float16)
    fine = ~np.isnan(want)
    assert fine.sum() > 1000 and np.array_equal(res[fine].view(np.uint16), want[fine].view(np.uint16))
