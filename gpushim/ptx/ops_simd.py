"""SIMD video instructions on packed bytes/halves: vadd4/2, vsub4/2, vabsdiff4/2, vmin4/2, vmax4/2, vavrg4/2
(no lane selectors or masks; with .sat and the .add accumulation); and the packed 16-bit integer min/max
(min/max .u16x2/.s16x2, with .relu on .s16x2), which ops_int's min/max hand over."""

from __future__ import annotations

import numpy as np

from gpushim.ptx.nodes import Instr, Reg
from gpushim.ptx.operands import Ctx
from gpushim.ptx.ops_common import nary

_LANE_OPS = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "absdiff": lambda x, y: np.abs(x - y),
    "min": np.minimum,
    "max": np.maximum,
    "avrg": lambda x, y: (x + y + 1) >> 1,
}


def compile_simd(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    base = parts[0]
    op, lanes = base[1:-1], int(base[-1])
    types = [p for p in parts[1:] if p in ("u32", "s32")]
    if len(types) != 3 or not all(isinstance(a, Reg) for a in ins.args[:3]) or len(ins.args) != 4:
        raise ctx.fail(f"{ins.op} with lane selectors or masks")
    dtyp, atyp, btyp = types
    sat = "sat" in parts
    acc = "add" in parts[1:]
    width = 32 // lanes
    mask = (1 << width) - 1
    lo_d, hi_d = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if dtyp[0] == "s" else (0, mask)

    def lane(x, k, signed):
        v = (np.asarray(x, np.uint32).astype(np.int64) >> (width * k)) & mask
        return np.where(v > (mask >> 1), v - (1 << width), v) if signed else v

    def f(a, b, c):
        total = np.asarray(c, np.uint32).astype(np.int64) if acc else None
        out = np.zeros(np.broadcast_shapes(np.shape(a), np.shape(b)), np.int64)
        for k in range(lanes):
            x, y = lane(a, k, atyp[0] == "s"), lane(b, k, btyp[0] == "s")
            r = _LANE_OPS[op](x, y)
            if sat:
                r = np.clip(r, lo_d, hi_d)
            if acc:
                total = total + r
            else:
                out |= (r & mask) << (width * k)
        res = total if acc else out
        return (res & 0xFFFFFFFF).astype(np.uint32)

    return nary(ctx, ins, "u32", f, 3)


PACKED_INT_TYPES = ("u16x2", "s16x2")


def compile_packed_minmax(ctx: Ctx, ins: Instr):
    """min/max{.relu}.{u16x2,s16x2} d, a, b: each 16-bit half of d is the min (max) of the same halves of a
    and b; .relu (only with .s16x2) clamps negative halves to 0 (PTX ISA, "Integer Arithmetic Instructions:
    min / max", PTX 8.0, sm_90)."""
    parts = ins.op.split(".")
    typ = next(p for p in parts[1:] if p in PACKED_INT_TYPES)
    relu = "relu" in parts[1:]
    if relu and typ != "s16x2":
        raise ctx.error(f"{ins.op}: .relu needs .s16x2")
    if len(ins.args) != 3:
        raise ctx.error(f"{ins.op}: needs d, a, b")
    half = np.int16 if typ == "s16x2" else np.uint16
    f = np.minimum if parts[0] == "min" else np.maximum

    def lanes(x):
        x = np.asarray(x, np.uint32)
        return (x & 0xFFFF).astype(np.uint16).view(half), (x >> 16).astype(np.uint16).view(half)

    def g(a, b):
        (alo, ahi), (blo, bhi) = lanes(a), lanes(b)
        lo, hi = f(alo, blo), f(ahi, bhi)
        if relu:
            lo, hi = np.maximum(lo, half(0)), np.maximum(hi, half(0))
        return lo.view(np.uint16).astype(np.uint32) | (hi.view(np.uint16).astype(np.uint32) << np.uint32(16))

    return nary(ctx, ins, "u32", g, 2)


HANDLERS = {f"v{o}{n}": compile_simd for o in ("add", "sub", "absdiff", "min", "max", "avrg") for n in (2, 4)}
