"""The interpreter's f64 div / rcp / sqrt and f32 sqrt in the directed rounding modes and set.ftz, against
exact arithmetic.

PTX ISA, "div" / "sqrt" (Floating-Point Instructions): .rz/.rm/.rp round the exact result toward zero, -inf,
+inf (IEEE 754). PTX ISA, "set": ".ftz ... flush subnormal inputs and results to sign-preserving zero"."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from harness import Dev, compile_ptx

MODES = ("rz", "rm", "rp")
TINY = 5e-324
BIG = 1.7976931348623157e308


def _round(q: Fraction, mode: str, zero_sign: float) -> float:
    """q rounded to f64 in mode: float(q) (int / int, correctly rounded) or its neighbour toward the mode."""
    if q == 0:
        return math.copysign(0.0, zero_sign)
    try:
        r = float(q)
    except OverflowError:
        r = math.inf if q > 0 else -math.inf
    if math.isfinite(r) and Fraction(r) == q:
        return r
    if math.isinf(r):  # beyond the largest finite f64
        lo, hi = (BIG, r) if r > 0 else (r, -BIG)
    elif Fraction(r) > q:
        lo, hi = math.nextafter(r, -math.inf), r
    else:
        lo, hi = r, math.nextafter(r, math.inf)
    down = mode == "rm" or (mode == "rz" and q > 0)
    out = lo if down else hi
    return math.copysign(0.0, float(q > 0) - 0.5) if out == 0 else out  # a tiny q keeps its sign as +-0


def _div(x: float, y: float, mode: str) -> float:
    if not (math.isfinite(x) and math.isfinite(y)) or x == 0 or y == 0:
        with np.errstate(all="ignore"):
            return float(np.float64(x) / np.float64(y))  # exact (or NaN) in every mode
    return _round(Fraction(x) / Fraction(y), mode, 0.0)


def _sqrt32(x: np.float32, mode: str) -> float:
    if not np.isfinite(x) or x <= 0:
        with np.errstate(all="ignore"):
            return float(np.sqrt(x))  # +-0, +inf, NaN: exact
    s = np.float32(math.sqrt(float(x)))
    d = Fraction(float(x)) - Fraction(float(s)) ** 2
    if d == 0:
        return float(s)
    lo, hi = (s, np.nextafter(s, np.float32(np.inf))) if d > 0 else (np.nextafter(s, np.float32(0)), s)
    # s is RN(sqrt(x)) in f64 then f32: one of the root's two f32 neighbours, checked exactly
    assert Fraction(float(lo)) ** 2 < Fraction(float(x)) < Fraction(float(hi)) ** 2
    return float(lo if mode in ("rz", "rm") else hi)


def _sqrt(x: float, mode: str) -> float:
    if not math.isfinite(x) or x <= 0:
        with np.errstate(all="ignore"):
            return float(np.sqrt(np.float64(x)))  # +-0, +inf, NaN: exact
    # the root is irrational or exact: bracket it between s and its neighbour with exact squares
    s = math.sqrt(x)
    d = Fraction(x) - Fraction(s) ** 2
    if d == 0:
        return s
    lo, hi = (s, math.nextafter(s, math.inf)) if d > 0 else (math.nextafter(s, 0.0), s)
    return lo if mode in ("rz", "rm") else hi


EDGE = [
    (1.0, 3.0), (-1.0, 3.0), (2.0, -3.0), (-7.0, -3.0), (6.0, 3.0), (1.0, 10.0), (0.1, 0.3),
    (1e-310, 3.0), (-1e-310, 7.0), (TINY, 2.0), (-TINY, 2.0), (3 * TINY, 2.0), (-3 * TINY, 2.0),
    (2.2250738585072014e-308, 3.0), (1.0, 1e308), (-1.0, 1e308), (1e-300, 1e300), (1e300, 1e-10),
    (-1e300, 1e-10), (BIG, 0.5), (1e200, 1e-200), (1.5, 1e-320), (0.0, 3.0), (-0.0, 3.0), (0.0, -3.0),
    (5.0, 0.0), (-5.0, 0.0), (0.0, 0.0), (math.inf, 2.0), (2.0, math.inf), (-2.0, math.inf), (math.nan, 1.0),
    (2.0, 1.0), (4.0, 1.0), (1e-320, 1.0), (BIG, 1.0), (-1.0, 1.0), (-0.0, 1.0), (1.0 + 2**-52, 1.0),
    (9007199254740993.0, 1.0), (TINY, 1.0), (2.0**-1073, 1.0),
]  # fmt: skip


def _operands(rng, n: int) -> np.ndarray:
    x = rng.integers(0, 2**64 - 1, 2 * n, dtype=np.uint64, endpoint=True).view(np.float64).copy()
    # magnitudes near each other (the fast residual path) and squares of doubles (exact roots)
    near = rng.standard_normal(2 * n) * 2.0 ** rng.integers(-30, 30, 2 * n)
    x[n // 2 : 3 * n // 2] = near[n // 2 : 3 * n // 2]
    sq = rng.standard_normal(n // 4)
    x[3 * n // 2 : 3 * n // 2 + 2 * (n // 4) : 2] = sq * sq
    e = np.array(EDGE, np.float64).reshape(-1)
    x[: e.size] = e
    return x


def _same(got: float, want: float) -> bool:
    return (math.isnan(got) and math.isnan(want)) or np.float64(got).view(np.uint64) == np.float64(want).view(np.uint64)


def _launch(kernel: str, x: np.ndarray, n: int, per: int, dt) -> np.ndarray:
    """Run kernel(x, out, n) on n threads; its per results of type dt for each thread, as an (n, per) array."""
    dev = Dev(compile_ptx("interpdiv", "sm_75"))
    px, po = dev.array(x), dev.empty(per * n * np.dtype(dt).itemsize)
    dev.launch(kernel, (n + 127) // 128, 128, px, po, n)
    return dev.get(po, dt, per * n).reshape(n, per)


def test_f64_div_and_sqrt_round_exactly_in_the_directed_modes():
    rng = np.random.default_rng(20261202)
    n = 1500
    x = _operands(rng, n)
    out = _launch("divsqrt64", x, n, 9, np.float64)
    bad = []
    for i in range(n):
        a, b = float(x[2 * i]), float(x[2 * i + 1])
        for k, mode in enumerate(MODES):
            want = _div(a, b, mode)
            if not _same(float(out[i, k]), want):
                bad.append(f"div.{mode} {a!r} / {b!r}: got {out[i, k]!r}, want {want!r}")
            want = _sqrt(a, mode)
            if not _same(float(out[i, 3 + k]), want):
                bad.append(f"sqrt.{mode} {a!r}: got {out[i, 3 + k]!r}, want {want!r}")
            want = _div(1.0, a, mode)
            if not _same(float(out[i, 6 + k]), want):
                bad.append(f"rcp.{mode} {a!r}: got {out[i, 6 + k]!r}, want {want!r}")
    assert not bad, f"{len(bad)} wrong, e.g.\n" + "\n".join(bad[:12])


def test_f32_sqrt_rounds_exactly_in_the_directed_modes():
    rng = np.random.default_rng(7)
    n = 3000
    x = rng.integers(0, 2**32 - 1, n, dtype=np.uint32, endpoint=True).view(np.float32).copy()
    sq = rng.standard_normal(n // 4).astype(np.float32) * np.float32(100)
    x[n // 2 : n // 2 + n // 4] = np.abs(sq * sq)  # near-exact and exact squares
    edge = [0.0, -0.0, 1.0, 2.0, 4.0, np.inf, -np.inf, np.nan, -1.0, 1e-45, 1e-40, 1.1754942e-38, 3.4028235e38]
    x[: len(edge)] = edge
    out = _launch("sqrt32", x, n, 3, np.float32)
    bad = []
    for i in range(n):
        for k, mode in enumerate(MODES):
            want = _sqrt32(x[i], mode)
            got = float(out[i, k])
            if not (
                (math.isnan(got) and math.isnan(want))
                or (got == want and math.copysign(1, got) == math.copysign(1, want))
            ):
                bad.append(f"sqrt.{mode}.f32 {x[i]!r}: got {got!r}, want {want!r}")
    assert not bad, f"{len(bad)} wrong, e.g.\n" + "\n".join(bad[:12])


def test_set_ftz_flushes_subnormal_f32_inputs():
    sub = np.float32(1e-40)  # subnormal f32
    pairs = [
        (sub, 0.0), (sub, -0.0), (-sub, 0.0), (sub, -sub), (sub, np.float32(2e-40)), (0.0, sub),
        (-sub, sub), (1.0, sub), (sub, 1.1754944e-38), (1.0, 2.0), (np.nan, sub),
    ]  # fmt: skip
    x = np.array(pairs, np.float32).reshape(-1)
    n = len(pairs)
    out = _launch("setftz", x, n, 6, np.uint32)
    one_f = int(np.float32(1.0).view(np.uint32))
    for i, (a, b) in enumerate(pairs):
        fa, fb = np.float32(a), np.float32(b)
        for k, flush in ((0, True), (3, False)):
            if flush:
                fa2 = np.float32(0.0) * np.sign(fa) if 0 < abs(fa) < np.float32(1.1754944e-38) else fa
                fb2 = np.float32(0.0) * np.sign(fb) if 0 < abs(fb) < np.float32(1.1754944e-38) else fb
            else:
                fa2, fb2 = fa, fb
            want = [0xFFFFFFFF if fa2 == fb2 else 0, 0xFFFFFFFF if fa2 < fb2 else 0, one_f if fa2 > fb2 else 0]
            assert list(out[i, k : k + 3]) == want, (a, b, "ftz" if flush else "no ftz", list(out[i, k : k + 3]))
