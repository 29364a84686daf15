"""Instruction families of the compiling engine (gpushim/ptx/jit/ops_timer.py, ...; kernels in
kernels/jitcover.cu) against the interpreter and the PTX ISA's definitions."""

from __future__ import annotations

import time
from fractions import Fraction

import numpy as np
import pytest
from harness import ENGINE, Dev, compile_ptx

from gpushim.ptx.jit import kernel as jit_kernel


@pytest.fixture
def tiered(monkeypatch):
    """a Dev of jitcover.cu whose kernels compile with tier 2 now or not at all ("off": tier 1 runs them)"""

    def dev(tier2: str) -> Dev:
        monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", tier2)
        jit_kernel._cache.clear()  # the policy applies when a kernel is compiled
        return Dev(compile_ptx("jitcover"))

    yield dev
    jit_kernel._cache.clear()


def _check_tier(dev: Dev, kernel: str, tier2: str) -> None:
    jk = dev.mod.jit_kernel(kernel)
    assert jk is not None, kernel
    assert (jk.tier2_runs > 0) == (tier2 == "now"), (kernel, tier2)


@pytest.mark.parametrize("tier2", ["now", "off"])
@pytest.mark.parametrize("engine", ["jit"], indirect=True)  # runs both engines itself
def test_timers_count_as_the_interpreters_do(engine, tier2, tiered):
    """PTX ISA, special registers %clock/%clock_hi/%clock64 (a cycle counter; %clock is its low 32 bits,
    %clock_hi the high ones) and %globaltimer(_lo/_hi) (ns). Here the clock counts 1.5 GHz of perf_counter_ns
    and strictly increases (gpushim/ptx/state.py clock_now), the global timer is time.time_ns(): both engines
    give values inside the launch's interval in those units, in increasing order within each thread."""
    dev = tiered(tier2)
    nb, tpb = 4, 96
    n = nb * tpb
    slack = 10**6  # cycles: the strict increase may run ahead of the clock by one per read
    for eng in ("interp", "jit"):
        ENGINE["name"] = eng
        po = dev.empty(64 * n)
        c_lo, t_lo = int(time.perf_counter_ns() * 1.5), time.time_ns()
        dev.launch("timers", nb, tpb, po)
        c_hi, t_hi = int(time.perf_counter_ns() * 1.5) + slack, time.time_ns() + 256
        o = dev.get(po, np.uint64, 8 * n).reshape(n, 8).astype(object)
        c0, lo, hi, g0, glo, ghi, c1, g1 = (o[:, k] for k in range(8))
        assert all(c_lo <= a < b <= c_hi for a, b in zip(c0, c1, strict=True)), eng
        assert all(0 <= (x - a) % 2**32 < slack for x, a in zip(lo, c0, strict=True)), eng  # %clock: low bits
        assert all(a >> 32 <= h <= b >> 32 for h, a, b in zip(hi, c0, c1, strict=True)), eng
        assert all(t_lo <= a < b <= t_hi for a, b in zip(g0, g1, strict=True)), eng
        assert all(t_lo >> 32 <= h <= t_hi >> 32 for h in ghi), eng
        assert all(0 <= (x - g) % 2**32 <= t_hi - t_lo for x, g in zip(glo, g0, strict=True)), eng
    _check_tier(dev, "timers", tier2)


def _words(rng, n: int) -> np.ndarray:
    """4 words per thread: random bits, with equal pairs, small and special values (NaN, ±0, ±inf) mixed in"""
    x = rng.integers(0, 2**32, 4 * n, dtype=np.uint64).astype(np.uint32)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x3F800000, 1, 0xFFFFFFFF, 31, 32, 33],
                       np.uint32)  # fmt: skip
    x[: 4 * 256] = rng.choice(special, 4 * 256)
    eq = rng.random(n) < 0.2
    x[1::4][eq] = x[0::4][eq]
    return x


def _both(dev: Dev, kernel: str, x: np.ndarray, per: int, n: int) -> np.ndarray:
    """the kernel's output (per words a thread) on the interpreter and on the JIT: bit-identical (and "diff",
    which runs both engines from the same memory, fails the launch otherwise)"""
    px = dev.array(x)
    outs = {}
    for eng in ("interp", "jit", "diff"):
        ENGINE["name"] = eng
        po = dev.empty(4 * per * n)
        dev.launch(kernel, (n + 255) // 256, 256, px, po, n)
        outs[eng] = dev.get(po, np.uint32, per * n).reshape(n, per)
    assert np.array_equal(outs["interp"], outs["jit"]) and np.array_equal(outs["jit"], outs["diff"])
    return outs["jit"]


def _szext(a: int, n: int, signed: bool) -> int:
    low = a & ((1 << n) - 1)
    if signed and n and low >> (n - 1):
        low -= 1 << n
    return low & 0xFFFFFFFF


@pytest.mark.parametrize("tier2", ["now", "off"])
@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_set_and_szext_match_the_interpreter(engine, tier2, tiered, rng):
    dev = tiered(tier2)
    n = 4096
    x = _words(rng, n)
    got = _both(dev, "setSzext", x, 48, n)
    _check_tier(dev, "setSzext", tier2)
    # PTX ISA, set: d = all ones (integer d) or 1.0f (f32 d) where the comparison holds, else 0
    a, b, c, e = (x[k::4] for k in range(4))
    ones = np.uint32(0xFFFFFFFF)
    sa, sb = a.view(np.int32), b.view(np.int32)
    for col, want in enumerate((sa == sb, sa != sb, sa < sb, sa <= sb, sa > sb, sa >= sb)):
        assert np.array_equal(got[:, col], np.where(want, ones, 0)), col
    for col, want in enumerate((a == b, a != b, a < b, a <= b, a > b, a >= b), start=6):
        assert np.array_equal(got[:, col], np.where(want, ones, 0)), col
    fa, fb = a.view(np.float32), b.view(np.float32)
    nan = np.isnan(fa) | np.isnan(fb)
    with np.errstate(invalid="ignore"):
        ordered = (fa == fb, (fa != fb) & ~nan, fa < fb, fa <= fb, fa > fb, fa >= fb)
    for k, want in enumerate(ordered + tuple(w | nan for w in ordered) + (~nan, nan)):
        col = 17 + k if k < 6 else (23 + k - 6 if k < 14 else 29 + k - 14)
        if k == 7:  # neu: not equal or unordered
            want = ~(fa == fb)
        assert np.array_equal(got[:, col].view(np.float32), np.where(want, np.float32(1), np.float32(0))), col
    p = (c & 1) != 0  # the kernel tests c's low bit
    for col, want in zip((35, 36, 37), (((sa < sb) & p), ((sa < sb) | p), ((sa < sb) ^ p)), strict=True):
        assert np.array_equal(got[:, col], np.where(want, ones, 0)), col
    # szext: the n lowest bits of a, sign- or zero-extended (clamp: n at most 32; wrap: n mod 32)
    for i in range(0, n, 3):
        ai, ni = int(a[i]), int(e[i]) & 63
        want = [_szext(ai, min(ni, 32), True), _szext(ai, min(ni, 32), False), _szext(ai, ni & 31, True),
                _szext(ai, ni & 31, False)]  # fmt: skip
        assert got[i, 38:42].tolist() == want, (i, ai, ni)


_VOPS = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "absdiff": lambda x, y: abs(x - y),
         "min": min, "max": max, "avrg": lambda x, y: (x + y + 1) >> 1}  # fmt: skip
_VTYPES = ("u32.u32.u32", "s32.s32.s32", "s32.u32.s32", "u32.s32.u32")


def _video_ref(op: str, lanes: int, types: str, form: str, a: int, b: int, c: int) -> int:
    """PTX ISA, SIMD video instructions: per lane (a and b's lanes extended by their types) the operation,
    .sat clamping to d's lane range; .add sums the lanes' results and c, otherwise the lanes pack into d"""
    w = 32 // lanes
    dt, at, bt = types.split(".")

    def lane(x: int, k: int, signed: bool) -> int:
        v = (x >> (w * k)) & ((1 << w) - 1)
        return v - (1 << w) if signed and v >> (w - 1) else v

    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if dt == "s32" else (0, (1 << w) - 1)
    out = c if form == "add" else 0
    for k in range(lanes):
        r = _VOPS[op](lane(a, k, at == "s32"), lane(b, k, bt == "s32"))
        if form == "sat":
            r = max(lo, min(hi, r))
        out = out + r if form == "add" else out | (r & ((1 << w) - 1)) << (w * k)
    return out & 0xFFFFFFFF


@pytest.mark.parametrize("tier2", ["now", "off"])
@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_simd_video_instructions_match_the_interpreter(engine, tier2, tiered, rng):
    dev = tiered(tier2)
    n = 512
    x = rng.integers(0, 2**32, 3 * n, dtype=np.uint64).astype(np.uint32)
    # lanes at the edges of both widths' ranges
    b8 = rng.choice(np.array([0x00, 0x01, 0x7F, 0x80, 0x81, 0xFF], np.uint32), (3 * 128, 4))
    x[: 3 * 128] = b8[:, 0] | b8[:, 1] << 8 | b8[:, 2] << 16 | b8[:, 3] << 24
    b16 = rng.choice(np.array([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF], np.uint32), (3 * 128, 2))
    x[3 * 128 : 3 * 256] = b16[:, 0] | b16[:, 1] << 16
    got = _both(dev, "video", x, 36, n)
    _check_tier(dev, "video", tier2)
    for i in range(0, n, 3):
        a, b, c = (int(v) for v in x[3 * i : 3 * i + 3])
        col = 0
        for nl in (4, 2):
            for op in _VOPS:
                for form in ("", "sat", "add"):  # the kernel's types rotate: (operation + form) mod 4
                    types = _VTYPES[(col // 3 + col % 3) % 4]
                    assert got[i, col] == _video_ref(op, nl, types, form, a, b, c), (i, op, nl, types, form)
                    col += 1


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_directed_rcp_f32_matches_the_interpreter_and_exact_rounding(engine, tiered, rng):
    """PTX ISA, rcp.{rn,rz,rm,rp}.f32: 1/a correctly rounded in the mode (.rz toward 0, .rm toward -inf,
    .rp toward +inf); .ftz flushes subnormal inputs and results to sign-preserving zero."""
    dev = tiered("now")
    n = 2048
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    bits[n // 2 :] = (bits[n // 2 :] & 0x807FFFFF) | 0x3F800000  # 1 <= |a| < 2: inexact reciprocals mostly
    a = bits.view(np.float32)
    a[:16] = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.0, 3.0, 1e-45, -1e-40, 1e-38, 3.4028235e38,
                       -3.0, 0.1, 7.0, 2.0**-126], np.float32)  # fmt: skip
    got = _both(dev, "rcpModes", a.view(np.uint32), 8, n).view(np.float32)
    _check_tier(dev, "rcpModes", "now")
    inf = np.float32(np.inf)
    for i in range(n):
        x = float(a[i])
        if not np.isfinite(x) or x == 0:
            continue
        q = 1 / Fraction(x)
        for col, down in ((1, q > 0), (2, True), (3, False)):  # .rz: down for positive results, else up
            r = got[i, col]
            with np.errstate(over="ignore"):
                other = np.nextafter(r, inf if down else -inf)  # the next f32 on the other side of q
            lo, hi = (r, other) if down else (other, r)
            if not np.isfinite(r):  # overflow, rounded away from zero
                assert abs(q) > Fraction(float(np.finfo(np.float32).max)) and (r > 0) == (q > 0), (x, col, r)
                continue
            assert (Fraction(float(lo)) <= q) if np.isfinite(lo) else True, (x, col, r)
            assert (q < Fraction(float(hi)) or (q == Fraction(float(hi)) and not down)) if np.isfinite(hi) else True


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_packed_16bit_min_max_compile(engine):
    """min/max(.relu).{u16x2,s16x2} compile (ops_video.py); test_simd16.py checks their values against the PTX
    ISA with "diff", which compares them with the interpreter's."""
    dev = Dev(compile_ptx("simd16", "sm_90"))
    assert dev.mod.jit_kernel("simd16") is not None and dev.mod.jit_kernel("simd16U") is not None
