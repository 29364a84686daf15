"""cvt to and from the 8-bit float pairs .e4m3x2 and .e5m2x2 (PTX ISA, "cvt", sm_89+):

    cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f32   d, a, b   (a to the upper byte of d, b to the lower)
    cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f16x2 d, a      (each lane of a to its byte)
    cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2}          d, a      (each byte to its f16 lane, exactly)

To 8 bits: rounded to nearest even, once (the sources are exact in f64, and so is every midpoint); .satfinite:
±inf and values past the largest finite become the largest finite of their sign, NaN the NaN 0x7F; .relu: negative
results become +0. E4M3 (bias 7) has no infinity, its largest finite is 448 (0x7E); E5M2 (bias 15) is IEEE-like,
its largest finite 57344 (0x7B)."""

from __future__ import annotations

import numpy as np

from gpushim.ptx.nodes import Instr
from gpushim.ptx.operands import Ctx
from gpushim.ptx.ops_common import check_mods, mods, nary

FP8 = ("e4m3x2", "e5m2x2")
_NAN8 = np.uint8(0x7F)
_NAN16 = np.uint16(0x7FFF)


def _values(typ: str) -> np.ndarray:
    """The non-negative finite values of the format, by code (ascending with the code)."""
    mbits, bias, top = (3, 7, 0x7E) if typ == "e4m3x2" else (2, 15, 0x7B)
    codes = np.arange(top + 1)
    exp, man = codes >> mbits, codes & ((1 << mbits) - 1)
    frac = man / float(1 << mbits)
    return np.where(exp == 0, frac * 2.0 ** (1 - bias), (1 + frac) * 2.0 ** (exp - bias))


_VALUES = {t: _values(t) for t in FP8}


def to_fp8(x, typ: str, relu: bool) -> np.ndarray:
    """f64 values to codes of the format (.rn.satfinite)."""
    vals = _VALUES[typ]
    x = np.asarray(x, np.float64)
    a = np.abs(x)
    i = np.clip(np.searchsorted(vals, a, side="right") - 1, 0, len(vals) - 1)
    j = np.minimum(i + 1, len(vals) - 1)
    lo, hi = vals[i], vals[j]
    up = (a - lo > hi - a) | ((a - lo == hi - a) & (i % 2 == 1))
    code = np.where(up & (j > i), j, i).astype(np.uint8)  # past the largest finite: it (satfinite)
    code = np.where(np.signbit(x), np.uint8(0) if relu else code | np.uint8(0x80), code)
    return np.where(x != x, _NAN8, code).astype(np.uint8)


def from_fp8(code, typ: str, relu: bool) -> np.ndarray:
    """Codes of the format to f16 bits (exact)."""
    c = np.asarray(code).astype(np.uint8)
    mag = c & np.uint8(0x7F)
    vals = np.concatenate([_VALUES[typ], np.full(128 - len(_VALUES[typ]), np.nan)])
    v = vals[mag]
    if typ == "e5m2x2":
        v = np.where(mag == 0x7C, np.inf, v)
    neg = (c & np.uint8(0x80)) != 0
    v = np.where(neg, -v, v)
    if relu:
        v = np.where(neg & (v == v), 0.0, v)
    bits = v.astype(np.float16).view(np.uint16)
    return np.where(v != v, _NAN16, bits).astype(np.uint16)


def compile_cvt_fp8(ctx: Ctx, ins: Instr, dtyp: str, atyp: str):
    m = mods(ins)
    relu = "relu" in m
    if dtyp in FP8:
        check_mods(ctx, ins, {"rn", "satfinite", "relu"})
        if m & {"rn", "satfinite"} != {"rn", "satfinite"}:  # the only form the ISA has
            raise ctx.error(f"{ins.op}: a conversion to {dtyp} is .rn.satfinite")
        if atyp == "f32" and len(ins.args) == 3:
            return nary(ctx, ins, "f32", lambda a, b: (to_fp8(a, dtyp, relu).astype(np.uint16) << np.uint16(8))
                        | to_fp8(b, dtyp, relu).astype(np.uint16), 2)
        if atyp == "f16x2" and len(ins.args) == 2:

            def pair(a):
                u = np.asarray(a).astype(np.uint32)
                lo = (u & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16).astype(np.float64)
                hi = (u >> np.uint32(16)).astype(np.uint16).view(np.float16).astype(np.float64)
                return (to_fp8(hi, dtyp, relu).astype(np.uint16) << np.uint16(8)) | to_fp8(lo, dtyp, relu)

            return nary(ctx, ins, "b32", pair, 1)
    elif atyp in FP8 and dtyp == "f16x2" and len(ins.args) == 2:
        check_mods(ctx, ins, {"rn", "relu"})

        def unpair(a):
            u = np.asarray(a).astype(np.uint16)
            lo = from_fp8(u & np.uint16(0xFF), atyp, relu).astype(np.uint32)
            hi = from_fp8(u >> np.uint16(8), atyp, relu).astype(np.uint32)
            return (hi << np.uint32(16)) | lo

        return nary(ctx, ins, "b16", unpair, 1)
    raise ctx.fail(f"{ins.op} ({dtyp} from {atyp})")
