"""Directed rounding on the compiling engine (gpushim/ptx/jit/ops_round.py) against the interpreter, bit for
bit, on random operands of every magnitude and the special values, and against exact rational arithmetic
(PTX ISA, Floating-Point Instructions: .rz/.rm/.rp round the exact result toward zero, -inf, +inf)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from harness import ENGINE, Dev, compile_ptx

SPECIAL32 = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 3.4028235e38,
                      -3.4028235e38, 0.1, 3.0, 1e-40], np.float32)  # fmt: skip


def _operands(rng, n: int, dt, special) -> np.ndarray:
    it = np.uint32 if dt == np.float32 else np.uint64
    bits = rng.integers(0, np.iinfo(it).max, n, dtype=it, endpoint=True)
    x = bits.view(dt).copy()
    # nearby magnitudes too (random bits rarely give sums with cancellation or exact halves)
    near = rng.standard_normal(n).astype(dt) * dt(2.0) ** rng.integers(-20, 20, n).astype(dt)
    x[n // 3 : 2 * n // 3] = near[n // 3 : 2 * n // 3]
    x[: special.size * 8] = np.resize(special, special.size * 8)
    return x


def _run(dev: Dev, kernel: str, x: np.ndarray, per: int, dt) -> dict[str, np.ndarray]:
    px = dev.array(x)
    n = x.size // (3 if kernel == "directed32" else 2)
    outs = {}
    for eng in ("interp", "jit"):
        ENGINE["name"] = eng
        po = dev.empty(per * n * np.dtype(dt).itemsize)
        dev.launch(kernel, (n + 255) // 256, 256, px, po, n)
        outs[eng] = dev.get(po, dt, per * n).reshape(n, per)
    return outs


def _directed(q: Fraction, mode: str) -> float:
    """the f32 value rounding q toward zero (rz), -inf (rm) or +inf (rp), for |q| well inside the normal range"""
    r = np.float32(float(q))  # float(q) is correctly rounded to f64, so r is one of q's two f32 neighbours
    if Fraction(float(r)) == q:
        return float(r)
    if Fraction(float(r)) < q:
        lo, hi = r, np.nextafter(r, np.float32(np.inf))
    else:
        lo, hi = np.nextafter(r, np.float32(-np.inf)), r
    assert Fraction(float(lo)) < q < Fraction(float(hi))
    if mode == "rm" or (mode == "rz" and q > 0):
        return float(lo)
    return float(hi)


@pytest.mark.parametrize("engine", ["jit"], indirect=True)  # compares the two engines itself
def test_directed_rounding_f32_matches_the_interpreter_and_exact_rounding(engine, rng):
    dev = Dev(compile_ptx("jitround", "sm_75"))
    assert dev.mod.jit_kernel("directed32") is not None
    n = 4096
    x = _operands(rng, 3 * n, np.float32, SPECIAL32)
    outs = _run(dev, "directed32", x, 30, np.float32)
    assert np.array_equal(outs["interp"].view(np.uint32), outs["jit"].view(np.uint32))
    a, b, c = x[0::3], x[1::3], x[2::3]
    got = outs["jit"]
    ok = np.isfinite(a) & np.isfinite(b) & np.isfinite(c) & (np.abs(a) > 1e-18) & (np.abs(a) < 1e18) \
        & (np.abs(b) > 1e-18) & (np.abs(b) < 1e18) & (np.abs(c) > 1e-18) & (np.abs(c) < 1e18)  # fmt: skip
    idx = np.flatnonzero(ok)[:300]
    assert idx.size > 100
    for i in idx:
        fa, fb, fc = (Fraction(float(v)) for v in (a[i], b[i], c[i]))
        for col, q in ((0, fa + fb), (6, fa - fb), (12, fa * fb), (18, fa / fb), (24, fa * fb + fc)):
            for j, mode in enumerate(("rz", "rm", "rp")):
                assert got[i, col + j] == _directed(q, mode), (i, col, mode)


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_directed_rounding_f64_add_matches_the_interpreter(engine, rng):
    dev = Dev(compile_ptx("jitround", "sm_75"))
    assert dev.mod.jit_kernel("directed64") is not None
    n = 4096
    x = _operands(rng, 2 * n, np.float64, SPECIAL32.astype(np.float64))
    outs = _run(dev, "directed64", x, 6, np.float64)
    assert np.array_equal(outs["interp"].view(np.uint64), outs["jit"].view(np.uint64))
    # a sum that is not exact rounds down with rm and up with rp, one step apart
    rm, rp = outs["jit"][:, 1], outs["jit"][:, 2]
    i = np.flatnonzero((rm != rp) & ~np.isnan(rm))
    assert i.size > 100
    assert (np.nextafter(outs["jit"][i, 1], np.inf) == outs["jit"][i, 2]).all()


def _directed64(q: Fraction, mode: str) -> float:
    r = float(q)  # correctly rounded to f64
    if Fraction(r) == q:
        return r
    lo, hi = (r, float(np.nextafter(r, np.inf))) if Fraction(r) < q else (float(np.nextafter(r, -np.inf)), r)
    return lo if mode == "rm" or (mode == "rz" and q > 0) else hi


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_directed_conversions_match_the_interpreter_and_exact_rounding(engine, rng):
    """PTX ISA, cvt: .rz/.rm/.rp round the exact source value toward zero, -inf, +inf."""
    dev = Dev(compile_ptx("jitround", "sm_75"))
    assert dev.mod.jit_kernel("cvtDirected") is not None
    n = 2048
    xd = _operands(rng, n, np.float64, SPECIAL32.astype(np.float64))
    xl = rng.integers(-(2**63), 2**63, 2 * n, dtype=np.int64)
    xl[1::4] >>= rng.integers(0, 63, xl[1::4].size)  # every magnitude
    xl[:8] = [0, -1, 2**24 + 1, -(2**24) - 1, 2**63 - 1, -(2**63), 2**53 + 1, 2**62 + 2**38 + 1]
    pd, pl = dev.array(xd), dev.array(xl)
    outs = {}
    for eng in ("interp", "jit"):
        ENGINE["name"] = eng
        po = dev.empty(8 * 15 * n)
        dev.launch("cvtDirected", n // 256, 256, pd, pl, po, n)
        outs[eng] = dev.get(po, np.float64, 15 * n).reshape(n, 15)
    assert np.array_equal(outs["interp"].view(np.uint64), outs["jit"].view(np.uint64))
    got = outs["jit"]
    for i in range(0, n, 5):
        s, u = int(xl[2 * i]), int(xl[2 * i + 1]) & (2**64 - 1)
        for j, mode in enumerate(("rz", "rm", "rp")):
            assert got[i, 3 + j] == _directed(Fraction(s), mode) and got[i, 6 + j] == _directed(Fraction(u), mode)
        assert got[i, 11] == _directed64(Fraction(s), "rz") and got[i, 12] == _directed64(Fraction(s), "rm")
        assert got[i, 13] == _directed64(Fraction(u), "rp") and got[i, 14] == _directed64(Fraction(u), "rm")
