"""Instructions the compiling engine compiles since round 6 (kernels in kernels/jitcover6.cu), on the JIT (no
fallback), bit for bit against the interpreter, on both tier-1 code generators and on tier 2, with edge inputs
(NaN, infinities, ties, overflow, subnormals); results also checked against the PTX ISA's definitions."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from harness import ENGINE, Dev, assert_compiled_as_configured, compile_ptx

from gpushim.cuda_errors import CudaError
from gpushim.ptx.jit import kernel as jit_kernel

CONFIGS = [("full", "off"), ("cheap", "off"), ("auto", "now")]  # (GPUSHIM_PTX_JIT_T1, GPUSHIM_PTX_JIT_TIER2)
SPECIAL64 = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
                      1.7976931348623157e308, -1.7976931348623157e308, 0.1, 3.0, 1e-310, 2.0**-1074 * 3,
                      1.5, 2.5, 0.5], np.float64)  # fmt: skip


@pytest.fixture(params=CONFIGS, ids=lambda c: f"t1={c[0]},tier2={c[1]}")
def dev(request, monkeypatch):
    t1, tier2 = request.param
    monkeypatch.setenv("GPUSHIM_PTX_JIT_T1", t1)
    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", tier2)
    monkeypatch.setenv("GPUSHIM_PTX_JIT_CACHE", "off")  # compiled here, by the generator asked for
    jit_kernel._cache.clear()
    d = Dev(compile_ptx("jitcover6"))
    d.config = request.param
    yield d
    jit_kernel._cache.clear()


def _both(dev: Dev, kernel: str, ins: list[np.ndarray], per: int, n: int, dt) -> np.ndarray:
    """the kernel's output on the interpreter, the JIT and "diff" (which fails a launch that differs):
    bit-identical; the kernel was compiled (no fallback) by the configured generator and tier"""
    ptrs = [dev.array(x) for x in ins]
    outs = {}
    for eng in ("interp", "jit", "diff"):
        ENGINE["name"] = eng
        po = dev.empty(per * n * np.dtype(dt).itemsize)
        dev.launch(kernel, (n + 127) // 128, 128, *ptrs, po, n)
        outs[eng] = dev.get(po, dt, per * n).reshape(n, per)
    it = np.uint64 if np.dtype(dt).itemsize == 8 else np.uint32
    assert np.array_equal(outs["interp"].view(it), outs["jit"].view(it))
    assert np.array_equal(outs["jit"].view(it), outs["diff"].view(it))
    assert_compiled_as_configured(dev, kernel)
    return outs["jit"]


def _f64_operands(rng, n: int) -> np.ndarray:
    """3n f64: random bits, nearby magnitudes, specials, products that cancel c exactly or nearly (fma), ties"""
    x = rng.integers(0, 2**64, 3 * n, dtype=np.uint64, endpoint=False).view(np.float64).copy()
    near = rng.standard_normal(3 * n) * 2.0 ** rng.integers(-30, 30, 3 * n)
    x[n : 2 * n] = near[n : 2 * n]
    x[: 8 * SPECIAL64.size] = rng.choice(SPECIAL64, 8 * SPECIAL64.size)
    k = slice(2 * n, 2 * n + n // 4)  # fma: c = -(a*b) rounded, so the exact sum is the product's error
    a, b = x[0::3][k], x[1::3][k]
    with np.errstate(all="ignore"):
        x[2::3][k] = -(a * b)
    tiny = slice(2 * n + n // 4, 2 * n + n // 3)  # subnormal results
    x[0::3][tiny] *= 2.0**-1000
    return x


def _round(q: Fraction, mode: str) -> float:
    """q rounded to f64 toward zero, -inf or +inf (q inside the normal range)"""
    r = float(q)
    if Fraction(r) == q:
        return r
    lo, hi = (r, np.nextafter(r, np.inf)) if Fraction(r) < q else (np.nextafter(r, -np.inf), r)
    return float(lo if mode == "rm" or (mode == "rz" and q > 0) else hi)


@pytest.mark.parametrize("engine", ["jit"], indirect=True)  # compares the engines itself
def test_directed_f64_and_f32_sqrt_on_the_fpu_mode(engine, dev, rng):
    n = 3000
    x = _f64_operands(rng, n)
    got = _both(dev, "hw64", [x], 15, n, np.float64)
    a, b, c = x[0::3], x[1::3], x[2::3]
    # PTX ISA, Floating-Point Instructions: .rz/.rm/.rp round the exact result toward zero, -inf, +inf
    with np.errstate(all="ignore"):
        ok = np.isfinite(a * b * c) & (np.abs(a * b) > 1e-290) & (np.abs(a) > 1e-290) & (np.abs(b) > 1e-290)
    idx = np.flatnonzero(ok)[:200]
    assert idx.size > 100
    for i in idx:
        fa, fb, fc = (Fraction(float(v)) for v in (a[i], b[i], c[i]))
        for col, q in ((0, fa * fb), (3, fa * fb + fc), (6, fa / fb), (9, 1 / fa)):
            if not Fraction(1, 10**300) < abs(q) < Fraction(10**300):  # (the normal range, well inside)
                continue
            for j, mode in enumerate(("rz", "rm", "rp")):
                assert got[i, col + j] == _round(q, mode), (i, col, mode)
    with np.errstate(all="ignore"):
        assert np.isnan(got[:, 12][a < 0]).all() and np.array_equal(got[:, 12][a == np.inf], a[a == np.inf])
    f = _f64_operands(rng, n)[: 3 * n].astype(np.float32)
    f[:64] = np.array([0, -0.0, 1e-45, 1e-40, 2, 3, np.inf, -1, np.nan, 1.1754942e-38] * 6 + [4, 5, 6, 7], np.float32)
    got32 = _both(dev, "hw32", [f], 4, 3 * n, np.float32)
    for i in range(0, 3 * n, 7):
        v = float(f[i])
        if not (np.isfinite(v) and v > 0):
            continue
        r = got32[i, 0]  # the f32 root toward zero: r <= sqrt(v) < next(r)
        assert Fraction(float(r)) ** 2 <= Fraction(v) < Fraction(float(np.nextafter(r, np.float32(np.inf)))) ** 2
        assert got32[i, 1] == r and (got32[i, 2] == r if Fraction(float(r)) ** 2 == Fraction(v) else
                                     got32[i, 2] == np.nextafter(r, np.float32(np.inf)))  # fmt: skip


def _fns(mask: int, base: int, off: int) -> int:
    """PTX ISA, fns: the bit position of the n-th set bit of mask counting from base (base included) toward
    the higher bits (offset n > 0) or the lower ones (n < 0); offset 0: base if its bit is set; else -1"""
    base &= 31
    if off == 0:
        return base if mask >> base & 1 else 0xFFFFFFFF
    order = range(base, 32) if off > 0 else range(base, -1, -1)
    hits = [p for p in order if mask >> p & 1]
    return hits[abs(off) - 1] if abs(off) <= len(hits) else 0xFFFFFFFF


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_fns_sat_set_ftz_and_f16_conversions(engine, dev, rng):
    n = 4096
    w = rng.integers(0, 2**32, 4 * n, dtype=np.uint64).astype(np.uint32)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x3F800000, 1, 0x807FFFFF, 0x477FF000,
                        0x477FEFFF, 0x33000000, 0x33000001, 0xFFFFFFFF, 127, 128, 0xFFFFFF80, 0x7FFFFFFF],
                       np.uint32)  # fmt: skip
    w[: 4 * 512] = rng.choice(special, 4 * 512)
    w[4 * 512 : 4 * 1024 : 4] = (rng.standard_normal(512) * 100).astype(np.float32).view(np.uint32)
    w[4 * 1024 : 4 * 1536 : 4] = rng.integers(-300, 300, 512).astype(np.int32).view(np.uint32)
    w[4 * 1024 + 2 : 4 * 1536 : 4] = rng.integers(-40, 40, 512).astype(np.int32).view(np.uint32)
    d = _f64_operands(rng, n)[:n]
    d[n // 2 :] = rng.standard_normal(n - n // 2) * 2.0 ** rng.integers(-30, 18, n - n // 2)
    got = _both(dev, "bits6", [w, d], 32, n, np.uint32)
    a, b, c = (w[k::4] for k in range(3))
    sa = a.view(np.int32)
    for i in range(0, n, 5):
        assert got[i, 0] == _fns(int(a[i]), int(b[i]), int(c[i].view(np.int32))), i
        assert got[i, 1] == _fns(int(a[i]), int(b[i]), int(c[i]) % 67 - 33), i
    # cvt.sat between integers: clamped to the destination type's range
    assert np.array_equal(got[:, 2].view(np.int32), np.clip(sa, -128, 127))
    assert np.array_equal(got[:, 3], np.clip(sa, 0, 255))
    assert np.array_equal(got[:, 4].view(np.int32), np.minimum(a, 32767).astype(np.int32))
    assert np.array_equal(got[:, 5], np.maximum(sa, 0).astype(np.uint32))
    assert np.array_equal(got[:, 6], np.minimum(a, 2**31 - 1))
    assert np.array_equal(got[:, 7], np.clip(sa.astype(np.int64) * 3, 0, 255).astype(np.uint32))
    # set.ftz: subnormal inputs compare as zeros of their sign (PTX ISA, set: .ftz)
    fa, fb = a.view(np.float32).copy(), b.view(np.float32).copy()
    for v in (fa, fb):
        v[np.abs(v) < np.float32(1.1754944e-38)] = 0.0
    with np.errstate(invalid="ignore"):
        assert np.array_equal(got[:, 8], np.where(fa < fb, 0xFFFFFFFF, 0))
        assert np.array_equal(got[:, 9].view(np.float32), np.where((fa == fb) | np.isnan(fa) | np.isnan(fb), 1, 0))
        assert np.array_equal(got[:, 10], np.where(fa >= fb, 0xFFFFFFFF, 0))
    # cvt.rn.f16: numpy's conversion; the directed modes: the two neighbours of the exact value around it
    af = a.view(np.float32)
    for src, cols in ((af.astype(np.float64), (11, 12, 13, 14)), (d, (16, 17, 18, 19))):  # finite sources
        ok = np.isfinite(src)
        h = {m: got[ok, k].astype(np.uint16).view(np.float16).astype(np.float64)
             for m, k in zip("nzmp", cols, strict=True)}  # fmt: skip
        v = src[ok]
        with np.errstate(all="ignore"):  # (overflow to infinity in the casts)
            assert np.array_equal(got[ok, cols[0]], v.astype(np.float16).view(np.uint16))
            assert (np.abs(h["z"]) <= np.abs(v)).all() and (h["m"] <= v).all() and (h["p"] >= v).all()
            exact = h["n"] == v
            assert (h["m"][exact] == v[exact]).all() and (h["p"][exact] == v[exact]).all()
            assert ((h["m"] == h["p"]) == exact).all()
    # cvt to f16 from integers: numpy's conversion of the value (exact in f64), and its directed neighbours
    with np.errstate(all="ignore"):
        assert np.array_equal(got[:, 20], sa.astype(np.float16).view(np.uint16))
        hz = got[:, 21].astype(np.uint16).view(np.float16).astype(np.float64)
        hm = got[:, 22].astype(np.uint16).view(np.float16).astype(np.float64)
        hp = got[:, 23].astype(np.uint16).view(np.float16).astype(np.float64)
    assert (hz <= a).all() and (hm <= sa).all() and (hp >= sa.astype(np.float64) * 65536).all()
    # testp (PTX ISA: normal/subnormal by magnitude, zero neither)
    fa32 = a.view(np.float32)
    tiny32, tiny64 = np.float32(2.0**-126), 2.0**-1022
    with np.errstate(invalid="ignore"):
        for col, want in ((24, np.isfinite(fa32)), (25, np.isinf(fa32)), (26, ~np.isnan(d)), (27, np.isnan(fa32)),
                          (28, np.isfinite(d) & (np.abs(d) >= tiny64)),
                          (29, (np.abs(fa32) < tiny32) & (fa32 != 0))):  # fmt: skip
            assert np.array_equal(got[:, col], want.astype(np.uint32)), col
    # isspacep of a global, shared or local address (the kernel picks one by b's low bits; nvcc puts the copy
    # of a parameter whose address is taken in local memory)
    kind = b & 3
    assert np.array_equal(got[:, 30], (kind == 0).astype(np.uint32))
    assert np.array_equal(got[:, 31], np.array([0, 2, 4, 4], np.uint32)[kind])


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_cp_async_copies_at_issue_and_faults_as_the_interpreter(engine, dev, rng):
    """PTX ISA, cp.async: copies cp-size bytes from global to shared memory, the bytes past src-size being
    zeros; the data is there after cp.async.wait_group (here: when the instruction runs, as the interpreter)"""
    n = 1024
    x = rng.integers(0, 2**32, 8 * n + 64, dtype=np.uint64).astype(np.uint32)
    got = _both_cp(dev, x, n, 0)
    want = np.empty((n, 8), np.uint32)
    idx = (np.arange(n) // 128) * 128 + (np.arange(n) % 128 + 1) % 128  # each thread shows its neighbour's
    src = x[: 8 * n].reshape(n, 8)[idx]
    want[:, :6] = src[:, :6]
    keep = (3 + idx % 128) % 9  # src-size of the 8-byte copy, in bytes
    b45 = src[:, 4:6].copy().view(np.uint8).reshape(n, 8)
    b45[np.arange(8)[None, :] >= keep[:, None]] = 0
    want[:, 4:6] = b45.view(np.uint32).reshape(n, 2)
    want[:, 6] = src[:, 6] & 0xFFFF  # 4 bytes, 2 of them copied
    want[:, 7] = 0xDEADBEEF
    assert np.array_equal(got, want)
    # a source past the allocation: the same error and message on both engines
    msgs = []
    px, po = dev.array(x), dev.empty(32 * n)
    for eng in ("interp", "jit"):
        ENGINE["name"] = eng
        with pytest.raises(CudaError) as e:
            dev.launch("cpAsync6", n // 128, 128, px, po, n, 3, 8 * n)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "cp.async" in msgs[0], msgs


def _both_cp(dev: Dev, x: np.ndarray, n: int, off: int) -> np.ndarray:
    px = dev.array(x)
    outs = {}
    for eng in ("interp", "jit", "diff"):
        ENGINE["name"] = eng
        po = dev.empty(32 * n)
        dev.launch("cpAsync6", n // 128, 128, px, po, n, 3, off)
        outs[eng] = dev.get(po, np.uint32, 8 * n).reshape(n, 8)
    assert np.array_equal(outs["interp"], outs["jit"]) and np.array_equal(outs["jit"], outs["diff"])
    assert jit_kernel.fallback_reason(dev.mod.source_hash, "cpAsync6") is None
    assert dev.mod.jit_kernel("cpAsync6") is not None
    return outs["jit"]


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_half_atomics_compiled(engine, dev, rng):
    """atom.add.noftz on f16/f16x2/bf16/bf16x2 (kernels/halfatomics.cu; CUDA's expected sums are checked in
    test_half_atomics.py) on the JIT: bit-identical to the interpreter, overflow to infinity and NaNs included"""
    d = Dev(compile_ptx("halfatomics", "sm_90"))
    d.config = dev.config
    n = 128
    v = (rng.standard_normal(n) * 4).astype(np.float32)
    v[:8] = [3e-6, 2.5e-6, -1e-7, 7e-6, 60000.0, 60000.0, np.inf, np.nan]
    v[64:66] = [-np.inf, 3.0e38]
    shapes = ((4, np.uint16), (1, np.uint32), (2, np.uint16), (1, np.uint32), (n, np.uint16), (n, np.uint16))
    outs = {}
    for eng in ("interp", "jit", "diff"):
        ENGINE["name"] = eng
        ptrs = [d.array(np.zeros(k, t)) for k, t in shapes]
        d.launch("halfAtomics", 2, n // 2, *ptrs[:4], d.array(v), *ptrs[4:])
        outs[eng] = [d.get(p, t, k) for p, (k, t) in zip(ptrs, shapes, strict=True)]
    for a, b, c in zip(outs["interp"], outs["jit"], outs["diff"], strict=True):
        assert np.array_equal(a, b) and np.array_equal(b, c)
    assert jit_kernel.fallback_reason(d.mod.source_hash, "halfAtomics") is None
    assert d.mod.jit_kernel("halfAtomics") is not None


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_sm_specials_are_the_interpreters(engine, dev):
    """%smid (PTX ISA: the SM a thread runs on, in 0..%nsmid-1; here the block's linear index mod 132, as the
    interpreter), %nsmid, %gridid, %nwarpid"""
    grid, tpb = (70, 2, 3), 32
    nthreads = 70 * 2 * 3 * tpb
    outs = {}
    for eng in ("interp", "jit", "diff"):
        ENGINE["name"] = eng
        po = dev.empty(16 * nthreads)
        dev.launch("specials6", grid, tpb, po)
        outs[eng] = dev.get(po, np.uint32, 4 * nthreads).reshape(nthreads, 4)
    assert np.array_equal(outs["interp"], outs["jit"]) and np.array_equal(outs["jit"], outs["diff"])
    assert jit_kernel.fallback_reason(dev.mod.source_hash, "specials6") is None
    block = np.arange(nthreads) // tpb
    assert np.array_equal(outs["jit"][:, 0], block % 132)
    assert (outs["jit"][:, 1:] == [132, 1, 64]).all()


@pytest.mark.parametrize("engine", ["jit"], indirect=True)  # compares the engines itself
def test_fma_f64_of_finite_operands_and_an_infinite_addend_is_the_addend(engine, dev):
    """PTX ISA, fma: "computes the product of a and b to infinite precision and then adds c to this product,
    again in infinite precision" (IEEE 754 fusedMultiplyAdd): a product of finite operands is never infinite, so
    with c = +-inf the result is c in every rounding mode, not the NaN of (a*b overflowing to inf) + c."""
    big = 1e200
    rows = np.array([[big, big, -np.inf], [big, -big, np.inf], [1.7976931348623157e308, 2.0, -np.inf],
                     [-big, big, np.inf], [3.0, 4.0, -np.inf]] * 26, np.float64)  # fmt: skip
    n = len(rows)
    got = _both(dev, "hw64", [rows.reshape(-1)], 15, n, np.float64)
    for j in (3, 4, 5):  # fma.rz / fma.rm / fma.rp
        assert np.array_equal(got[:, j], rows[:, 2]), j


def test_fma_f64_to_nearest_with_an_infinite_addend_on_the_interpreter():
    """the same rule to nearest (fexact.fma_f64, which the interpreter's fma.rn.f64 uses)"""
    from gpushim.ptx import fexact

    a = np.array([1e200, 1e200, 2.0, np.inf, np.inf, np.nan])
    b = np.array([1e200, -1e200, 3.0, 0.0, 1.0, 1.0])
    c = np.array([-np.inf, np.inf, -np.inf, 1.0, -np.inf, np.inf])
    r = fexact.fma_f64(a, b, c, "rn")
    assert r[0] == -np.inf and r[1] == np.inf and r[2] == -np.inf  # c itself
    assert np.isnan(r[3]) and np.isnan(r[4]) and np.isnan(r[5])  # inf*0, inf + -inf, a NaN operand
