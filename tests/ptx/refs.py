"""Independent references for edge-case tests: PTX semantics written out per element, exact rational rounding."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF


def s32(v: int) -> int:
    v &= M32
    return v - (1 << 32) if v >> 31 else v


def s64(v: int) -> int:
    v &= M64
    return v - (1 << 64) if v >> 63 else v


def div_s(a: int, b: int, bits: int) -> int:
    """div.sN: truncating; x/0 = -1 (all ones); MIN/-1 wraps to MIN."""
    if b == 0:
        return -1
    q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return s32(q) if bits == 32 else s64(q)


def div_u(a: int, b: int, bits: int) -> int:
    return (1 << bits) - 1 if b == 0 else a // b


def shl(a: int, n: int, bits: int) -> int:
    return 0 if n >= bits else (a << n) & ((1 << bits) - 1)


def shr_s(a: int, n: int, bits: int) -> int:
    return a >> min(n, bits - 1)


def shr_u(a: int, n: int, bits: int) -> int:
    return 0 if n >= bits else a >> n


def clz(a: int, bits: int) -> int:
    return bits - a.bit_length()


def bfe_s32(a: int, pos: int, ln: int) -> int:
    msb = 31
    bits = [(a >> i) & 1 for i in range(32)]
    sbit = 0 if ln == 0 else bits[min(pos + ln - 1, msb)]
    d = 0
    for i in range(32):
        bit = bits[pos + i] if (i < ln and pos + i <= msb) else sbit
        d |= bit << i
    return s32(d)


def bfi_b32(a: int, b: int, pos: int, ln: int) -> int:
    f = b & M32
    i = 0
    while i < ln and pos + i <= 31:
        f = (f & ~(1 << (pos + i))) | (((a >> i) & 1) << (pos + i))
        i += 1
    return s32(f)


def prmt(a: int, b: int, c: int) -> int:
    x = (a & M32) | ((b & M32) << 32)
    r = 0
    for i in range(4):
        sel = (c >> (4 * i)) & 0xF
        byte = (x >> (8 * (sel & 7))) & 0xFF
        if sel & 8:
            byte = 0xFF if byte & 0x80 else 0
        r |= byte << (8 * i)
    return s32(r)


def round_f32(q: Fraction, zero_hint: float) -> np.float32:
    """Correctly rounded (nearest-even) f32 of an exact rational."""
    if q == 0:
        return np.float32(zero_hint)
    try:
        r = np.float32(float(q))
    except OverflowError:
        return np.float32(math.inf if q > 0 else -math.inf)
    best, bestd = None, None
    for c in (np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))):
        if not np.isfinite(c):
            continue
        d = abs(Fraction(float(c)) - q)
        if bestd is None or d < bestd or (d == bestd and int(np.float32(c).view(np.uint32)) & 1 == 0):
            best, bestd = c, d
    fmax = Fraction(float(np.finfo(np.float32).max))
    half_ulp = Fraction(2) ** (127 - 24)
    if abs(q) >= fmax + half_ulp:
        return np.float32(math.inf if q > 0 else -math.inf)
    return np.float32(best)


def round_f64(q: Fraction, zero_hint: float) -> float:
    if q == 0:
        return zero_hint
    try:
        return q.numerator / q.denominator  # Python's int/int division is correctly rounded
    except OverflowError:
        return math.inf if q > 0 else -math.inf


def rz_f32_from_int(v: int) -> np.float32:
    r = np.float32(float(v))
    if abs(Fraction(int(r)) if np.isfinite(r) else 0) > abs(v):
        r = np.nextafter(r, np.float32(0))
    return np.float32(r)


def round_dir(q: Fraction, mode: str, dtype) -> float:
    """Round an exact rational to float32/float64 toward zero (rz), -inf (rm) or +inf (rp)."""
    dt = np.dtype(dtype).type
    r = dt(float(q))
    up, down = dt(np.inf), dt(-np.inf)
    if mode == "rz":
        mode = "rm" if q >= 0 else "rp"
    if mode == "rm":
        while np.isfinite(r) and Fraction(float(r)) > q:
            r = np.nextafter(r, down)
        while np.isfinite(np.nextafter(r, up)) and Fraction(float(np.nextafter(r, up))) <= q:
            r = np.nextafter(r, up)
    else:
        while np.isfinite(r) and Fraction(float(r)) < q:
            r = np.nextafter(r, up)
        while np.isfinite(np.nextafter(r, down)) and Fraction(float(np.nextafter(r, down))) >= q:
            r = np.nextafter(r, down)
    return r


def lop3(a: int, b: int, c: int, lut: int) -> int:
    r = 0
    for i in range(32):
        k = (((a >> i) & 1) << 2) | (((b >> i) & 1) << 1) | ((c >> i) & 1)
        r |= ((lut >> k) & 1) << i
    return r


def prmt_mode(a: int, b: int, c: int, mode: str) -> int:
    x = (a & M32) | ((b & M32) << 32)
    tables = {"f4e": [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]],
              "b4e": [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]]}  # fmt: skip
    sel = tables[mode][c & 3]
    return sum(((x >> (8 * s)) & 0xFF) << (8 * i) for i, s in enumerate(sel))


def half_value(bits: int, bf: bool) -> float:
    if bf:
        return float(np.array(bits << 16, np.uint32).view(np.float32))
    return float(np.array(bits, np.uint16).view(np.float16))


def round_half(q: Fraction, bf: bool, zero_hint: float = 0.0) -> int:
    """Bits of the nearest-even f16 (or bf16) to an exact rational (finite, in range)."""
    if q == 0:
        return (
            int(np.array(zero_hint, np.float32).view(np.uint32) >> 16)
            if bf
            else int(np.array(zero_hint, np.float16).view(np.uint16))
        )
    approx = np.float32(float(q))
    start = int(approx.view(np.uint32) >> 16) if bf else int(np.float16(approx).view(np.uint16))
    best, bestd = None, None
    for b in (start - 1, start, start + 1):
        v = half_value(b & 0xFFFF, bf)
        if not np.isfinite(v):
            continue
        d = abs(Fraction(v) - q)
        if bestd is None or d < bestd or (d == bestd and b & 1 == 0):
            best, bestd = b & 0xFFFF, d
    return best
