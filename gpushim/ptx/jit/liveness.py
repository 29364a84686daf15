"""Registers live after each barrier of a linked kernel: only those are saved and restored around it."""

from __future__ import annotations

from gpushim.ptx.link import Program
from gpushim.ptx.nodes import Addr, Instr, Neg, Plist, PredPair, Reg, Sym, Vec

_NO_DEST = {"st", "red", "bra", "ret", "exit", "bar", "barrier", "membar", "fence", "prefetch", "prefetchu",
            "nanosleep", "pmevent", "discard"}  # fmt: skip


def no_dest(ins: Instr) -> bool:
    """Whether the instruction's first operand is not written (a store's address, ...)"""
    return ins.parts[0] in _NO_DEST or ins.parts[:2] == ["wmma", "store"]


def _regs(x, out: set[str]) -> None:
    if isinstance(x, Reg):
        out.add(x.name)
    elif isinstance(x, Neg):
        out.add(x.inner.name)
    elif isinstance(x, Addr) and isinstance(x.base, Reg):
        out.add(x.base.name)
    elif isinstance(x, (Vec, Plist)):
        for i in x.items:
            _regs(i, out)
    elif isinstance(x, PredPair):
        for r in (x.first, x.second):
            if r is not None:
                out.add(r.name)


def _use_def(ins: Instr) -> tuple[set[str], set[str]]:
    uses: set[str] = set()
    defs: set[str] = set()
    if ins.guard is not None:
        uses.add(ins.guard[0])
    if no_dest(ins) or not ins.args:
        for a in ins.args:
            _regs(a, uses)
        return uses, defs
    for a in ins.args[1:]:
        _regs(a, uses)
    d: set[str] = set()
    _regs(ins.args[0], d)
    if ins.guard is None:
        defs = d
    else:  # a predicated write may not happen: the old value stays live
        uses |= d
    return uses, defs


def referenced(prog: Program) -> set[str]:
    """The registers some instruction reads or writes (nvcc declares ranges, %r<403>, of which kernels use
    about half: the others get no alloca)"""
    out: set[str] = set()
    for ins in prog.code:
        uses, defs = _use_def(ins)
        out |= uses | defs
    return out


def successors(prog: Program) -> list[list[int]]:
    """The instructions that may run after each instruction."""
    code = prog.code
    n = len(code)
    succ: list[list[int]] = []
    for i, ins in enumerate(code):
        op = ins.parts[0]
        s = []
        if op == "bra":
            tgt = ins.args[0].name if ins.args and isinstance(ins.args[0], Sym) else None
            if tgt in prog.labels:
                s.append(prog.labels[tgt])
            if ins.guard is not None or tgt not in prog.labels:
                s.append(i + 1)
        elif op in ("ret", "exit"):
            if ins.guard is not None:
                s.append(i + 1)
        else:
            s.append(i + 1)
        succ.append([j for j in s if j < n])
    return succ


def cycles_without_barrier(prog: Program, branches: list[tuple[int, int]]) -> set[int]:
    """Of the backward branches (index, target index), those on a cycle that passes no barrier (the others
    need no watchdog poll of their own: the barrier rounds poll)."""
    succ = successors(prog)
    code = prog.code
    out = set()
    for i, j in branches:
        seen = {j}
        todo = [j]
        while todo:
            k = todo.pop()
            if k == i:
                out.add(i)
                break
            if code[k].parts[0] in ("bar", "barrier"):
                continue
            for m in succ[k]:
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
    return out


def live_after(prog: Program, points: list[int], cut: dict[int, set[str]] | None = None) -> dict[int, set[str]]:
    """For instruction indices `points`, the registers live on entry to the next instruction. cut: per
    instruction, registers whose liveness does not flow back through it (a stop that recomputes them at its
    resume point: what a thread must hold up to that stop then excludes them)."""
    cut = cut or {}
    code = prog.code
    n = len(code)
    succ = successors(prog)
    ud = [_use_def(ins) for ins in code]
    live_in: list[frozenset] = [frozenset()] * n
    changed = True
    while changed:
        changed = False
        for i in range(n - 1, -1, -1):
            out: set[str] = set()
            for j in succ[i]:
                out |= live_in[j]
            uses, defs = ud[i]
            if i in cut:
                defs = defs | cut[i]
            new = frozenset(uses | (out - defs))
            if new != live_in[i]:
                live_in[i] = new
                changed = True
    return {p: set(live_in[p + 1]) if p + 1 < n else set() for p in points}

