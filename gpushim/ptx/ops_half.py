"""Half-precision arithmetic on .f16/.f16x2/.bf16/.bf16x2 registers (raw bits in b16/b32 registers):
add, sub, mul, fma (.rn, .ftz, .sat, .relu), neg, abs, min, max and setp.

Each lane is widened exactly to f32/f64, computed, and rounded once to the half format: add/sub/mul are exact
in f32 up to that rounding (24 >= 2*11+2 bits), fma goes through an exact f64 sum rounded to odd.
"""

from __future__ import annotations

import numpy as np

from gpushim.ptx import fexact
from gpushim.ptx.nodes import Instr, PredPair
from gpushim.ptx.operands import Ctx
from gpushim.ptx.ops_common import check_mods, itype, mods, nary

HALF_TYPES = ("f16", "f16x2", "bf16", "bf16x2")
_F16_MIN_NORMAL = 2.0**-14
_BF16_MIN_NORMAL = 2.0**-126


def lanes(v, typ: str) -> list:
    """f32 values of the lanes of a half register value (lane 0 in the low bits)."""
    v = np.asarray(v)
    if typ in ("f16", "bf16"):
        parts = [v.astype(np.uint16)]
    else:
        u = v.astype(np.uint32)
        parts = [(u & np.uint32(0xFFFF)).astype(np.uint16), (u >> np.uint32(16)).astype(np.uint16)]
    if typ.startswith("bf"):
        return [(p.astype(np.uint32) << np.uint32(16)).view(np.float32) for p in parts]
    return [p.view(np.float16).astype(np.float32) for p in parts]


def _to_bits(x, bf: bool):
    """Round f32 or f64 values to f16/bf16 bits (nearest even)."""
    x = np.asarray(x)
    if not bf:
        bits = x.astype(np.float16).view(np.uint16)
        nan = x != x
        return np.where(nan, np.uint16(0x7FFF), bits).astype(np.uint16) if np.any(nan) else bits
    from gpushim.ptx.ops_cvt import _f64_to_bf16, f32_to_bf16

    # f64: through f32 rounded to odd, then to bf16: one correct rounding
    bits = _f64_to_bf16(x, "rn") if x.dtype == np.float64 else f32_to_bf16(x)
    nan = x != x
    return np.where(nan, np.uint16(0x7FFF), bits).astype(np.uint16) if np.any(nan) else bits


def pack(vals: list, typ: str):
    bf = typ.startswith("bf")
    bits = [np.asarray(_to_bits(v, bf)) for v in vals]
    if len(bits) == 1:
        return bits[0]
    return bits[0].astype(np.uint32) | (bits[1].astype(np.uint32) << np.uint32(16))


def _ftz(x, bf: bool):
    mn = np.float32(_BF16_MIN_NORMAL if bf else _F16_MIN_NORMAL)
    return np.where(np.abs(x) < mn, np.copysign(np.float32(0), x), x).astype(x.dtype)


def _lanewise(ctx: Ctx, ins: Instr, typ: str, f, nargs: int):
    m = mods(ins)
    bf = typ.startswith("bf")
    do_ftz, do_sat, do_relu = "ftz" in m, "sat" in m, "relu" in m

    def g(*vals):
        ls = [lanes(v, typ) for v in vals]
        out = []
        for k in range(len(ls[0])):
            xs = [lk[k] for lk in ls]
            if do_ftz:
                xs = [_ftz(x, bf) for x in xs]
            r = f(*xs)
            if do_sat:
                r = np.where(r != r, 0, np.clip(r, 0, 1)).astype(r.dtype)
            if do_relu:
                r = np.where(r != r, r, np.maximum(r, 0)).astype(r.dtype)
            if do_ftz:
                r = _ftz(r, bf)
            out.append(r)
        return pack(out, typ)

    return nary(ctx, ins, "b32" if typ.endswith("x2") else "b16", g, nargs)


def _fma(a, b, c):
    s, e = fexact.two_sum(a.astype(np.float64) * b.astype(np.float64), c.astype(np.float64))
    with np.errstate(all="ignore"):
        return np.where(np.isfinite(s), fexact.round_to_odd(s, np.where(np.isfinite(e), e, 0.0)), s)


def compile_half(ctx: Ctx, ins: Instr):
    typ = itype(ctx, ins)
    m = mods(ins)
    base = ins.op.split(".")[0]
    check_mods(ctx, ins, {"rn", "ftz", "sat", "relu", "NaN"})
    if m & {"rz", "rm", "rp"} or (m & {"approx"} and base not in ("neg", "abs")):
        raise ctx.fail(f"{ins.op}")
    if base in ("add", "sub", "mul"):
        f = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[base]
        return _lanewise(ctx, ins, typ, lambda a, b: f(a, b, dtype=np.float32), 2)
    if base in ("fma", "mad"):
        return _lanewise(ctx, ins, typ, _fma, 3)
    if base == "neg":
        return nary(ctx, ins, "b32" if typ.endswith("x2") else "b16", _signop(typ, "neg"), 1)
    if base == "abs":
        return nary(ctx, ins, "b32" if typ.endswith("x2") else "b16", _signop(typ, "abs"), 1)
    if base in ("min", "max"):
        nan = "NaN" in m
        is_min = base == "min"

        def mm(a, b):
            r = (np.minimum if nan else np.fmin)(a, b) if is_min else (np.maximum if nan else np.fmax)(a, b)
            z = (a == 0) & (b == 0)
            if np.any(z):
                neg = (np.signbit(a) | np.signbit(b)) if is_min else (np.signbit(a) & np.signbit(b))
                r = np.where(z, np.where(neg, np.float32(-0.0), np.float32(0.0)), r)
            return r.astype(np.float32)

        return _lanewise(ctx, ins, typ, mm, 2)
    raise ctx.fail(f"{ins.op}")


def _signop(typ: str, op: str):
    mask = np.uint32(0x80008000 if typ.endswith("x2") else 0x8000)

    def f(v):
        u = np.asarray(v).astype(np.uint32)
        r = (u ^ mask) if op == "neg" else (u & ~mask)
        return r if typ.endswith("x2") else r.astype(np.uint16)

    return f


def compile_half_setp(ctx: Ctx, ins: Instr):
    from gpushim.ptx.ops_cmp import _cmp_func

    parts = ins.op.split(".")
    typ = itype(ctx, ins)
    f = _cmp_func(parts[1], "f32")
    boolop = next((p for p in parts[2:] if p in ("and", "or", "xor")), None)
    comb = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(boolop or "")
    rtyp = "b32" if typ.endswith("x2") else "b16"
    ra, rb = ctx.reader(ins.args[1], rtyp), ctx.reader(ins.args[2], rtyp)
    rc = ctx.reader(ins.args[3], "pred") if boolop else None
    dst = ins.args[0]
    pair = isinstance(dst, PredPair)
    w1 = ctx.writer(dst.first) if pair and dst.first is not None else (None if pair else ctx.writer(dst))
    w2 = ctx.writer(dst.second) if pair and dst.second is not None else None

    def setp(st, idx):
        la, lb = lanes(ra(st, idx), typ), lanes(rb(st, idx), typ)
        res = [f(x, y) for x, y in zip(la, lb, strict=True)]
        if comb is not None:
            c = rc(st, idx)
            res = [comb(r, c) for r in res]
        if len(res) == 1:
            if w1 is not None:
                w1(st, idx, res[0])
            if w2 is not None:
                w2(st, idx, ~res[0] if comb is None else comb(~f(la[0], lb[0]), rc(st, idx)))
            return
        if w1 is not None:
            w1(st, idx, res[0])
        if w2 is not None:
            w2(st, idx, res[1])

    return setp


_ONE = {"f16": 0x3C00, "bf16": 0x3F80}  # 1.0


def compile_half_set(ctx: Ctx, ins: Instr):
    """set with half sources or a half destination (PTX ISA, "Half Precision Comparison Instructions: set"): each
    lane compared (in f32, exactly), and written as 1.0 / 0.0 to a half destination, or all ones / 0 to an
    integer one (per 16-bit lane for pairs)."""
    from gpushim.ptx.ops_cmp import _cmp_func

    parts = ins.op.split(".")
    dtyp, styp = parts[-2], parts[-1]
    check_mods(ctx, ins, {parts[1], "ftz", "and", "or", "xor"})
    try:
        f = _cmp_func(parts[1], "f32" if styp in HALF_TYPES else styp)
    except KeyError:
        raise ctx.error(f"{ins.op}: unknown comparison") from None
    boolop = next((p for p in parts[2:] if p in ("and", "or", "xor")), None)
    comb = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(boolop or "")
    do_ftz = "ftz" in mods(ins)
    half_src = styp in HALF_TYPES
    rtyp = ("b32" if styp.endswith("x2") else "b16") if half_src else styp
    ra, rb = ctx.reader(ins.args[1], rtyp), ctx.reader(ins.args[2], rtyp)
    rc = ctx.reader(ins.args[3], "pred") if boolop else None
    w = ctx.writer(ins.args[0])
    base = dtyp.removesuffix("x2")
    one = _ONE.get(base, 0xFFFF if styp.endswith("x2") or dtyp in ("u16", "s16") else 0xFFFFFFFF)

    def set_(st, idx):
        a, b = ra(st, idx), rb(st, idx)
        if half_src:
            la, lb = lanes(a, styp), lanes(b, styp)
            if do_ftz:
                bf = styp.startswith("bf")
                la, lb = [_ftz(x, bf) for x in la], [_ftz(x, bf) for x in lb]
            res = [f(x, y) for x, y in zip(la, lb, strict=True)]
        else:
            res = [f(a, b)]
        if comb is not None:
            c = rc(st, idx)
            res = [comb(r, c) for r in res]
        out = np.zeros(np.shape(res[0]), np.uint64)
        for k, r in enumerate(res):
            out |= np.where(r, np.uint64(one), np.uint64(0)) << np.uint64(16 * k)
        w(st, idx, out.astype(np.uint32 if dtyp.endswith("x2") or dtyp in ("u32", "s32") else np.uint16))

    return set_


def is_half(ins: Instr) -> bool:
    return any(p in HALF_TYPES for p in ins.op.split(".")[1:])
