"""cvt (integer, float and half conversions with rounding, saturation and NaN rules) and mov (with vector
pack/unpack and symbol addresses).

Float-to-integer conversions saturate to the destination range and map NaN to 0, as the PTX ISA specifies.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from gpushim.ptx import fexact
from gpushim.ptx.nodes import Instr, Vec
from gpushim.ptx.operands import Ctx
from gpushim.ptx.ops_common import check_mods, nary
from gpushim.ptx.ops_float import canon32
from gpushim.ptx.ops_float import ftz as ftz32
from gpushim.ptx.types import TYPES, U, np_type, type_size

_IRND = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}
_FRND = ("rn", "rz", "rm", "rp")


def _int_bounds(t: str) -> tuple[int, int]:
    n = type_size(t) * 8
    if t[0] == "s":
        return -(1 << (n - 1)), (1 << (n - 1)) - 1
    return 0, (1 << n) - 1


def _to_float64(v, atyp: str):
    if atyp == "f16":
        return np.asarray(v).view(np.float16).astype(np.float64)
    if atyp == "bf16":
        return (np.asarray(v).astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    return np.asarray(v, np.float64)


def f32_to_bf16(x):
    b = np.asarray(x, np.float32).view(np.uint32)
    rounded = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.where(nan, (b >> np.uint32(16)) | np.uint32(0x40), rounded).astype(np.uint16)


def _f64_to_bf16(v, mode: str):
    """f64 values to bf16 bits in rounding mode rn / rz / rm / rp, each rounded once: to f32 rounding to odd (exact
    for f32 sources; the sticky last bit keeps a lower half-way from looking like a tie), then to bf16 to nearest,
    then one step where a directed mode wants the other neighbour."""
    x = np.asarray(v, np.float64)
    f = fexact.f64_to_f32(x, "rz")
    inexact = (f.astype(np.float64) != x) & (x == x)
    f = np.where(inexact, (f.view(np.uint32) | np.uint32(1)).view(np.float32), f)
    r = f32_to_bf16(f)
    if mode == "rn":
        return r
    r64 = (r.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    if mode == "rz":
        fix, up = np.abs(r64) > np.abs(x), np.zeros(x.shape, bool)  # toward zero: a smaller magnitude
    else:
        fix = r64 > x if mode == "rm" else r64 < x
        up = (x < 0) if mode == "rm" else (x > 0)  # the magnitude grows when x lies beyond r on its own side
    mag = r & np.uint16(0x7FFF)
    sign = np.where(mag == 0, np.where(x < 0, np.uint16(0x8000), np.uint16(0)), r & np.uint16(0x8000))
    stepped = sign | np.where(up, mag + np.uint16(1), mag - np.uint16(1)).astype(np.uint16)
    return np.where(fix, stepped, r).astype(np.uint16)


def _f64_to_f16(v, mode: str):
    r = np.asarray(v, np.float64).astype(np.float16)
    if mode == "rn":
        return r.view(np.uint16)
    r64 = r.astype(np.float64)
    if mode == "rz":
        fix, tgt = np.abs(r64) > np.abs(v), np.float16(0)
    elif mode == "rm":
        fix, tgt = r64 > v, np.float16(-np.inf)
    else:
        fix, tgt = r64 < v, np.float16(np.inf)
    return np.where(fix, np.nextafter(r, tgt), r).astype(np.float16).view(np.uint16)


def float_to_int(x64, dtyp: str, rnd):
    r = rnd(x64)
    r = np.where(r != r, 0.0, r)
    lo, hi = _int_bounds(dtyp)
    dt = np_type(dtyp)
    if type_size(dtyp) < 8:
        return np.clip(r, lo, hi).astype(np.int64).astype(dt)
    big = r >= float(hi) + 1.0 if dtyp[0] == "s" else r >= 2.0**64
    small = r < float(lo)
    safe = np.where(big | small, 0.0, r)
    v = safe.astype(dt)
    return np.where(big, dt.type(hi), np.where(small, dt.type(lo), v)).astype(dt)


def int_to_float(v, atyp: str, dtyp: str, mode: str):
    if dtyp == "f16":  # exact in f64 for 32-bit sources; 64-bit ones beyond 2**53 overflow f16 anyway
        return _f64_to_f16(np.asarray(v, np.float64), mode)
    if dtyp == "bf16":  # exact in f64 for 32-bit sources
        return _f64_to_bf16(np.asarray(v, np.float64), mode)
    dt = np_type(dtyp)
    if mode == "rn":
        return np.asarray(v).astype(dt)
    if type_size(atyp) <= 4:
        x = np.asarray(v, np.float64)
        return x if dtyp == "f64" else fexact.f64_to_f32(x, mode)
    # 64-bit integers in a directed mode: exact rational fallback
    arr = np.atleast_1d(np.asarray(v))
    out = np.empty(arr.shape, dt)
    for i, x in enumerate(arr.tolist()):
        q = Fraction(int(x))
        if dtyp == "f64":
            out[i] = fexact._exact_round(q, mode, 0.0)
            continue
        # round to odd in f64 (keeps the inexactness), then the directed rounding to f32 is exact
        r = np.float64(fexact._exact_round(q, "rz", 0.0))
        if Fraction(float(r)) != q and not int(r.view(np.uint64)) & 1:
            r = np.nextafter(r, np.copysign(np.inf, r))
        out[i] = fexact.f64_to_f32(r, mode)
    return out if np.ndim(v) else out[0]


def compile_cvt(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    types = [p for p in parts[1:] if p in TYPES]
    if len(types) != 2:
        raise ctx.error(f"{ins.op}: cvt needs two types")
    dtyp, atyp = types
    if dtyp == "tf32":
        from gpushim.ptx.ops_mma import compile_cvt_tf32

        return compile_cvt_tf32(ctx, ins)
    if dtyp in ("e4m3x2", "e5m2x2") or atyp in ("e4m3x2", "e5m2x2"):
        from gpushim.ptx.ops_fp8 import compile_cvt_fp8

        return compile_cvt_fp8(ctx, ins, dtyp, atyp)
    m = set(parts[1:]) - set(types)
    check_mods(ctx, ins, {"rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "ftz", "sat"})
    irnd = next((x for x in m if x in _IRND), None)
    frnd = next((x for x in m if x in _FRND), "rn")
    do_ftz = "ftz" in m
    do_sat = "sat" in m
    for t in (dtyp, atyp):
        if t in ("tf32", "b128", "u128", "s128"):
            raise ctx.fail(f"{ins.op} ({t} conversion)")
    if dtyp in ("f16x2", "bf16x2"):
        if len(ins.args) != 3 or atyp != "f32":
            raise ctx.fail(f"{ins.op}")
        to_half = _f64_to_f16 if dtyp == "f16x2" else _f64_to_bf16

        def conv1(x):
            return to_half(np.asarray(x, np.float64), frnd)

        return nary(
            ctx,
            ins,
            "f32",
            lambda a, b: (
                (np.asarray(conv1(a)).astype(np.uint32) << np.uint32(16)) | np.asarray(conv1(b)).astype(np.uint32)
            ),
            2,
        )
    dfloat = dtyp in ("f16", "f32", "f64", "bf16")
    afloat = atyp in ("f16", "f32", "f64", "bf16")

    if not dfloat and not afloat:
        dt = np_type(dtyp)
        if do_sat:
            lo, hi = _int_bounds(dtyp)
            alo, ahi = _int_bounds(atyp)
            lo, hi = max(lo, alo), min(hi, ahi)
            adt = np_type(atyp)
            blo, bhi = adt.type(lo), adt.type(hi)
            return nary(ctx, ins, atyp, lambda a: np.clip(a, blo, bhi).astype(dt), 1)
        return nary(ctx, ins, atyp, lambda a: np.asarray(a).astype(dt) if np.ndim(a) else a.astype(dt), 1)

    if afloat and not dfloat:
        rnd = _IRND.get(irnd or "rzi")

        def f2i(a):
            if do_ftz and atyp == "f32":
                a = ftz32(a)
            return float_to_int(_to_float64(a, atyp), dtyp, rnd)

        return nary(ctx, ins, atyp, f2i, 1)

    if not afloat and dfloat:

        def i2f(a):
            r = int_to_float(a, atyp, dtyp, frnd)
            if do_sat and dtyp in ("f32", "f64"):
                r = np.clip(r, 0, 1).astype(r.dtype)
            return r

        return nary(ctx, ins, atyp, i2f, 1)

    # float -> float
    def f2f(a):
        if do_ftz and atyp == "f32":
            a = ftz32(a)
        x = _to_float64(a, atyp)
        if irnd:
            x = _IRND[irnd](x)
        if dtyp == "f64":
            r = x if atyp != "f64" or irnd else np.asarray(a, np.float64)
        elif dtyp == "f32":
            r = canon32(fexact.f64_to_f32(x, frnd) if not irnd else x.astype(np.float32))
            if do_ftz:
                r = ftz32(r)
        elif dtyp == "f16":
            r = _f64_to_f16(x, frnd)
        else:  # bf16
            r = _f64_to_bf16(x, frnd)
        if do_sat:
            if dtyp in ("f32", "f64"):
                r = np.where(r != r, 0, np.clip(r, 0, 1)).astype(r.dtype)
            elif dtyp == "f16":
                h = r.view(np.float16)
                r = np.where(h != h, np.float16(0), np.clip(h, 0, 1)).astype(np.float16).view(np.uint16)
        return r

    return nary(ctx, ins, atyp, f2f, 1)


def compile_mov(ctx: Ctx, ins: Instr):
    typ = ins.op.split(".")[-1]
    if typ not in TYPES:
        raise ctx.error(f"{ins.op}: no type")
    dst, src = ins.args[0], ins.args[1]
    if isinstance(src, Vec):  # pack
        n = len(src.items)
        w = type_size(typ) // n
        if w * n != type_size(typ):
            raise ctx.error(f"{ins.op}: cannot pack {n} elements")
        ut = U[type_size(typ)]
        rs = [ctx.reader(s, f"b{8 * w}") for s in src.items]
        sh = [ut.type(8 * w * i) for i in range(n)]
        wr = ctx.writer(dst)

        def pack(st, idx):
            acc = None
            for r, s in zip(rs, sh, strict=True):
                v = np.asarray(r(st, idx)).astype(ut) << s
                acc = v if acc is None else acc | v
            wr(st, idx, acc)

        return pack
    if isinstance(dst, Vec):  # unpack
        n = len(dst.items)
        w = type_size(typ) // n
        ut = U[type_size(typ)]
        et = U[w]
        r = ctx.reader(src, f"b{8 * type_size(typ)}")
        ws = [ctx.writer(d) for d in dst.items]
        mask = ut.type((1 << (8 * w)) - 1)
        sh = [ut.type(8 * w * i) for i in range(n)]

        def unpack(st, idx):
            v = r(st, idx)
            for wi, s in zip(ws, sh, strict=True):
                wi(st, idx, ((v >> s) & mask).astype(et))

        return unpack
    return nary(ctx, ins, typ, lambda a: a, 1)


HANDLERS = {"cvt": compile_cvt, "mov": compile_mov}
