"""How many registers a kernel needs: cudaFuncGetAttributes' numRegs (CU_FUNC_ATTRIBUTE_NUM_REGS) for a kernel the
engine loaded from PTX, which no ptxas compiled.

The estimate is the largest number of 32-bit registers live at once in the linked kernel (a 64-bit register counts
two, predicates none: they have their own file), found by a liveness pass over bit sets. It is a lower bound of
what ptxas allocates (it also needs temporaries, and keeps some values longer), never more than 255, the most a
thread may have, and never more than the entry's .maxnreg: ptxas spills to local memory to meet that limit."""

from __future__ import annotations

from gpushim.ptx.jit.liveness import _use_def, successors
from gpushim.ptx.link import Program

MAX_REGISTERS = 255  # per thread, every architecture since sm_35


def _widths(prog: Program) -> tuple[dict[str, int], dict[str, int]]:
    """Each register's first bit and its width in 32-bit units (0 for predicates)."""
    bit: dict[str, int] = {}
    width: dict[str, int] = {}
    at = 0
    for name, ty in prog.regs.items():
        w = 0 if ty == "pred" else max(1, int(ty[1:]) // 32) if ty[1:].isdigit() else 1
        bit[name], width[name] = at, w
        at += w
    return bit, width


def _mask(names: set[str], bit: dict[str, int], width: dict[str, int]) -> int:
    m = 0
    for n in names:
        w = width.get(n, 0)  # special registers (%tid, ...) are not the kernel's
        if w:
            m |= ((1 << w) - 1) << bit[n]
    return m


def register_estimate(prog: Program, maxnreg: int | None = None) -> int:
    code = prog.code
    n = len(code)
    if n == 0:
        return 1
    bit, width = _widths(prog)
    succ = successors(prog)
    uses, defs = [], []
    for ins in code:
        u, d = _use_def(ins)
        uses.append(_mask(u, bit, width))
        defs.append(_mask(d, bit, width))
    live_in = [0] * n
    changed = True
    while changed:
        changed = False
        for i in range(n - 1, -1, -1):
            out = 0
            for j in succ[i]:
                out |= live_in[j]
            new = uses[i] | (out & ~defs[i])
            if new != live_in[i]:
                live_in[i] = new
                changed = True
    most = max(max(x.bit_count() for x in live_in), 1)
    return min(most, MAX_REGISTERS, maxnreg or MAX_REGISTERS)
