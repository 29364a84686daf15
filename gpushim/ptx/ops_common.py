"""Helpers shared by the instruction compilers."""

from __future__ import annotations

from collections.abc import Callable

from gpushim.ptx.nodes import Instr
from gpushim.ptx.operands import Ctx
from gpushim.ptx.types import TYPES


def itype(ctx: Ctx, ins: Instr) -> str:
    for p in reversed(ins.op.split(".")):
        if p in TYPES:
            return p
    # a type suffix the engine does not know (PTX grows new packed types): this kernel cannot run, the
    # module's other kernels still can
    raise ctx.fail(f"{ins.op}: no type the engine knows")


def mods(ins: Instr) -> set[str]:
    return set(ins.op.split(".")[1:])


def bits_type(ctx: Ctx, ins: Instr, typ: str) -> str:
    """The unsigned type of typ's width, for instructions whose result bits do not depend on signedness (add, sub,
    mul.lo, mad.lo on two's complement integers): reading and writing registers in their unsigned storage type
    saves a view per operand. Sources read the same bits either way (a register narrower than the type widens
    by its own, unsigned, kind); typ itself when the destination register is not of typ's width (the writer
    would widen differently) or typ is not a 16/32/64-bit integer type."""
    if typ[0] not in "su" or typ[1:] not in ("16", "32", "64"):
        return typ
    if ctx.reg_bits(ins.args[0]) != int(typ[1:]):
        return typ
    return "u" + typ[1:]


def nary(ctx: Ctx, ins: Instr, typ: str, f: Callable, n: int, src_types: list[str] | None = None):
    """d = f(a, b, ...) with the n sources read as typ (or src_types)."""
    w = ctx.writer(ins.args[0])
    ts = src_types or [typ] * n
    rs = [ctx.reader(ins.args[1 + i], ts[i]) for i in range(n)]
    if n == 1:
        (ra,) = rs
        return lambda st, idx: w(st, idx, f(ra(st, idx)))
    if n == 2:
        ra, rb = rs
        return lambda st, idx: w(st, idx, f(ra(st, idx), rb(st, idx)))
    if n == 3:
        ra, rb, rc = rs
        return lambda st, idx: w(st, idx, f(ra(st, idx), rb(st, idx), rc(st, idx)))
    return lambda st, idx: w(st, idx, f(*[r(st, idx) for r in rs]))


def check_mods(ctx: Ctx, ins: Instr, allowed: set[str] | frozenset[str]) -> None:
    """Reject modifiers this compiler does not implement, so they never silently change a result."""
    extra = [p for p in ins.op.split(".")[1:] if p not in TYPES and p not in allowed]
    if extra:
        raise ctx.fail(f"{ins.op} (modifier .{extra[0]})")
