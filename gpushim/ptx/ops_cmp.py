"""Comparisons and selects: setp (all comparisons, .and/.or/.xor, two destinations), set, selp, slct."""

from __future__ import annotations

import numpy as np

from gpushim.ptx.nodes import Instr, PredPair
from gpushim.ptx.operands import Ctx
from gpushim.ptx.ops_common import itype
from gpushim.ptx.ops_float import ftz
from gpushim.ptx.types import S, U, type_size

_ORDERED = {"eq": np.equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}


def _cmp_func(op: str, typ: str):
    if typ[0] == "f":
        if op in _ORDERED:
            return _ORDERED[op]
        if op == "ne":
            return lambda a, b: (a != b) & (a == a) & (b == b)
        if op in ("equ", "ltu", "leu", "gtu", "geu"):
            g = _ORDERED[op[:2]]
            return lambda a, b: g(a, b) | (a != a) | (b != b)
        if op == "neu":
            return np.not_equal
        if op == "num":
            return lambda a, b: (a == a) & (b == b)
        if op == "nan":
            return lambda a, b: (a != a) | (b != b)
        raise KeyError(op)
    n = type_size(typ)
    if op in ("lo", "ls", "hi", "hs"):
        ut = U[n]
        g = {"lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal}[op]
        return lambda a, b: g(a.view(ut), b.view(ut))
    if op == "ne":
        return np.not_equal
    if op in _ORDERED:
        if typ[0] == "b" and op != "eq":
            # .bX comparisons other than eq/ne are unsigned
            ut = U[n]
            g = _ORDERED[op]
            return lambda a, b: g(a.view(ut), b.view(ut))
        return _ORDERED[op]
    raise KeyError(op)


def compile_setp(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    typ = itype(ctx, ins)
    if typ in ("f16", "f16x2", "bf16", "bf16x2"):
        from gpushim.ptx.ops_half import compile_half_setp

        return compile_half_setp(ctx, ins)
    cmpop = parts[1]
    try:
        f = _cmp_func(cmpop, typ)
    except KeyError:
        raise ctx.error(f"{ins.op}: unknown comparison") from None
    boolop = next((p for p in parts[2:] if p in ("and", "or", "xor")), None)
    do_ftz = "ftz" in parts and typ == "f32"
    dst = ins.args[0]
    ra = ctx.reader(ins.args[1], typ)
    rb = ctx.reader(ins.args[2], typ)
    rc = ctx.reader(ins.args[3], "pred") if boolop else None
    comb = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(boolop or "")
    if isinstance(dst, PredPair):
        wp = ctx.writer(dst.first) if dst.first is not None else (lambda st, idx, v: None)
        wq = ctx.writer(dst.second) if dst.second is not None else (lambda st, idx, v: None)
    else:
        wp = ctx.writer(dst)
        wq = None

    def setp(st, idx):
        a, b = ra(st, idx), rb(st, idx)
        if do_ftz:
            a, b = ftz(a), ftz(b)
        t = f(a, b)
        if comb is not None:
            c = rc(st, idx)
            p = comb(t, c)
            q = comb(~t, c) if wq is not None else None
        else:
            p = t
            q = ~t if wq is not None else None
        wp(st, idx, p)
        if wq is not None:
            wq(st, idx, q)

    return setp


def compile_set(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    dtyp, styp = parts[-2], parts[-1]
    if {dtyp, styp} & {"f16", "f16x2", "bf16", "bf16x2"}:
        from gpushim.ptx.ops_half import compile_half_set

        return compile_half_set(ctx, ins)
    cmpop = parts[1]
    f = _cmp_func(cmpop, styp)
    boolop = next((p for p in parts[2:] if p in ("and", "or", "xor")), None)
    comb = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(boolop or "")
    ra, rb = ctx.reader(ins.args[1], styp), ctx.reader(ins.args[2], styp)
    rc = ctx.reader(ins.args[3], "pred") if boolop else None
    w = ctx.writer(ins.args[0])
    # PTX ISA, set: .ftz flushes subnormal f32 *inputs* to sign-preserving zero (the 1.0f/0 result is normal)
    do_ftz = "ftz" in parts and styp == "f32"
    if dtyp == "f32":
        one, zero = np.float32(1.0), np.float32(0.0)
    else:
        dt = S[4] if dtyp == "s32" else U[4]
        one, zero = dt.type(-1) if dtyp == "s32" else dt.type(0xFFFFFFFF), dt.type(0)

    def set_(st, idx):
        a, b = ra(st, idx), rb(st, idx)
        if do_ftz:
            a, b = ftz(a), ftz(b)
        t = f(a, b)
        if comb is not None:
            t = comb(t, rc(st, idx))
        w(st, idx, np.where(t, one, zero))

    return set_


def compile_selp(ctx: Ctx, ins: Instr):
    typ = itype(ctx, ins)
    w = ctx.writer(ins.args[0])
    ra, rb = ctx.reader(ins.args[1], typ), ctx.reader(ins.args[2], typ)
    rc = ctx.reader(ins.args[3], "pred")

    def selp(st, idx):
        c = rc(st, idx)
        if c.__class__ is np.bool_:
            w(st, idx, ra(st, idx) if c else rb(st, idx))
        else:
            a, b = ra(st, idx), rb(st, idx)
            w(st, idx, np.where(c, a, b).astype(np.result_type(a, b)))

    return selp


def compile_slct(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    dtyp, ctyp = parts[-2], parts[-1]
    do_ftz = "ftz" in parts
    w = ctx.writer(ins.args[0])
    ra, rb = ctx.reader(ins.args[1], dtyp), ctx.reader(ins.args[2], dtyp)
    rc = ctx.reader(ins.args[3], ctyp)

    def slct(st, idx):
        c = rc(st, idx)
        if do_ftz:
            c = ftz(c)
        a, b = ra(st, idx), rb(st, idx)
        # for f32 c: -0.0 >= 0 selects a; NaN selects b
        w(st, idx, np.where(c >= 0, a, b).astype(np.result_type(a, b)))

    return slct


HANDLERS = {"setp": compile_setp, "set": compile_set, "selp": compile_selp, "slct": compile_slct}
