"""Integer arithmetic: add/sub (with .sat and carry), mul/mad (.lo/.hi/.wide, 24-bit), div, rem, abs, neg,
min, max, sad.

Division by zero follows what NVIDIA GPUs return (the PTX ISA leaves it unspecified): div and rem give all
bits set (-1 for signed types), as NVIDIA's engineers describe it
(https://stackoverflow.com/questions/12960005). nvcc itself emits C's `%` as `a - (a / b) * b`, which then
yields the dividend.
"""

from __future__ import annotations

import numpy as np

from gpushim.ptx.nodes import Imm, Instr, Reg
from gpushim.ptx.operands import Ctx, imm_value
from gpushim.ptx.ops_common import bits_type, itype, mods, nary
from gpushim.ptx.ops_simd import PACKED_INT_TYPES, compile_packed_minmax
from gpushim.ptx.types import S, U, np_type, type_size

_M32 = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)


def mulhi_u64(a, b):
    a = a.astype(np.uint64, copy=False) if hasattr(a, "astype") else np.uint64(a)
    b = b.astype(np.uint64, copy=False) if hasattr(b, "astype") else np.uint64(b)
    al, ah, bl, bh = a & _M32, a >> _32, b & _M32, b >> _32
    p0, p1, p2, p3 = al * bl, al * bh, ah * bl, ah * bh
    mid = (p0 >> _32) + (p1 & _M32) + (p2 & _M32)
    return p3 + (p1 >> _32) + (p2 >> _32) + (mid >> _32)


def mulhi_s64(a, b):
    au, bu = a.view(np.uint64), b.view(np.uint64)
    hi = mulhi_u64(au, bu)
    hi = hi - np.where(a < 0, bu, np.uint64(0)) - np.where(b < 0, au, np.uint64(0))
    return hi.view(np.int64)


def _wide(t: str) -> str:
    return ("s" if t[0] == "s" else "u") + str(type_size(t) * 16)


def _mul_parts(typ: str, mode: str):
    """f(a, b) for mul.lo / mul.hi / mul.wide of type typ."""
    n = type_size(typ)
    dt = np_type(typ)
    if mode == "lo":
        return lambda a, b: a * b
    if mode == "wide":
        wt = np_type(_wide(typ))
        return lambda a, b: a.astype(wt) * b.astype(wt)
    # hi
    if n < 8:
        wt = S[2 * n] if typ[0] == "s" else U[2 * n]
        sh = wt.type(8 * n)
        return lambda a, b: ((a.astype(wt) * b.astype(wt)) >> sh).astype(dt)
    return mulhi_s64 if typ[0] == "s" else mulhi_u64


def _sat32(v):
    return np.clip(v, -(2**31), 2**31 - 1).astype(np.int32)


def compile_add_sub(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    base = parts[0]
    m = mods(ins)
    typ = itype(ctx, ins)
    if typ[0] == "f" or typ.startswith("bf"):
        from gpushim.ptx.ops_float import compile_fbin

        return compile_fbin(ctx, ins)
    sub = base in ("sub", "subc")
    if "sat" in m and typ == "s32":
        f = (lambda a, b: _sat32(a.astype(np.int64) - b)) if sub else (lambda a, b: _sat32(a.astype(np.int64) + b))
        return nary(ctx, ins, typ, f, 2)
    uses_cc = base in ("addc", "subc")
    sets_cc = "cc" in m
    if not uses_cc and not sets_cc:
        return nary(ctx, ins, bits_type(ctx, ins, typ), (np.subtract if sub else np.add), 2)
    # carry chain (32/64-bit unsigned arithmetic on bits)
    ut = U[type_size(typ)]
    kcc = ctx.hidden_reg("%cc", np.dtype(np.uint32))
    w = ctx.writer(ins.args[0])
    ra, rb = ctx.reader(ins.args[1], typ), ctx.reader(ins.args[2], typ)
    zero = ut.type(0)
    wcc = ctx.writer(Reg("%cc"))

    def f(st, idx):
        a = ra(st, idx).view(ut)
        b = rb(st, idx).view(ut)
        cin = zero
        if uses_cc:
            c = st.regs[kcc]
            if idx is not None and c.__class__ is np.ndarray:
                c = c[idx]
            cin = c.astype(ut)
        if sub:
            d = a - b - cin
            cout = (a < b) | ((a == b) & (cin != zero))  # borrow
        else:
            d = a + b + cin
            cout = (d < a) | ((d == a) & (cin != zero))
        w(st, idx, d)
        if sets_cc:
            wcc(st, idx, cout)

    return f


def compile_mul(ctx: Ctx, ins: Instr):
    m = mods(ins)
    typ = itype(ctx, ins)
    if typ[0] == "f":
        from gpushim.ptx.ops_float import compile_fbin

        return compile_fbin(ctx, ins)
    if typ[0] == "f" or typ.startswith("bf"):
        from gpushim.ptx.ops_float import compile_fbin

        return compile_fbin(ctx, ins)
    mode = "hi" if "hi" in m else "wide" if "wide" in m else "lo"
    if mode == "lo":
        typ = bits_type(ctx, ins, typ)
    if mode == "wide" and isinstance(ins.args[2], Imm):
        # mul.wide by a constant (nvcc's index * element size): widen the constant once, here
        wt = np_type(_wide(typ))
        c = imm_value(ins.args[2], typ).astype(wt)
        w = ctx.writer(ins.args[0])
        ra = ctx.reader(ins.args[1], typ)
        return lambda st, idx: w(st, idx, ra(st, idx).astype(wt) * c)
    return nary(ctx, ins, typ, _mul_parts(typ, mode), 2)


def compile_mul24(ctx: Ctx, ins: Instr):
    m = mods(ins)
    typ = itype(ctx, ins)
    signed = typ[0] == "s"
    mad = ins.op.startswith("mad")

    def ext(a):
        a = a.astype(np.int64) & 0xFFFFFF
        return np.where(a & 0x800000, a - 0x1000000, a) if signed else a

    def prod(a, b):
        p = (ext(a) * ext(b)).astype(np.int64)
        r = (p >> 16) if "hi" in m else p
        return (r & 0xFFFFFFFF).astype(np.uint32)

    if mad:
        return nary(ctx, ins, typ, lambda a, b, c: prod(a, b) + c.view(np.uint32), 3)
    return nary(ctx, ins, typ, prod, 2)


def compile_mad(ctx: Ctx, ins: Instr):
    m = mods(ins)
    typ = itype(ctx, ins)
    if typ[0] == "f":
        from gpushim.ptx.ops_float import compile_fma

        return compile_fma(ctx, ins)
    base = ins.op.split(".")[0]
    mode = "hi" if "hi" in m else "wide" if "wide" in m else "lo"
    mul = _mul_parts(typ, mode)
    ctype = _wide(typ) if mode == "wide" else typ
    if base == "madc" or "cc" in m:
        # carry-chained mad: d = a*b (+ c + carry-in), carry out of the final add
        ut = U[type_size(ctype)]
        kcc = ctx.hidden_reg("%cc", np.dtype(np.uint32))
        w = ctx.writer(ins.args[0])
        ra, rb = ctx.reader(ins.args[1], typ), ctx.reader(ins.args[2], typ)
        rc = ctx.reader(ins.args[3], ctype)
        uses, sets = base == "madc", "cc" in m
        wcc = ctx.writer(Reg("%cc"))

        def f(st, idx):
            p = mul(ra(st, idx), rb(st, idx)).view(ut)
            c = rc(st, idx).view(ut)
            cin = ut.type(0)
            if uses:
                cc = st.regs[kcc]
                if idx is not None and cc.__class__ is np.ndarray:
                    cc = cc[idx]
                cin = cc.astype(ut)
            d = p + c + cin
            w(st, idx, d)
            if sets:
                wcc(st, idx, (d < p) | ((d == p) & (cin != 0)))

        return f
    if "sat" in m and typ == "s32" and mode == "hi":
        return nary(ctx, ins, typ, lambda a, b, c: _sat32(mul(a, b).astype(np.int64) + c), 3)
    if mode == "lo":
        typ = ctype = bits_type(ctx, ins, typ)
        mul = _mul_parts(typ, mode)
    return nary(ctx, ins, typ, lambda a, b, c: mul(a, b) + c, 3, [typ, typ, ctype])


def _div_u(a, b):
    dt = np.result_type(a, b)
    z = b == 0
    safe = np.where(z, dt.type(1), b).astype(dt)
    return np.where(z, ~dt.type(0), (a // safe).astype(dt)).astype(dt)


def _rem_u(a, b):
    dt = np.result_type(a, b)
    z = b == 0
    safe = np.where(z, dt.type(1), b).astype(dt)
    return np.where(z, ~dt.type(0), a % safe).astype(dt)


def _div_s(a, b):
    dt = np.result_type(a, b)
    if dt.itemsize < 8:
        a64, b64 = np.asarray(a, np.int64), np.asarray(b, np.int64)
        z = b64 == 0
        safe = np.where(z, 1, b64)
        q = np.abs(a64) // np.abs(safe) * np.sign(a64) * np.sign(safe)
        q = np.where(z, -1, q)
        return (q & ((1 << (8 * dt.itemsize)) - 1)).astype(U[dt.itemsize]).view(dt)
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    z = b == 0
    m1 = b == -1
    safe = np.where(z | m1, 1, b)
    q = a // safe
    r = a - q * safe
    q = q + ((r != 0) & ((a < 0) != (safe < 0)))
    q = np.where(m1, (0 - a.view(np.uint64)).view(np.int64), q)
    return np.where(z, -1, q)


def _rem_s(a, b):
    dt = np.result_type(a, b)
    q = _div_s(a, b)
    r = np.asarray(a) - np.asarray(q).astype(dt) * b
    return np.where(np.asarray(b) == 0, dt.type(-1), r).astype(dt)


def compile_div(ctx: Ctx, ins: Instr):
    typ = itype(ctx, ins)
    if typ[0] == "f":
        from gpushim.ptx.ops_float import compile_fdiv

        return compile_fdiv(ctx, ins)
    return nary(ctx, ins, typ, _div_s if typ[0] == "s" else _div_u, 2)


def compile_rem(ctx: Ctx, ins: Instr):
    typ = itype(ctx, ins)
    return nary(ctx, ins, typ, _rem_s if typ[0] == "s" else _rem_u, 2)


def compile_abs_neg(ctx: Ctx, ins: Instr):
    typ = itype(ctx, ins)
    if typ[0] == "f" or typ.startswith("bf"):
        from gpushim.ptx.ops_float import compile_fabs_neg

        return compile_fabs_neg(ctx, ins)
    base = ins.op.split(".")[0]
    if base == "abs":
        return nary(ctx, ins, typ, np.abs, 1)
    return nary(ctx, ins, typ, np.negative, 1)


def compile_min_max(ctx: Ctx, ins: Instr):
    if any(p in PACKED_INT_TYPES for p in ins.op.split(".")[1:]):
        return compile_packed_minmax(ctx, ins)
    typ = itype(ctx, ins)
    if typ[0] == "f" or typ in ("bf16", "bf16x2", "f16x2"):
        from gpushim.ptx.ops_float import compile_fminmax

        return compile_fminmax(ctx, ins)
    base = ins.op.split(".")[0]
    f = np.minimum if base == "min" else np.maximum
    if "relu" in mods(ins):
        z = np_type(typ).type(0)
        return nary(ctx, ins, typ, lambda a, b: np.maximum(f(a, b), z), 2)
    return nary(ctx, ins, typ, f, 2)


def compile_sad(ctx: Ctx, ins: Instr):
    typ = itype(ctx, ins)

    def sad(a, b, c):
        return c + np.where(a < b, b - a, a - b).astype(c.dtype if hasattr(c, "dtype") else a.dtype)

    return nary(ctx, ins, typ, sad, 3)


HANDLERS = {
    "add": compile_add_sub, "sub": compile_add_sub, "addc": compile_add_sub, "subc": compile_add_sub,
    "mul": compile_mul, "mad": compile_mad, "madc": compile_mad, "mul24": compile_mul24, "mad24": compile_mul24,
    "div": compile_div, "rem": compile_rem, "abs": compile_abs_neg, "neg": compile_abs_neg, "min": compile_min_max,
    "max": compile_min_max, "sad": compile_sad,
}  # fmt: skip
