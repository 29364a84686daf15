"""Integer and floating-point edge cases, FMA exactness against exact rational arithmetic, approximate math."""

from fractions import Fraction

import numpy as np
import pytest
import refs as R


@pytest.fixture(scope="module")
def edges(dev_for):
    return dev_for("edges")


def _int_inputs(rng, n):
    special = [0, 1, -1, 2, -2, 7, 2**31 - 1, -(2**31), 12345, -77, 0x55555555, 2**16]
    x = np.concatenate([np.array(special * 4, np.int64), rng.integers(-(2**31), 2**31, n, dtype=np.int64)])
    y = np.concatenate([np.repeat(np.array([0, -1, 1, 3], np.int64), len(special)), rng.integers(-(2**31), 2**31, n)])
    y[-n // 4 :] = rng.integers(-40, 40, n // 4)
    s = np.concatenate([np.arange(len(special) * 4) * 5 % 70, rng.integers(0, 256, n)]).astype(np.int64)
    return x.astype(np.int32), y.astype(np.int32), s.astype(np.uint32)


def test_integer_edge_cases(edges, rng):
    x, y, s = _int_inputs(rng, 208)
    n = len(x)
    X = np.concatenate([[0, 5, -(2**63), 2**40, -1, 2**63 - 1], rng.integers(-(2**63), 2**63, n - 6)]).astype(np.int64)
    Y = np.concatenate([[7, 0, -1, 0, 2**33, -(2**62)], rng.integers(-(2**63), 2**63, n - 6)]).astype(np.int64)
    Y[n // 2 :: 3] = rng.integers(-100, 100, len(Y[n // 2 :: 3]))
    X[n // 2 :: 5] = rng.integers(0, 1000, len(X[n // 2 :: 5]))
    Y[n // 2 :: 5] = rng.integers(0, 10, len(Y[n // 2 :: 5]))
    args = [edges.array(v) for v in (x, y, s)]
    po, po64 = edges.empty(4 * 20 * n), edges.empty(8 * 8 * n)
    edges.launch("intEdges", n // 16, 16, *args, po, po64, edges.array(X), edges.array(Y))
    got = edges.get(po, np.int32, 20 * n).reshape(n, 20)
    got64 = edges.get(po64, np.int64, 8 * n).reshape(n, 8)
    for i in range(n):
        a, b, sh = int(x[i]), int(y[i]), int(s[i])
        ua, ub = a & R.M32, b & R.M32
        q = R.div_s(a, b, 32)
        uq = R.div_u(ua, ub, 32)
        exp = [
            R.s32(R.shl(ua, sh, 32)),
            R.shr_s(a, sh, 32),
            R.s32(R.shr_u(ua, sh, 32)),
            R.s32((a * b) >> 32),
            R.s32((ua * ub) >> 32),
            q,
            R.s32(a - q * b),
            R.s32(uq),
            R.s32(ua - uq * ub),
            bin(ua).count("1"),
            R.clz(ua, 32),
            R.s32(int(f"{ua:032b}"[::-1], 2)),
            0 if a == 0 else (ua & -ua).bit_length(),
            R.prmt(a, b, sh & 0x7777),
            R.s32((((ub << 32) | ua) << (sh & 31)) >> 32),
            R.s32(((ub << 32) | ua) >> (sh & 31)),
            R.s32(abs(a - b) + 7),
            R.s32(abs(a) + min(a, b) * 3 + max(ua, ub)),
            R.bfe_s32(a, sh & 63, (sh >> 3) & 63),
            R.bfi_b32(a, b, sh & 31, (sh >> 2) & 31),
        ]
        assert got[i].tolist() == exp, (i, a, b, sh)
        A, B = int(X[i]), int(Y[i])
        uA, uB = A & R.M64, B & R.M64
        if (uA | uB) >> 32 == 0:  # nvcc takes a 32-bit unsigned path when both fit
            qq = R.div_u(uA, uB, 32)
            rr = uA - qq * uB & R.M32
        else:
            qq = R.div_s(A, B, 64)
            rr = R.s64(A - qq * B)
        uqq = R.div_u(uA, uB, 32) if (uA | uB) >> 32 == 0 else R.div_u(uA, uB, 64)
        exp64 = [
            R.s64((A * B) >> 64),
            R.s64((uA * uB) >> 64),
            R.s64(qq),
            R.s64(rr),
            R.s64(uqq),
            R.s64(R.shl(uA, sh & 127, 64)),
            R.shr_s(A, sh & 127, 64),
            R.s64(R.clz(uA, 64) + bin(uA).count("1") * 100 + a * b),
        ]
        assert got64[i].tolist() == exp64, (i, A, B, sh)


F_SPECIAL = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -1.5, -2.5, 3e9, -3e9, 2.0**31,
             -(2.0**31), 2.0**32, 4.5e9, 1e-40, -1e-42, 1.0, 0.999, 1e30, -7.25]  # fmt: skip


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_float_edge_cases(edges, rng):
    sp = np.array(F_SPECIAL, np.float32)
    x = np.concatenate([np.repeat(sp, len(sp)), rng.standard_normal(96).astype(np.float32) * 100])
    y = np.concatenate([np.tile(sp, len(sp)), rng.standard_normal(96).astype(np.float32)])
    n = len(x)
    pad = (-n) % 32
    x = np.concatenate([x, np.ones(pad, np.float32)])
    y = np.concatenate([y, np.ones(pad, np.float32)])
    n = len(x)
    po, pf = edges.empty(4 * 12 * n), edges.empty(4 * 8 * n)
    edges.launch("floatEdges", n // 32, 32, edges.array(x), edges.array(y), po, pf)
    got = edges.get(po, np.int32, 12 * n).reshape(n, 12)
    gf = edges.get(pf, np.float32, 8 * n).reshape(n, 8)

    def sat_int(v, lo, hi, rnd):
        if v != v:
            return 0
        r = rnd(float(v))
        return int(min(max(r, lo), hi))

    for i in range(n):
        a, b = x[i], y[i]
        af, bf = float(a), float(b)
        exp = [af < bf, af <= bf, af > bf, af >= bf, af == bf, af != bf]
        exp.append(sat_int(a, -(2**31), 2**31 - 1, np.trunc))
        exp.append(R.s32(sat_int(a, 0, 2**32 - 1, np.trunc)))
        exp.append(sat_int(a, -(2**31), 2**31 - 1, np.rint))
        exp.append(R.s32(sat_int(a, -(2**63), 2**63 - 1, np.trunc)))
        exp.append(sat_int(a, -(2**31), 2**31 - 1, np.floor) ^ sat_int(b, -(2**31), 2**31 - 1, np.ceil))
        exp.append(int(np.isnan(a)) + 2 * int(np.isinf(b)) + 4 * int(not (af < bf)))
        assert got[i].tolist() == [int(e) for e in exp], (i, a, b)
        fexp = [
            np.float32(0.0) if a != a else np.float32(min(max(af, 0.0), 1.0)),
            np.float32(-0.0) if (a == 0 and b == 0 and (np.signbit(a) or np.signbit(b))) else np.fmin(a, b),
            np.float32(0.0) if (a == 0 and b == 0 and not (np.signbit(a) and np.signbit(b))) else np.fmax(a, b),
            np.copysign(a, b),
            np.divide(a, b, dtype=np.float32),
            np.sqrt(np.abs(a)),
            (a * np.float32(3.0)) - b,  # nvcc emits mul.f32 then sub.f32 here
            R.rz_f32_from_int(int(np.float32(a).view(np.int32))),
        ]
        for j, e in enumerate(fexp):
            if e is None:
                continue
            g = gf[i, j]
            assert (g == e and np.signbit(g) == np.signbit(e)) or (np.isnan(g) and np.isnan(e)), (i, j, a, b, g, e)


def _fma_cases_f32(rng, n):
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    c = rng.standard_normal(n).astype(np.float32)
    q = n // 6
    # massive cancellation: c = -RN(a*b), result = the exact low part of the product
    c[:q] = -(a[:q] * b[:q])
    c[q : 2 * q] = np.nextafter(-(a[q : 2 * q] * b[q : 2 * q]), np.float32(np.inf) * np.sign(rng.standard_normal(q)))
    # products exactly at or around a rounding midpoint: (1 + k 2^-12)(1 + j 2^-12) with tiny addends
    k = rng.integers(1, 4096, q).astype(np.float32)
    j = rng.integers(1, 4096, q).astype(np.float32)
    a[2 * q : 3 * q] = 1 + k * np.float32(2.0**-12)
    b[2 * q : 3 * q] = 1 + j * np.float32(2.0**-12)
    c[2 * q : 3 * q] = rng.choice(np.array([0.0, 2.0**-60, -(2.0**-60), 2.0**-30, -(2.0**-40)], np.float32), q)
    # subnormal results and overflow
    a[3 * q : 4 * q] *= np.float32(2.0**-70)
    b[3 * q : 4 * q] *= np.float32(2.0**-60)
    c[3 * q : 4 * q] *= np.float32(2.0**-128)
    a[4 * q : 4 * q + 8] = np.float32(2.0**100)
    b[4 * q : 4 * q + 8] = np.float32(2.0**30)
    c[4 * q : 4 * q + 8] = np.float32(-3e38)
    return a, b, c


def _fma_cases_f64(rng, n):
    a, b, c = rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(n)
    q = n // 6
    c[:q] = -(a[:q] * b[:q])
    c[q : 2 * q] = np.nextafter(-(a[q : 2 * q] * b[q : 2 * q]), np.inf * np.sign(rng.standard_normal(q)))
    k = rng.integers(1, 2**26, q).astype(np.float64)
    j = rng.integers(1, 2**26, q).astype(np.float64)
    a[2 * q : 3 * q] = 1 + k * 2.0**-26
    b[2 * q : 3 * q] = 1 + j * 2.0**-26
    c[2 * q : 3 * q] = rng.choice(np.array([0.0, 2.0**-120, -(2.0**-120), 2.0**-60, -(2.0**-90)]), q)
    a[3 * q : 4 * q] *= 2.0**-540
    b[3 * q : 4 * q] *= 2.0**-500
    c[3 * q : 4 * q] *= 2.0**-1050
    a[4 * q : 4 * q + 8] = 2.0**600
    b[4 * q : 4 * q + 8] = 2.0**424
    c[4 * q : 4 * q + 8] = -1.7e308
    a[4 * q + 8 : 4 * q + 16] = 2.0**900
    b[4 * q + 8 : 4 * q + 16] = 2.0**-800
    return a, b, c


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_fma_exact_against_rationals(edges, rng):
    n = 1536
    a, b, c = _fma_cases_f32(rng, n)
    A, B, C = _fma_cases_f64(rng, n)
    pd, pD = edges.empty(4 * n), edges.empty(8 * n)
    args = [edges.array(v) for v in (a, b, c)] + [pd] + [edges.array(v) for v in (A, B, C)] + [pD, n]
    edges.launch("fmaExact", n // 128, 128, *args)
    d = edges.get(pd, np.float32, n)
    D = edges.get(pD, np.float64, n)
    for i in range(n):
        x, y, z = (float(v) for v in (a[i], b[i], c[i]))
        e = R.round_f32(Fraction(x) * Fraction(y) + Fraction(z), x * y + z)
        assert d[i] == e and np.signbit(d[i]) == np.signbit(e), (i, x, y, z, d[i], e)
        X, Y, Z = float(A[i]), float(B[i]), float(C[i])
        E = R.round_f64(Fraction(X) * Fraction(Y) + Fraction(Z), X * Y + Z)
        assert D[i] == E and np.signbit(D[i]) == np.signbit(E), (i, X, Y, Z, D[i], E)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_approximate_math_within_tolerance(edges, rng):
    n = 2048
    x = rng.uniform(-np.pi, np.pi, n).astype(np.float32)
    x[:4] = [0.0, 1.0, -2.0, 3.0]
    po = edges.empty(4 * 8 * n)
    edges.launch("approxMath", n // 256, 256, edges.array(x), po, n)
    g = edges.get(po, np.float32, 8 * n).reshape(n, 8)
    xd = x.astype(np.float64)
    x1 = (np.abs(x) + np.float32(1)).astype(np.float64)  # the f32 sum the kernel feeds to lg2 / rsqrt
    assert np.max(np.abs(g[:, 0] - np.sin(xd))) < 2.0**-20.5
    assert np.max(np.abs(g[:, 1] - np.cos(xd))) < 2.0**-20.5
    for col, ref in ((2, np.exp2(xd)), (3, np.log2(x1)), (4, 1 / np.sqrt(x1)),
                     (5, 1 / xd), (6, np.exp(xd))):  # fmt: skip
        rel = np.abs(g[:, col] - ref) / np.maximum(np.abs(ref), 1e-30)
        assert np.max(rel[np.isfinite(ref) & (np.abs(ref) > 1e-6)]) < 2e-6, col
    assert np.array_equal(g[:, 7], x.astype(np.float16).astype(np.float32))
