"""Instructions reached through inline PTX: lop3, dual-destination setp, slct, saturating and 24-bit arithmetic,
bfind, shf.clamp, prmt modes, narrow cvt, pack/unpack, red, directed rounding, .ftz/.sat/.NaN."""

from fractions import Fraction

import numpy as np
import pytest
import refs as R


@pytest.fixture(scope="module")
def asm(dev_for):
    return dev_for("asm")


def sat32(v: int) -> int:
    return max(-(2**31), min(2**31 - 1, v))


def sext(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def bfind_u(v: int) -> int:
    return 0xFFFFFFFF if v == 0 else v.bit_length() - 1


def test_integer_instructions(asm, rng):
    n = 256
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    z = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x[:8] = [0, 1, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0x7FC00000, 0xFF800001, 100]
    y[:8] = [0, 0xFFFFFFFF, 1, 0x80000000, 5, 3, 0x7FFFFFFF, 100]
    z[:8] = [0, 0, 32, 33, 40, 0, 1, 0x80000000]
    po = asm.empty(4 * 24 * n)
    asm.launch("asmInt", n // 64, 64, asm.array(x), asm.array(y), asm.array(z), po)
    o = asm.get(po, np.uint32, 24 * n).reshape(n, 24)
    for i in range(n):
        a, b, c = int(x[i]), int(y[i]), int(z[i])
        sa, sb, sc = sext(a, 32), sext(b, 32), sext(c, 32)
        q = c != 0
        nc = min(c & 63, 32)
        wide = (b << 32) | a
        exp = [
            a ^ b ^ c,
            R.lop3(a, b, c, 0x1B),
            1 if a >= b else 2,
            7 if (sa > sb and q) else 9,
            7 if ((sa >= sb) != (not q)) else 9,
            a if sc >= 0 else b,
            sat32(sa + sb) & R.M32,
            sat32(sa - sb) & R.M32,
            (((a * b) >> 32) + c) & R.M32,
            (sext(a, 24) * sext(b, 24)) & R.M32,
            (((a & 0xFFFFFF) * (b & 0xFFFFFF)) >> 16) & R.M32,
            bfind_u(a),
            bfind_u((~a & R.M32) if sa < 0 else a),
            ((wide << nc) >> 32) & R.M32,
            (wide >> nc) & R.M32,
            R.prmt_mode(a, b, c, "f4e"),
            R.prmt(a, b, c) & R.M32,
            1 if (a & c) == 0 else 0,
            max(-128, min(127, sa)) & R.M32,
            sext(a & 0xFFFF, 16) & R.M32,
            (wide >> 20) & R.M32,
            ((a >> 16) | ((a & 0xFFFF) << 16)) & R.M32,
            a,
            1 if (a & 0x7FFFFFFF) > 0x7F800000 else 0,
        ]
        bad = [(k, g, e) for k, (g, e) in enumerate(zip(o[i].tolist(), exp, strict=True)) if g != e]
        assert not bad, (i, a, b, c, bad)


def _same(g, e):
    return (g == e and np.signbit(g) == np.signbit(e)) or (np.isnan(g) and np.isnan(e))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_float_rounding_modes_and_modifiers(asm, rng):
    n = 256
    x = rng.standard_normal(n).astype(np.float32) * np.float32(1000)
    y = rng.standard_normal(n).astype(np.float32)
    d = rng.standard_normal(n) * 1e3
    x[:6] = [1e-39, -2e-40, np.nan, 0.0, 2.5, -3.5]
    y[:6] = [3.0, 1e-39, 1.0, -0.0, 0.25, np.nan]
    y[10:20] = -x[10:20] + np.float32(1e-3)  # cancellation
    po, pd = asm.empty(4 * 12 * n), asm.empty(8 * 3 * n)
    asm.launch("asmFloat", n // 64, 64, asm.array(x), asm.array(y), asm.array(d), po, pd)
    o = asm.get(po, np.float32, 12 * n).reshape(n, 12)
    od = asm.get(pd, np.float64, 3 * n).reshape(n, 3)
    f32 = np.float32
    sub = lambda v: abs(v) < 2.0**-126 and v != 0  # noqa: E731
    for i in range(n):
        a, b, e = x[i], y[i], d[i]
        fa, fb = float(a), float(b)
        exp = [None] * 12
        if np.isfinite(a) and np.isfinite(b):
            exp[0] = R.round_dir(Fraction(fa) + Fraction(fb), "rz", np.float32) if fa + fb != 0 else f32(fa + fb)
            exp[1] = R.round_dir(Fraction(fa) + Fraction(fb), "rm", np.float32) if fa + fb != 0 else f32(-0.0)
            exp[2] = R.round_dir(Fraction(fa) * Fraction(fb), "rp", np.float32) if fa * fb != 0 else f32(fa * fb)
            p = Fraction(fa) * Fraction(fb) + Fraction(fa)
            exp[9] = R.round_dir(p, "rz", np.float32) if p != 0 else f32(fa * fb + fa)
            s = f32(a + b)
            exp[6] = f32(min(max(float(s), 0.0), 1.0))
            fa0 = 0.0 if sub(fa) else fa
            fb0 = 0.0 if sub(fb) else fb
            m = f32(np.copysign(fa0, fa) * np.copysign(fb0, fb))
            exp[7] = np.copysign(f32(0), m) if sub(float(m)) else m
        exp[3] = R.round_dir(Fraction(float(e)), "rz", np.float32)
        exp[4] = R.round_dir(Fraction(float(e)), "rp", np.float32)
        exp[5] = np.rint(a)
        exp[8] = (
            f32(np.nan)
            if (np.isnan(a) or np.isnan(b))
            else (f32(-0.0) if (a == 0 and b == 0 and (np.signbit(a) or np.signbit(b))) else min(a, b))
        )
        exp[10] = f32(np.float16(e))
        exp[11] = f32(1.0 if sub(fa) else 0.0)
        for j, ej in enumerate(exp):
            if ej is not None:
                assert _same(o[i, j], f32(ej)), (i, j, a, b, e, o[i, j], ej)
        if np.isfinite(a) and np.isfinite(b):
            q1 = Fraction(float(e)) + Fraction(fa)
            q2 = Fraction(float(e)) * Fraction(fb) + Fraction(fa)
            q3 = Fraction(float(e)) ** 2
            assert od[i, 0] == R.round_dir(q1, "rz", np.float64)
            assert od[i, 1] == R.round_dir(q2, "rm", np.float64)
            assert od[i, 2] == R.round_dir(q3, "rp", np.float64)


def test_uniform_operands_match_per_thread_results(asm, rng):
    """Kernel parameters are numpy scalars inside the engine: every instruction's scalar path must agree with
    its array path."""
    n = 24
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    z = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x[:4], y[:4], z[:4] = [0, 0xFFFFFFFF, 5, 0x80000000], [0, 3, 0x80000000, 7], [0, 40, 1, 0xFFFFFFFF]
    po = asm.empty(4 * 24 * n)
    asm.launch("asmInt", 1, n, asm.array(x), asm.array(y), asm.array(z), po)
    ref = asm.get(po, np.uint32, 24 * n).reshape(n, 24)
    for i in range(n):
        pu = asm.empty(4 * 24 * 2)
        asm.launch("asmIntU", 1, 2, int(x[i]), int(y[i]), int(z[i]), pu)
        got = asm.get(pu, np.uint32, 48).reshape(2, 24)
        assert np.array_equal(got[0], ref[i]) and np.array_equal(got[1], ref[i]), i


def test_div_rem_instructions_by_zero_and_overflow(asm, rng):
    x = np.array([7, -7, 0, -(2**31), -(2**31), 5, 123456789, -1], np.int32)
    y = np.array([0, 0, 0, -1, 0, -3, 1000, 7], np.int32)
    x = np.concatenate([x, rng.integers(-(2**31), 2**31, 24, dtype=np.int64).astype(np.int32)])
    y = np.concatenate([y, rng.integers(-50, 50, 24).astype(np.int32)])
    po = asm.empty(16 * x.size)
    asm.launch("asmDiv", 1, x.size, asm.array(x), asm.array(y), po)
    o = asm.get(po, np.int32, 4 * x.size).reshape(-1, 4)
    for i, (a, b) in enumerate(zip(x.tolist(), y.tolist(), strict=True)):
        ua, ub = a & R.M32, b & R.M32
        q = R.div_s(a, b, 32)
        rs = -1 if b == 0 else R.s32(a - q * b)
        ru = R.M32 if ub == 0 else ua % ub
        exp = [rs, R.s32(ru), q, R.s32(R.div_u(ua, ub, 32))]
        assert o[i].tolist() == exp, (a, b)


def _f16_dir(q: Fraction, mode: str) -> int:
    """Directed rounding of an exact rational to f16 bits (finite results only)."""
    r = np.float16(float(q))
    down, up = np.float16(-np.inf), np.float16(np.inf)
    if mode == "rz":
        mode = "rm" if q >= 0 else "rp"
    if mode == "rm":
        while np.isfinite(r) and Fraction(float(r)) > q:
            r = np.nextafter(r, down)
    else:
        while np.isfinite(r) and Fraction(float(r)) < q:
            r = np.nextafter(r, up)
    return int(np.float16(r).view(np.uint16))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_cvt_rounding_and_saturation(asm, rng):
    n = 64
    x = rng.integers(-(2**63), 2**63, n, dtype=np.int64)
    x[:8] = [0, 1, -1, 2**63 - 1, -(2**63), 2**53 + 1, (2**24 + 1) * 2**20, 300]
    x[32:48] = rng.integers(-70000, 70000, 16)
    f = (rng.standard_normal(n) * 300).astype(np.float32)
    f[:8] = [0.5, 1.5, 2.5, -0.5, -255.5, 1e10, -1e10, np.nan]
    po = asm.empty(8 * 10 * n)
    asm.launch("asmCvt", 1, n, asm.array(x), asm.array(f), po)
    o = asm.get(po, np.uint64, 10 * n).reshape(n, 10)
    u32 = lambda v: int(np.float32(v).view(np.uint32))  # noqa: E731
    for i in range(n):
        a, b = int(x[i]), float(f[i])
        ua = a & R.M64
        exp = [
            u32(R.round_dir(Fraction(a), "rp", np.float32)),
            u32(R.round_dir(Fraction(ua), "rm", np.float32)),
            int(np.float64(R.round_dir(Fraction(a), "rz", np.float64)).view(np.uint64)),
            u32(R.round_f32(Fraction(a), 0.0)),
            None if (b != b or abs(b) > 65504) else _f16_dir(Fraction(b), "rz"),
            0 if b != b else (min(max(int(np.rint(b)), -32768), 32767) & R.M32),
            0 if b != b else min(max(int(np.trunc(b)), 0), 255),
            min(max(a, 0), 255),
            0 if b != b else min(max(int(np.ceil(b)), 0), 2**64 - 1),
            _f16_dir(Fraction(R.s32(a & R.M32)), "rm") if abs(R.s32(a & R.M32)) <= 65504 else None,
        ]
        for j, e in enumerate(exp):
            if e is not None:
                assert int(o[i, j]) == e, (i, j, a, b, hex(int(o[i, j])), hex(e))


def test_f32_nan_results_are_canonical(asm):
    x = np.array([np.inf, np.nan, -np.nan, 0.0] * 16, np.float32)
    y = np.array([-np.inf, 1.0, 2.0, np.nan] * 16, np.float32)
    x[2] = np.array(0xFFC00001, np.uint32).view(np.float32)  # a NaN with a payload and the sign bit
    po, pd = asm.empty(4 * 12 * 64), asm.empty(8 * 3 * 64)
    asm.launch("asmFloat", 1, 64, asm.array(x), asm.array(y), asm.array(np.zeros(64)), po, pd)
    o = asm.get(po, np.uint32, 12 * 64).reshape(64, 12)
    for i in range(4):  # add.rz, add.rm, mul.rp, add.sat->0, mul.ftz, min.NaN, fma.rz: every NaN is 0x7fffffff
        for j in (0, 1, 2, 7, 8, 9):
            v = o[i, j]
            if np.isnan(v.view(np.float32)):
                assert v == 0x7FFFFFFF, (i, j, hex(int(v)))


def test_f32_atomic_add_flushes_subnormals_on_global_only(asm):
    g, out = asm.array(np.zeros(1, np.float32)), asm.empty(4)
    v = np.float32(1e-40)  # subnormal
    asm.launch("atomicSubnormal", 1, 4, g, out, v)
    assert asm.get(g, np.float32, 1)[0] == 0.0
    assert asm.get(out, np.float32, 1)[0] == np.float32(v) * 4


def _lanes(v, n, width, signed):
    out = []
    for k in range(n):
        x = (v >> (width * k)) & ((1 << width) - 1)
        out.append(x - (1 << width) if signed and x >> (width - 1) else x)
    return out


def _fns(mask, base, offset):
    pos, cnt = base, 0
    while 0 <= pos < 32:
        if mask >> pos & 1:
            cnt += 1
            if cnt == offset:
                return pos
        pos += 1
    return 0xFFFFFFFF


def test_misc_instructions(asm, rng):
    n = 64
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    f = rng.standard_normal(n).astype(np.float32)
    f[0] = -0.0
    po = asm.empty(4 * 10 * n)
    asm.launch("asmMisc", 1, n, asm.array(x), asm.array(y), asm.array(f), po)
    o = asm.get(po, np.uint32, 10 * n).reshape(n, 10)
    for i in range(n):
        a, b, c = int(x[i]), int(y[i]), float(f[i])
        dp4 = sum(p * q for p, q in zip(_lanes(a, 4, 8, False), _lanes(b, 4, 8, True), strict=True)) + 7
        la, lb = _lanes(a, 2, 16, True), _lanes(b, 4, 8, False)
        dp2lo = la[0] * lb[0] + la[1] * lb[1]
        la_u = _lanes(a, 2, 16, False)
        dp2hi = la_u[0] * lb[2] + la_u[1] * lb[3] + 1
        exp = [dp4 & R.M32, dp2lo & R.M32, dp2hi & R.M32, R.M32 if R.s32(a) < R.s32(b) else 0,
               0x3F800000 if c >= 0 else 0, a if c >= 0 else b, _fns(a, b & 31, 3), 1, 1,
               ((a & 0xFFFFFF) * (b & 0xFFFFFF) + 5) & R.M32]  # fmt: skip
        assert o[i].tolist() == exp, (
            i,
            [(k, hex(g), hex(e)) for k, (g, e) in enumerate(zip(o[i].tolist(), exp, strict=True)) if g != e],
        )


def _bmsk(a, b, clamp):
    a1, b1 = a & 31, b & 31
    mask0 = (0xFFFFFFFF << a1) & R.M32
    s = a1 + b1
    mask1 = (0xFFFFFFFF << s) & R.M32 if s < 32 else 0
    over = s >= 32
    if clamp:
        if a >= 32:
            mask0 = 0
            over = True
        if b >= 32:
            over = True
    mask1 = 0 if over else (R.M32 if b1 == 0 else mask1)
    return mask0 & ~mask1 & R.M32


def _szext(a, b, clamp, signed):
    n = min(b, 32) if clamp else b & 31
    if n == 0:
        return 0
    low = a & ((1 << n) - 1)
    if signed and n < 32 and low >> (n - 1) & 1:
        low -= 1 << n
    return low & R.M32


def test_bmsk_szext(asm, rng):
    n = 64
    x = rng.integers(0, 40, n).astype(np.uint32)
    y = rng.integers(0, 40, n).astype(np.uint32)
    po = asm.empty(16 * n)
    asm.launch("asmMask", 1, n, asm.array(x), asm.array(y), po)
    o = asm.get(po, np.uint32, 4 * n).reshape(n, 4)
    for i in range(n):
        a, b = int(x[i]), int(y[i])
        h = (a * 2654435761) & R.M32
        exp = [_bmsk(a, b, True), _bmsk(a, b, False), _szext(h, b, True, True), _szext(h, b, False, False)]
        assert o[i].tolist() == exp, (a, b)
