"""Floating-point arithmetic: add/sub/mul (rounding modes, .ftz, .sat), fma/mad, div, abs/neg, min/max,
copysign, testp, and the special functions (rcp, sqrt, rsqrt, sin, cos, ex2, lg2, tanh).

Basic operations and fma are correctly rounded (bit-exact with the GPU). The .approx special functions are
computed in f64 and rounded, i.e. to within 1 ulp of the exact result, while NVIDIA documents up to 2 ulp
(ex2, lg2, rsqrt, rcp.approx) or an absolute error of 2^-20.5 (sin, cos on [-pi, pi]) for the hardware:
results may differ from a GPU in the last bits, but never by more than those documented bounds.
"""

from __future__ import annotations

import numpy as np

from gpushim.ptx import fexact
from gpushim.ptx.nodes import Instr
from gpushim.ptx.operands import Ctx
from gpushim.ptx.ops_common import check_mods, itype, mods, nary
from gpushim.ptx.ops_half import _lanewise as half_lanewise
from gpushim.ptx.ops_half import compile_half, is_half

_F32_MIN_NORMAL = np.float32(2.0**-126)
_F64_MIN_NORMAL = np.float64(2.0**-1022)
_MODES = ("rn", "rz", "rm", "rp")
_ARITH = frozenset({"rn", "rz", "rm", "rp", "ftz", "sat"})


def _check_type(ctx: Ctx, ins: Instr, typ: str) -> None:
    if typ not in ("f32", "f64"):
        raise ctx.fail(f"{ins.op} ({typ} arithmetic)")


def ftz(x):
    """Flush f32 subnormals to zero, keeping the sign."""
    return np.where(np.abs(x) < _F32_MIN_NORMAL, np.copysign(np.float32(0), x), x).astype(np.float32)


def sat(x):
    x = np.where(x != x, x.dtype.type(0), x)  # NaN -> +0
    return np.clip(x, x.dtype.type(0), x.dtype.type(1))


_CANON32 = np.array(0x7FFFFFFF, np.uint32).view(np.float32)[()]


def canon32(r):
    """f32 NaN results are the GPU's canonical NaN 0x7fffffff (numpy keeps payloads and signs)."""
    if r.__class__ is np.ndarray and r.ndim:
        if r.size and np.isnan(np.minimum.reduce(r)):
            r = np.where(r != r, _CANON32, r).astype(np.float32)
        return r
    return _CANON32 if r != r else r


def _canonical(f, typ: str, nargs: int):
    if typ != "f32":
        return f
    if nargs == 1:
        return lambda a: canon32(f(a))
    if nargs == 2:
        return lambda a, b: canon32(f(a, b))
    return lambda a, b, c: canon32(f(a, b, c))


def _wrap(f, m: set[str], typ: str, nargs: int, canonical: bool = True):
    """Apply .ftz to inputs and output and .sat to the output; f32 NaN results become canonical."""
    if canonical:
        f = _canonical(f, typ, nargs)
    do_ftz = "ftz" in m and typ == "f32"
    do_sat = "sat" in m
    if not do_ftz and not do_sat:
        return f
    if nargs == 1:

        def g1(a):
            if do_ftz:
                a = ftz(a)
            r = f(a)
            if do_ftz:
                r = ftz(r)
            return sat(r) if do_sat else r

        return g1
    if nargs == 2:

        def g2(a, b):
            if do_ftz:
                a, b = ftz(a), ftz(b)
            r = f(a, b)
            if do_ftz:
                r = ftz(r)
            return sat(r) if do_sat else r

        return g2

    def g3(a, b, c):
        if do_ftz:
            a, b, c = ftz(a), ftz(b), ftz(c)
        r = f(a, b, c)
        if do_ftz:
            r = ftz(r)
        return sat(r) if do_sat else r

    return g3


def _mode(m: set[str]) -> str:
    for x in _MODES:
        if x in m:
            return x
    return "rn"


def compile_fbin(ctx: Ctx, ins: Instr):
    """add / sub / mul on f32 and f64."""
    if is_half(ins):
        return compile_half(ctx, ins)
    check_mods(ctx, ins, _ARITH)
    m = mods(ins)
    typ = itype(ctx, ins)
    _check_type(ctx, ins, typ)
    base = ins.op.split(".")[0]
    mode = _mode(m)
    if mode == "rn":
        f = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[base]
    elif typ == "f32":
        f = {
            "add": lambda a, b: fexact.add_f32(a, b, mode),
            "sub": lambda a, b: fexact.add_f32(a, b, mode, sub=True),
            "mul": lambda a, b: fexact.mul_f32(a, b, mode),
        }[base]
    else:
        f = {
            "add": lambda a, b: fexact.add_f64(a, b, mode),
            "sub": lambda a, b: fexact.add_f64(a, b, mode, sub=True),
            "mul": lambda a, b: fexact.mul_f64(a, b, mode),
        }[base]
    return nary(ctx, ins, typ, _wrap(f, m, typ, 2), 2)


def compile_fma(ctx: Ctx, ins: Instr):
    if is_half(ins):
        return compile_half(ctx, ins)
    check_mods(ctx, ins, _ARITH)
    m = mods(ins)
    typ = itype(ctx, ins)
    _check_type(ctx, ins, typ)
    mode = _mode(m)
    if ins.op.startswith("mad") and not (m & set(_MODES)) and typ == "f32":
        # mad.f32 without rounding is fused on sm_20+ (same as fma.rn)
        mode = "rn"
    if typ == "f32":
        f = lambda a, b, c: fexact.fma_f32(a, b, c, mode)  # noqa: E731
    else:
        f = lambda a, b, c: fexact.fma_f64(a, b, c, mode)  # noqa: E731
    return nary(ctx, ins, typ, _wrap(f, m, typ, 3), 3)


def compile_fdiv(ctx: Ctx, ins: Instr):
    check_mods(ctx, ins, _ARITH | {"approx", "full"})
    m = mods(ins)
    typ = itype(ctx, ins)
    _check_type(ctx, ins, typ)
    dt = np.float32 if typ == "f32" else np.float64
    mode = _mode(m)
    if mode != "rn" and typ == "f32":

        def f(a, b):
            q = np.asarray(a, np.float64) / np.asarray(b, np.float64)
            # the f64 quotient is not exact; refine the inexact flag with the remainder
            r = fexact.fma_f64(-q, np.asarray(b, np.float64), np.asarray(a, np.float64))
            e = np.where(np.isfinite(r), r / np.asarray(b, np.float64), 0.0)
            return fexact.f64_to_f32(fexact.round_to_odd(q, e), mode)

    elif mode != "rn":
        f = lambda a, b: fexact.div_f64(a, b, mode)  # noqa: E731
    else:

        def f(a, b):
            return np.divide(a, b, dtype=dt)

    return nary(ctx, ins, typ, _wrap(f, m, typ, 2), 2)


def compile_fabs_neg(ctx: Ctx, ins: Instr):
    if is_half(ins):
        return compile_half(ctx, ins)
    check_mods(ctx, ins, {"ftz"})
    typ = itype(ctx, ins)
    if typ not in ("f32", "f64"):
        raise ctx.fail(f"{ins.op}")
    m = mods(ins)
    ut = np.uint32 if typ == "f32" else np.uint64
    sign = ut(1 << (31 if typ == "f32" else 63))
    fdt = np.float32 if typ == "f32" else np.float64
    if ins.op.startswith("abs"):
        f = lambda a: (a.view(ut) & ~sign).view(fdt)  # noqa: E731
    else:
        f = lambda a: (a.view(ut) ^ sign).view(fdt)  # noqa: E731
    return nary(ctx, ins, typ, _wrap(f, m, typ, 1, canonical=False), 1)


def compile_fminmax(ctx: Ctx, ins: Instr):
    if is_half(ins):
        return compile_half(ctx, ins)
    check_mods(ctx, ins, {"ftz", "NaN"})
    typ = itype(ctx, ins)
    if typ not in ("f32", "f64"):
        raise ctx.fail(f"{ins.op}")
    m = mods(ins)
    is_min = ins.op.startswith("min")
    ut = np.uint32 if typ == "f32" else np.uint64
    nan = "NaN" in m

    def f(a, b):
        r = (np.minimum if nan else np.fmin)(a, b) if is_min else (np.maximum if nan else np.fmax)(a, b)
        both_zero = (a == 0) & (b == 0)
        if np.any(both_zero):
            bits = (a.view(ut) | b.view(ut)) if is_min else (a.view(ut) & b.view(ut))
            r = np.where(both_zero, bits.view(r.dtype), r)
        return r

    return nary(ctx, ins, typ, _wrap(f, m, typ, 2), 2)


def compile_copysign(ctx: Ctx, ins: Instr):
    typ = itype(ctx, ins)
    _check_type(ctx, ins, typ)
    return nary(ctx, ins, typ, lambda a, b: np.copysign(b, a), 2)


def compile_testp(ctx: Ctx, ins: Instr):
    typ = itype(ctx, ins)
    _check_type(ctx, ins, typ)
    op = ins.op.split(".")[1]
    mn = _F32_MIN_NORMAL if typ == "f32" else _F64_MIN_NORMAL
    f = {
        "finite": np.isfinite,
        "infinite": np.isinf,
        "number": lambda a: ~np.isnan(a),
        "notanumber": np.isnan,
        "normal": lambda a: np.isfinite(a) & (np.abs(a) >= mn),
        "subnormal": lambda a: (np.abs(a) < mn) & (a != 0),
    }.get(op)
    if f is None:
        raise ctx.error(f"{ins.op}: unknown test")
    return nary(ctx, ins, typ, f, 1)


def _special(name: str, typ: str):
    dt = np.float32 if typ == "f32" else np.float64

    def via64(g):
        def h(a):
            with np.errstate(all="ignore"):
                return g(np.asarray(a, np.float64)).astype(dt)

        return h

    return {
        "rcp": via64(lambda a: 1.0 / a) if typ == "f32" else (lambda a: np.divide(1.0, a)),
        "sqrt": (lambda a: np.sqrt(a)),
        "rsqrt": via64(lambda a: 1.0 / np.sqrt(a)),
        "sin": via64(np.sin),
        "cos": via64(np.cos),
        "ex2": via64(np.exp2),
        "lg2": via64(np.log2),
        "tanh": via64(np.tanh),
    }[name]


def compile_special(ctx: Ctx, ins: Instr):
    check_mods(ctx, ins, {"approx", "ftz", "rn", "rz", "rm", "rp", "full"})
    typ = itype(ctx, ins)
    m = mods(ins)
    base = ins.op.split(".")[0]
    if is_half(ins) and base in ("tanh", "ex2") and "approx" in m:
        # tanh.approx / ex2.approx of .f16, .bf16 and their pairs (PTX ISA 7.0, 7.8): each lane correctly
        # rounded, within the ISA's error bound for the approximation
        g = np.tanh if base == "tanh" else np.exp2
        return half_lanewise(ctx, ins, typ, lambda a: g(np.asarray(a, np.float64)), 1)
    if typ not in ("f32", "f64"):
        raise ctx.fail(f"{ins.op} ({typ})")
    if base == "rcp" and "approx" not in m and typ == "f32":
        f = lambda a: np.divide(np.float32(1), a, dtype=np.float32)  # noqa: E731
        mode = _mode(m)
        if mode != "rn":
            f = lambda a: fexact.f64_to_f32(np.divide(1.0, np.asarray(a, np.float64)), mode)  # noqa: E731
    elif base == "rcp" and typ == "f64" and "approx" in m:
        # rcp.approx.ftz.f64: the hardware gives ~20 correct bits; we return the correctly rounded value
        f = lambda a: np.divide(1.0, a)  # noqa: E731
    elif base in ("sqrt", "rcp") and "approx" not in m and _mode(m) != "rn":
        mode = _mode(m)
        if base == "rcp":  # f64 (f32 rcp is above)
            f = lambda a: fexact.div_f64(np.float64(1.0), a, mode)  # noqa: E731
        else:
            f = lambda a: (fexact.sqrt_f64 if typ == "f64" else fexact.sqrt_f32)(a, mode)  # noqa: E731
    else:
        f = _special(base, typ)
    return nary(ctx, ins, typ, _wrap(f, m, typ, 1), 1)


HANDLERS = {
    "fma": compile_fma, "copysign": compile_copysign, "testp": compile_testp, "rcp": compile_special,
    "sqrt": compile_special, "rsqrt": compile_special, "sin": compile_special, "cos": compile_special,
    "ex2": compile_special, "lg2": compile_special, "tanh": compile_special,
}  # fmt: skip
