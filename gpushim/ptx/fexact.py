"""Exactly rounded floating-point helpers numpy lacks: fused multiply-add and directed rounding.

f32: products of f32 values are exact in f64; an exact sum is kept as an (s, e) pair (TwoSum), squeezed into one
f64 by rounding to odd, and rounding that to f32 gives the correctly rounded result in any mode (53 >= 2*24+2).
f64 fma: Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to
odd" (IEEE TC 2008): (uh, ul) = TwoProduct(a, b); (th, tl) = TwoSum(c, uh); result = RN(th + RO(tl + ul)).
TwoProduct uses Veltkamp splitting, which needs exponents away from overflow and underflow; elements outside a
safe range are computed exactly with Python fractions.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

_SPLIT = np.float64(134217729.0)  # 2**27 + 1
_ONE = np.uint64(1)
_SAFE_HI = np.float64(2.0**450)
_SAFE_LO = np.float64(2.0**-450)


def two_sum(a, b):
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def _split(a):
    t = _SPLIT * a
    hi = t - (t - a)
    return hi, a - hi


def two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def round_to_odd(s, e):
    """The f64 nearest to s + e rounded to odd, given s = RN(s + e)."""
    s = np.asarray(s, np.float64)
    bits = s.view(np.uint64)
    need = (e != 0) & ((bits & _ONE) == 0) & np.isfinite(s)
    if not np.any(need):
        return s
    away = (e > 0) == (s > 0)
    adj = np.where(away, _ONE, np.uint64(2**64 - 1))
    return np.where(need, bits + adj, bits).view(np.float64)


def f64_to_f32(v, mode: str = "rn"):
    """Round f64 values to f32 in rounding mode rn / rz / rm / rp."""
    r = np.asarray(v, np.float64).astype(np.float32)
    if mode == "rn":
        return r
    r64 = r.astype(np.float64)
    v = np.asarray(v, np.float64)
    if mode == "rz":
        fix = np.abs(r64) > np.abs(v)
        tgt = np.float32(0)
    elif mode == "rm":
        fix = r64 > v
        tgt = np.float32(-np.inf)
    else:
        fix = r64 < v
        tgt = np.float32(np.inf)
    return np.where(fix, np.nextafter(r, tgt), r).astype(np.float32)


def f64_directed(s, e, mode: str):
    """Directed rounding of the exact value s + e (s = RN of it) in f64."""
    if mode == "rn":
        return s
    if mode == "rz":
        fix = (e != 0) & ((e > 0) != (s > 0))
        tgt = 0.0
    elif mode == "rm":
        fix = e < 0
        tgt = -np.inf
    else:
        fix = e > 0
        tgt = np.inf
    return np.where(fix, np.nextafter(s, tgt), s)


_MASK29 = np.uint64(0x1FFFFFFF)
_MID29 = np.uint64(0x10000000)
_EXPM = np.uint64(0x7FF0000000000000)
_TINY32 = np.uint64((1023 - 126) << 52)


def _fma_f32_exact(a, b, c, mode: str):
    a64 = np.asarray(a, np.float64)
    p = a64 * np.asarray(b, np.float64)
    c64 = np.asarray(c, np.float64)
    s, e = two_sum(p, c64)
    with np.errstate(all="ignore"):
        v = np.where(np.isfinite(s), round_to_odd(s, np.where(np.isfinite(e), e, 0.0)), p + c64)
    r = f64_to_f32(v, mode)
    return _rm_zero(r, p, c64) if mode == "rm" else r


def fma_f32(a, b, c, mode: str = "rn"):
    """Correctly rounded f32 fma. Fast path: the f64 sum of the exact product and c rounds to f32 correctly
    unless it lands exactly on an f32 rounding midpoint or in the f32 subnormal range; those few elements
    take the exact TwoSum + round-to-odd path."""
    if mode != "rn":
        return _fma_f32_exact(a, b, c, mode)
    s = np.multiply(a, b, dtype=np.float64) + c
    if s.__class__ is not np.ndarray or s.ndim == 0:
        return _fma_f32_exact(a, b, c, mode)
    bits = s.view(np.uint64)
    bad = ((bits & _MASK29) == _MID29) | ((bits & _EXPM) < _TINY32)
    r = s.astype(np.float32)
    if bad.any():
        i = np.flatnonzero(bad)
        shp = s.shape
        r[i] = _fma_f32_exact(*(np.broadcast_to(x, shp)[i] for x in (a, b, c)), mode)
    return r


def _rm_zero(r, a, b):
    """IEEE 754: an exact zero sum of operands that are not both +0 is -0 when rounding toward -inf."""
    z = (r == 0) & ~((a == 0) & (b == 0) & ~np.signbit(a) & ~np.signbit(b))
    return np.where(z, -np.abs(r), r).astype(r.dtype) if np.any(z) else r


def add_f32(a, b, mode: str, sub: bool = False):
    a64 = np.asarray(a, np.float64)
    b64 = np.asarray(b, np.float64)
    if sub:
        b64 = -b64
    s, e = two_sum(a64, b64)
    r = f64_to_f32(round_to_odd(s, np.where(np.isfinite(e), e, 0.0)), mode)
    return _rm_zero(r, a64, b64) if mode == "rm" else r


def mul_f32(a, b, mode: str):
    return f64_to_f32(np.asarray(a, np.float64) * np.asarray(b, np.float64), mode)


def _err(s, e, *ops):
    """the error term for f64_directed: 0 where e is not finite, except where s overflowed from finite operands
    (the exact value lies below s's infinity: a directed mode may give the largest finite value)"""
    over = np.isinf(s) & np.logical_and.reduce([np.isfinite(o) for o in ops])
    return np.where(over, -s, np.where(np.isfinite(e), e, 0.0))


def add_f64(a, b, mode: str, sub: bool = False):
    b = -b if sub else b
    s, e = two_sum(np.asarray(a, np.float64), np.asarray(b, np.float64))
    r = f64_directed(s, _err(s, e, a, b), mode)
    return _rm_zero(np.asarray(r), np.asarray(a), np.asarray(b)) if mode == "rm" else r


def mul_f64(a, b, mode: str):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    p, e = two_prod(a, b)
    safe = _safe(a) & _safe(b)
    out = f64_directed(p, _err(p, e, a, b), mode)
    if not np.all(safe | ~np.isfinite(p)):
        out = np.array(out, np.float64, copy=True, ndmin=1)
        bad = np.flatnonzero(np.broadcast_to(~safe & np.isfinite(p), out.shape))
        ab, bb = np.broadcast_to(a, out.shape), np.broadcast_to(b, out.shape)
        for i in bad:
            out[i] = _exact_round(Fraction(float(ab[i])) * Fraction(float(bb[i])), mode, float(ab[i]) * float(bb[i]))
        out = out.reshape(np.shape(p))
    return out


def _safe(x):
    ax = np.abs(x)
    return (ax == 0) | ((ax < _SAFE_HI) & (ax > _SAFE_LO))


def _exact_round(q: Fraction, mode: str, fallback: float) -> float:
    if q == 0:
        return fallback if fallback == 0 else 0.0
    try:
        r = float(q)  # int / int true division is correctly rounded
    except OverflowError:
        r = float("inf") if q > 0 else float("-inf")
    if mode == "rn":
        return r
    fr = Fraction(r) if np.isfinite(r) else None
    if mode == "rz":
        if fr is None or abs(fr) > abs(q):
            return float(np.nextafter(r, 0.0))
    elif mode == "rm":
        if fr is None or fr > q:
            return float(np.nextafter(r, -np.inf))
    elif fr is None or fr < q:
        return float(np.nextafter(r, np.inf))
    return r


def fma_f64(a, b, c, mode: str = "rn"):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    c = np.asarray(c, np.float64)
    with np.errstate(all="ignore"):
        uh, ul = two_prod(a, b)
        th, tl = two_sum(c, uh)
        s2, e2 = two_sum(tl, ul)
        v = round_to_odd(s2, e2)
        r = th + v
        if mode != "rn":
            r2, e3 = two_sum(th, v)
            r = f64_directed(r2, e3, mode)
        finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
        safe = _safe(a) & _safe(b) & (np.abs(c) < _SAFE_HI) & (np.abs(uh) < _SAFE_HI)
        tiny = (np.abs(uh) < _SAFE_LO) & (uh != 0)
        safe &= ~tiny
        plain = ~finite
        slow = finite & ~safe
        if np.any(plain) or np.any(slow) or (mode != "rn" and True):
            r = np.array(np.broadcast_to(r, np.broadcast_shapes(a.shape, b.shape, c.shape)), np.float64)
            shp = r.shape
            r = r.reshape(-1)
            A, B, C = (np.broadcast_to(x, shp).reshape(-1) for x in (a, b, c))
            pl = np.broadcast_to(plain, shp).reshape(-1)
            if pl.any():
                r[pl] = A[pl] * B[pl] + C[pl]
                # a*b is exact in a fused multiply-add: finite operands' product never overflows to inf, so
                # with c infinite the result is c (two roundings would give NaN for 1e200*1e200 + -inf)
                cinf = pl & np.isfinite(A) & np.isfinite(B) & np.isinf(C)
                r[cinf] = C[cinf]
                if mode != "rn":  # (the JIT computes these on the FPU's mode: ops_hwround.py)
                    r[pl] = _nan_first(r[pl], A[pl], B[pl], C[pl])
            sl = np.broadcast_to(slow if mode == "rn" else finite, shp).reshape(-1)
            for i in np.flatnonzero(sl):
                x, y, z = float(A[i]), float(B[i]), float(C[i])
                q = Fraction(x) * Fraction(y) + Fraction(z)
                r[i] = _exact_round(q, mode, x * y + z)
                if mode == "rm" and q == 0:  # an exact zero (a tiny nonzero result keeps its own sign)
                    pz = x * y
                    if not (pz == 0 and z == 0 and not np.signbit(pz) and not np.signbit(z)):
                        r[i] = -0.0
            r = r.reshape(shp)
            if r.ndim == 0:
                r = r[()]
    return r


def _nan_first(r, a, b, c):
    """r (a*b + c) with its NaNs made x86's in that order of operations, which numpy's loops may not keep when
    both operands of the add are NaNs: a's NaN quieted, else b's, else the default NaN where a*b is inf*0,
    else c's, else the default NaN (inf - inf)"""
    q, default = np.uint64(1 << 51), np.uint64(0xFFF8000000000000)
    with np.errstate(invalid="ignore"):
        invalid = (np.isinf(a) & (b == 0)) | ((a == 0) & np.isinf(b))
    bits = np.where(np.isnan(c), c.view(np.uint64) | q, default)
    bits = np.where(invalid, default, bits)
    bits = np.where(np.isnan(b), b.view(np.uint64) | q, bits)
    bits = np.where(np.isnan(a), a.view(np.uint64) | q, bits)
    return np.where(np.isnan(r), bits.view(np.float64), r)


def div_f64(a, b, mode: str):
    """a / b in f64 rounded in mode rz / rm / rp. The residual r = a - q*b of the round-to-nearest quotient q is
    exact (one fma) when a, b and q lie well inside the normal range; the exact quotient is above q when r
    and b have the same sign. Other finite nonzero elements (subnormal or overflowing results, extreme
    operands) are rounded exactly with fractions; zero, inf and NaN operands give exact results already."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    with np.errstate(all="ignore"):
        q = np.asarray(a / b, np.float64)
        r = fma_f64(-q, b, a)
        side = np.where(r == 0, 0.0, np.where((r > 0) == (b > 0), 1.0, -1.0))
        exact = ~np.isfinite(a) | ~np.isfinite(b) | (a == 0) | (b == 0)
        safe = exact | (_safe(a) & _safe(b) & _safe(q) & (q != 0))
        # f64_directed steps q one ulp toward the mode's direction where side (the sign of exact - q) says so
        out = np.asarray(f64_directed(q, np.where(exact, 0.0, side), mode), np.float64)
    if not np.all(safe):
        out = np.array(np.broadcast_to(out, np.shape(q)), np.float64).reshape(-1)
        A, B = (np.broadcast_to(x, np.shape(q)).reshape(-1) for x in (a, b))
        for i in np.flatnonzero(np.broadcast_to(~safe, np.shape(q)).reshape(-1)):
            x, y = float(A[i]), float(B[i])
            out[i] = _exact_round(Fraction(x) / Fraction(y), mode, 0.0)  # x / y is not 0: the fallback is unused
        out = out.reshape(np.shape(q))
    return out[()] if out.ndim == 0 else out


def _sqrt_side(a):
    """(s, side): s = RN(sqrt(a)) in f64 and side = the sign of sqrt(a) - s (-1 / 0 / +1). The residual
    a - s*s is exact for a well inside the normal range; other positive finite a (subnormal or huge) compare
    s*s with a exactly in fractions. 0, -0, +inf, NaN and negative a: side 0 (s is exact, or NaN)."""
    a = np.asarray(a, np.float64)
    with np.errstate(all="ignore"):
        s = np.asarray(np.sqrt(a), np.float64)
        r = fma_f64(-s, s, a)
        pos = np.isfinite(a) & (a > 0)
        side = np.where(pos & (r != 0), np.sign(r), 0.0)
    slow = pos & ~_safe(a)
    if np.any(slow):
        side = np.array(np.broadcast_to(side, a.shape), np.float64).reshape(-1)
        S, A = s.reshape(-1), a.reshape(-1)
        for i in np.flatnonzero(slow.reshape(-1)):
            d = Fraction(float(A[i])) - Fraction(float(S[i])) ** 2
            side[i] = (d > 0) - (d < 0)
        side = side.reshape(a.shape)
    return s, side


def sqrt_f64(a, mode: str):
    """sqrt in f64 rounded in mode rz / rm / rp: sqrt never overflows or underflows, so stepping RN's result
    one ulp toward the mode where the exact root lies beyond it suffices."""
    s, side = _sqrt_side(a)
    out = np.asarray(f64_directed(s, side, mode), np.float64)
    return out[()] if out.ndim == 0 else out


def sqrt_f32(a, mode: str):
    """sqrt of f32 values rounded to f32 in mode rz / rm / rp: the f64 root rounded to odd keeps the inexact
    information (53 >= 24 + 2), so rounding it to f32 in the mode is exact."""
    s, side = _sqrt_side(np.asarray(a, np.float64))
    return f64_to_f32(round_to_odd(s, side), mode)
