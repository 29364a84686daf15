"""LLVM types and PTX type helpers shared by the code generator's parts."""

from __future__ import annotations

from gpushim.ptx.jit import textir as ir
from gpushim.ptx.nodes import Instr
from gpushim.ptx.types import TYPES, type_size


class JitUnsupported(Exception):
    pass


I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
P8 = I8.as_pointer()
P64 = I64.as_pointer()
_SPACES = {"global": "global", "shared": "shared", "shared::cta": "shared", "local": "local", "const": "global",
           "param": "param", "param::entry": "param", "param::func": "param"}  # fmt: skip
_CMP_I = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "lo": "<", "ls": "<=",
          "hi": ">", "hs": ">="}  # fmt: skip
_CMP_F = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_NOPS = {"membar", "fence", "prefetch", "prefetchu", "nanosleep", "pmevent", "discard", "griddepcontrol"}
ERR_RET = -2
YIELD_RET = -3  # a launch function stopped between blocks for tier 2 (layout.YIELD)


def _ftype(t: str):
    if t == "f32":
        return F32
    if t == "f64":
        return F64
    raise JitUnsupported(f".{t} arithmetic")


def _ltype(t: str):
    if t == "pred":
        return I1
    if t in ("f32", "f64"):
        return _ftype(t)
    if t not in TYPES or t in ("f16", "bf16", "f16x2", "bf16x2", "tf32", "e4m3x2", "e5m2x2", "b128", "u128", "s128"):
        raise JitUnsupported(f".{t} values")
    return ir.IntType(8 * type_size(t))


def _itype(ins: Instr) -> str:
    ts = [p for p in ins.parts[1:] if p in TYPES]
    if not ts:
        raise JitUnsupported(f"{ins.op}: no type")
    return ts[-1]
