"""Bit operations: and/or/xor/not/cnot, shl/shr/shf, lop3, popc, clz, brev, bfe, bfi, bfind, prmt, fns,
dp4a/dp2a. Shift amounts are unsigned and clamp at the operand width, as on the GPU."""

from __future__ import annotations

import numpy as np

from gpushim.ptx.nodes import Instr
from gpushim.ptx.operands import Ctx
from gpushim.ptx.ops_common import itype, mods, nary
from gpushim.ptx.types import S, U, np_type, type_size

_BREV8 = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], np.uint8)


def compile_logic(ctx: Ctx, ins: Instr):
    base = ins.op.split(".")[0]
    typ = itype(ctx, ins)
    if base == "not":
        return nary(ctx, ins, typ, np.invert if typ != "pred" else np.logical_not, 1)
    if base == "cnot":
        z = np_type(typ).type(0)
        one = np_type(typ).type(1)
        return nary(ctx, ins, typ, lambda a: np.where(a == z, one, z).astype(a.dtype), 1)
    f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[base]
    return nary(ctx, ins, typ, f, 2)


def compile_shift(ctx: Ctx, ins: Instr):
    base = ins.op.split(".")[0]
    typ = itype(ctx, ins)
    bits = type_size(typ) * 8
    dt = np_type(typ)
    if base == "shr" and typ[0] == "s":
        lim = np.uint32(bits - 1)
        samts = [dt.type(i) for i in range(bits)]  # shift amounts in the operand's dtype

        def f(a, n):
            if n.__class__ is not np.ndarray:  # one shift amount for every thread
                return a >> samts[n if n < lim else lim]
            return a >> np.minimum(n, lim).astype(dt)

    else:
        op = np.left_shift if base == "shl" else np.right_shift
        ut = U[type_size(typ)]
        lim = np.uint32(bits)
        zero = ut.type(0)
        uamts = [ut.type(i) for i in range(bits)]

        def f(a, n):
            au = a if a.dtype is ut else a.view(ut)
            if n.__class__ is not np.ndarray:  # one shift amount for every thread
                r = op(au, uamts[n]) if n < lim else au & zero
            else:
                big = n >= lim
                r = op(au, np.minimum(n, lim - 1).astype(ut))
                if big.any():
                    r = np.where(big, zero, r).astype(ut)
            return r if r.dtype is a.dtype else r.view(a.dtype)

    return nary(ctx, ins, typ, f, 2, [typ, "u32"])


def compile_shf(ctx: Ctx, ins: Instr):
    m = mods(ins)
    left = "l" in m
    clamp = "clamp" in m

    def f(a, b, c):
        n = np.minimum(c, np.uint32(32)) if clamp else (c & np.uint32(31))
        n = n.astype(np.uint64)
        v = (b.astype(np.uint64) << np.uint64(32)) | a.astype(np.uint64)
        if left:
            r = (v << n) >> np.uint64(32)
        else:
            r = v >> n
        return (r & np.uint64(0xFFFFFFFF)).astype(np.uint32)

    return nary(ctx, ins, "b32", f, 3, ["b32", "b32", "u32"])


def lop3_func(lut: int):
    lut &= 0xFF
    if lut == 0:
        return lambda a, b, c: a ^ a
    if lut == 0xFF:
        return lambda a, b, c: ~(a ^ a)
    known = {0x96: lambda a, b, c: a ^ b ^ c, 0xE8: lambda a, b, c: (a & b) | (c & (a | b)),
             0x80: lambda a, b, c: a & b & c, 0xFE: lambda a, b, c: a | b | c, 0xF8: lambda a, b, c: a | (b & c),
             0xEA: lambda a, b, c: (a & b) | c, 0x78: lambda a, b, c: a ^ (b & c), 0x3C: lambda a, b, c: a ^ b,
             0x5A: lambda a, b, c: a ^ c, 0x66: lambda a, b, c: b ^ c, 0xF0: lambda a, b, c: a,
             0xCC: lambda a, b, c: b, 0xAA: lambda a, b, c: c, 0xC0: lambda a, b, c: a & b,
             0xA0: lambda a, b, c: a & c, 0x88: lambda a, b, c: b & c, 0xFC: lambda a, b, c: a | b,
             0xFA: lambda a, b, c: a | c, 0xEE: lambda a, b, c: b | c, 0x0F: lambda a, b, c: ~a}  # fmt: skip
    if lut in known:
        return known[lut]

    def f(a, b, c):
        na, nb, nc = ~a, ~b, ~c
        r = a ^ a
        for i in range(8):
            if lut >> i & 1:
                r = r | ((a if i & 4 else na) & (b if i & 2 else nb) & (c if i & 1 else nc))
        return r

    return f


def compile_lop3(ctx: Ctx, ins: Instr):
    from gpushim.ptx.nodes import Imm

    lut_op = ins.args[4] if len(ins.args) > 4 else None
    if not isinstance(lut_op, Imm):
        raise ctx.fail("lop3 with a non-immediate lookup table")
    if ".BOP" in ins.op or len(ins.args) > 5:
        raise ctx.fail(f"{ins.op} with a predicate output")
    return nary(ctx, ins, "b32", lop3_func(int(lut_op.value)), 3)


def popc(a):
    return np.bitwise_count(a).astype(np.uint32)


def clz(a):
    bits = a.dtype.itemsize * 8
    ut = U[a.dtype.itemsize]
    x = a.view(ut) if hasattr(a, "view") else a
    n = np.zeros(np.shape(x), np.uint32)
    x = np.array(x, ut, copy=True)
    shift = bits // 2
    while shift:
        mask = ut.type(((1 << shift) - 1) << (bits - shift))
        z = (x & mask) == 0
        n = n + np.where(z, np.uint32(shift), np.uint32(0))
        x = np.where(z, x << ut.type(shift), x).astype(ut)
        shift //= 2
    n = n + np.where(x == 0, np.uint32(1), np.uint32(0))
    return n


def compile_unary_bits(ctx: Ctx, ins: Instr):
    base = ins.op.split(".")[0]
    typ = itype(ctx, ins)
    if base == "popc":
        return nary(ctx, ins, typ, popc, 1)
    if base == "clz":
        return nary(ctx, ins, typ, clz, 1)
    if base == "brev":
        n = type_size(typ)
        ut = U[n]

        def brev(a):
            arr = np.atleast_1d(np.asarray(a).view(ut))
            b = _BREV8[arr.view(np.uint8)].reshape(arr.shape + (n,))[..., ::-1].copy().view(ut).reshape(arr.shape)
            return b if np.ndim(a) else b[0]

        return nary(ctx, ins, typ, brev, 1)
    if base == "bfind":
        shiftamt = "shiftamt" in mods(ins)
        n = type_size(typ)
        bits = n * 8

        def bfind(a):
            x = a
            if typ[0] == "s":
                x = np.where(a < 0, ~a, a)
            x = np.asarray(x).view(U[n])
            lz = clz(x)
            pos = np.uint32(bits - 1) - lz
            r = pos if not shiftamt else lz
            return np.where(x == 0, np.uint32(0xFFFFFFFF), r).astype(np.uint32)

        return nary(ctx, ins, typ, bfind, 1)
    raise ctx.error(ins.op)


def compile_bfe(ctx: Ctx, ins: Instr):
    typ = itype(ctx, ins)
    n = type_size(typ)
    bits = n * 8
    signed = typ[0] == "s"
    ut, st_ = U[n], S[n]
    one = np.uint64(1)

    def bfe(a, b, c):
        pos = np.asarray(b, np.int64) & 0xFF
        ln = np.asarray(c, np.int64) & 0xFF
        p = np.minimum(pos, 63)
        if signed:  # arithmetic shift of the sign-extended value: bits past msb read as a[msb]
            t = (np.asarray(a).astype(np.int64) >> p).view(np.uint64)
        else:
            t = np.asarray(a).view(ut).astype(np.uint64) >> p.astype(np.uint64)
            t = np.where(pos >= 64, np.uint64(0), t)
        lm = np.minimum(ln, 63).astype(np.uint64)
        lmask = np.where(ln >= 64, np.uint64(2**64 - 1), (one << lm) - one)
        r = t & lmask
        if signed:
            sb = (r >> np.maximum(lm, one) - one) & one
            r = np.where((ln > 0) & (ln < bits) & (sb == one), r | ~lmask, r)
            r = np.where(ln == 0, np.uint64(0), r)
        r = (r & np.uint64((1 << bits) - 1)).astype(ut)
        return r.view(st_) if signed else r

    return nary(ctx, ins, typ, bfe, 3, [typ, "u32", "u32"])


def compile_bfi(ctx: Ctx, ins: Instr):
    typ = itype(ctx, ins)
    n = type_size(typ)
    bits = n * 8
    ut = U[n]

    def bfi(a, b, c, d):
        pos = np.asarray(c, np.int64) & 0xFF
        ln = np.asarray(d, np.int64) & 0xFF
        av = np.asarray(a).view(ut).astype(np.uint64)
        bv = np.asarray(b).view(ut).astype(np.uint64)
        ln = np.minimum(ln, np.maximum(bits - pos, 0))
        lmask = np.where(ln >= 64, np.uint64(2**64 - 1), (np.uint64(1) << ln.astype(np.uint64)) - np.uint64(1))
        p = np.minimum(pos, 63).astype(np.uint64)
        m = np.where(pos >= bits, np.uint64(0), lmask << p)
        r = (bv & ~m) | ((av << p) & m)
        return (r & np.uint64((1 << bits) - 1)).astype(ut)

    return nary(ctx, ins, typ, bfi, 4, [typ, typ, "u32", "u32"])


def compile_prmt(ctx: Ctx, ins: Instr):
    m = mods(ins) - {"b32"}
    mode = next(iter(m)) if m else ""

    def prmt(a, b, c):
        a = np.asarray(a, np.uint32).astype(np.uint64)
        b = np.asarray(b, np.uint32).astype(np.uint64)
        c = np.asarray(c, np.uint32)
        x = a | (b << np.uint64(32))
        shp = np.broadcast_shapes(a.shape, b.shape, c.shape)
        x = np.broadcast_to(x, shp)
        c = np.broadcast_to(c, shp)
        bytes_ = [((x >> np.uint64(8 * k)) & np.uint64(0xFF)).astype(np.uint32) for k in range(8)]
        if mode == "":
            out = np.zeros(shp, np.uint32)
            for i in range(4):
                sel = (c >> np.uint32(4 * i)) & np.uint32(0xF)
                idx = sel & np.uint32(7)
                v = np.choose(idx, bytes_)
                sign = (sel & np.uint32(8)) != 0
                v = np.where(sign, np.where(v & np.uint32(0x80), np.uint32(0xFF), np.uint32(0)), v)
                out |= v.astype(np.uint32) << np.uint32(8 * i)
            return out
        s = (c & np.uint32(3)).astype(np.int64)
        tables = {
            "f4e": [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]],
            "b4e": [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]],
            "rc8": [[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]],
            "ecl": [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]],
            "ecr": [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]],
            "rc16": [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]],
        }
        t = np.array(tables[mode], np.int64)
        out = np.zeros(shp, np.uint32)
        for i in range(4):
            out |= np.choose(t[s, i], bytes_).astype(np.uint32) << np.uint32(8 * i)
        return out

    return nary(ctx, ins, "b32", prmt, 3)


def compile_fns(ctx: Ctx, ins: Instr):
    def fns(mask, base, offset):
        mask = np.atleast_1d(np.asarray(mask, np.uint32))
        base = np.broadcast_to(np.asarray(base, np.uint32), mask.shape)
        off = np.broadcast_to(np.asarray(offset).view(np.int32) if hasattr(offset, "view") else offset, mask.shape)
        out = np.full(mask.shape, 0xFFFFFFFF, np.uint32)
        for i in range(mask.size):
            mk, b, o = int(mask[i]), int(base[i]) & 31, int(off[i])
            pos = b
            step = 1 if o >= 0 else -1
            need = o if o > 0 else -o
            if o == 0:
                out[i] = b if mk >> b & 1 else 0xFFFFFFFF
                continue
            cnt = 0
            while 0 <= pos < 32:
                if mk >> pos & 1:
                    cnt += 1
                    if cnt == need:
                        out[i] = pos
                        break
                pos += step
        return out

    return nary(ctx, ins, "b32", fns, 3, ["b32", "u32", "s32"])


def compile_dp(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    base = parts[0]
    ta, tb = parts[-2], parts[-1]

    def lanes(x, t, n, width):
        x = np.asarray(x, np.uint32).astype(np.int64)
        out = []
        for k in range(n):
            v = (x >> (width * k)) & ((1 << width) - 1)
            if t[0] == "s":
                v = np.where(v >= (1 << (width - 1)), v - (1 << width), v)
            out.append(v)
        return out

    hi = "hi" in parts

    def dp(a, b, c):
        if base == "dp4a":
            la, lb = lanes(a, ta, 4, 8), lanes(b, tb, 4, 8)
            s = sum(x * y for x, y in zip(la, lb, strict=True))
        else:
            la = lanes(a, ta, 2, 16)
            lb = lanes(b, tb, 4, 8)
            lb = lb[2:] if hi else lb[:2]
            s = sum(x * y for x, y in zip(la, lb, strict=True))
        return ((np.asarray(c).astype(np.int64) + s) & 0xFFFFFFFF).astype(np.uint32)

    return nary(ctx, ins, "b32", dp, 3)


def compile_bmsk(ctx: Ctx, ins: Instr):
    """bmsk.{clamp,wrap}.b32 d, a, b: b bits set from position a (PTX ISA semantics, sm_70)."""
    clamp = "clamp" in mods(ins)

    def bmsk(a, b):
        a = np.asarray(a, np.int64)
        b = np.asarray(b, np.int64)
        a1, b1 = a & 31, b & 31
        full = np.int64(0xFFFFFFFF)
        mask0 = (full << a1) & full
        s = a1 + b1
        mask1 = (full << np.minimum(s, 31)) & full
        over = s >= 32
        if clamp:
            mask0 = np.where(a >= 32, 0, mask0)
            over = over | (a >= 32) | (b >= 32)
        mask1 = np.where(over, 0, np.where(b1 == 0, full, mask1))
        return (mask0 & ~mask1 & full).astype(np.uint32)

    return nary(ctx, ins, "b32", bmsk, 2, ["u32", "u32"])


def compile_szext(ctx: Ctx, ins: Instr):
    """szext.{clamp,wrap}.{s32,u32} d, a, b: extend the b lowest bits of a (PTX ISA, sm_70)."""
    clamp = "clamp" in mods(ins)
    signed = itype(ctx, ins) == "s32"

    def szext(a, b):
        a = np.asarray(a).astype(np.uint32).astype(np.int64)
        b = np.asarray(b, np.int64)
        n = np.minimum(b, 32) if clamp else (b & 31)
        low = a & ((np.int64(1) << n) - 1)
        if signed:
            sign = (low >> np.maximum(n - 1, 0)) & 1
            low = np.where((sign == 1) & (n < 32), low - (np.int64(1) << n), low)
        r = np.where(n == 0, 0, low)
        return (r & 0xFFFFFFFF).astype(np.uint32)

    return nary(ctx, ins, "b32", szext, 2, ["b32", "u32"])


HANDLERS = {
    "bmsk": compile_bmsk, "szext": compile_szext,
    "and": compile_logic, "or": compile_logic, "xor": compile_logic, "not": compile_logic, "cnot": compile_logic,
    "shl": compile_shift, "shr": compile_shift, "shf": compile_shf, "lop3": compile_lop3,
    "popc": compile_unary_bits, "clz": compile_unary_bits, "brev": compile_unary_bits, "bfind": compile_unary_bits,
    "bfe": compile_bfe, "bfi": compile_bfi, "prmt": compile_prmt, "fns": compile_fns, "dp4a": compile_dp,
    "dp2a": compile_dp,
}  # fmt: skip
