"""Host references for the tensor-core tests: the arithmetic documented in gpushim/ptx/ops_mma.py, written
independently (scalar loops, exact fractions for f64)."""

from fractions import Fraction

import numpy as np


def tf32(x: np.ndarray) -> np.ndarray:
    """The tf32 value of f32 bits (low 13 mantissa bits ignored)."""
    return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def tf32_rna(x: np.ndarray) -> np.ndarray:
    """cvt.rna.tf32.f32: round to 10 mantissa bits, ties away from zero (finite inputs)."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)


def fma_exact(a: float, b: float, c: float, mode: str = "rn") -> float:
    """a*b + c rounded once, to nearest even (Fraction -> float is correctly rounded) or toward zero/-inf/+inf."""
    q = Fraction(a) * Fraction(b) + Fraction(c)
    r = float(q)
    if mode == "rz" and abs(Fraction(r)) > abs(q):
        r = float(np.nextafter(r, 0.0))
    elif mode == "rm" and Fraction(r) > q:
        r = float(np.nextafter(r, -np.inf))
    elif mode == "rp" and Fraction(r) < q:
        r = float(np.nextafter(r, np.inf))
    return r


def mma(a, b, c, acc: str, sat: bool = False, rnd: str = "rn"):
    """One mma: d = round(c + sum over k of exact products, summed in f64 in order of k) for f32/f16 D;
    fma per k in order for f64; exact with wrap (or clamp for .satfinite) for s32."""
    if acc == "f64":
        d = np.array(c, np.float64, copy=True)
        for i in range(d.shape[0]):
            for j in range(d.shape[1]):
                x = float(d[i, j])
                for k in range(a.shape[1]):
                    x = fma_exact(float(a[i, k]), float(b[k, j]), x, rnd)
                d[i, j] = x
        return d
    if acc == "s32":
        s = np.asarray(c, np.int64) + np.asarray(a, np.int64) @ np.asarray(b, np.int64)
        return np.clip(s, -(2**31), 2**31 - 1) if sat else ((s + 2**31) % 2**32) - 2**31
    s = np.asarray(c, np.float64).copy()
    for k in range(a.shape[1]):
        s = s + np.asarray(a[:, k, None], np.float64) * np.asarray(b[None, k, :], np.float64)
    f = s.astype(np.float32)
    return f.astype(np.float64) if acc == "f32" else f.astype(np.float16).astype(np.float64)


def gemm(a, b, c, tk: int, acc: str, sat: bool = False):
    """C walked through K in mma steps of depth tk, rounded to the accumulator type after each step."""
    d = c
    for k0 in range(0, a.shape[1], tk):
        d = mma(a[:, k0 : k0 + tk], b[k0 : k0 + tk], d, acc, sat)
    return d
