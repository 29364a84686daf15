"""Registers recomputed after a barrier instead of saved: address arithmetic of thread and block indices.

A register qualifies at a barrier when it has one definition, unguarded, that dominates the barrier and is
pure arithmetic (comparisons and selects included) of constants, special registers (%tid, %ntid, %ctaid,
%nctaid, %laneid, %warpid, %lanemask_*: constant per thread), named kernel parameters and other qualifying
registers. Its value after the barrier is then what that definition
computes again at the resume point. Besides saving the spill traffic, the recomputed value is visibly affine
in the thread index, so the region loops' shared and global accesses vectorise as contiguous or broadcast
accesses instead of gathers.
"""

from __future__ import annotations

from gpushim.ptx.jit.liveness import _regs, no_dest, successors
from gpushim.ptx.link import Program
from gpushim.ptx.nodes import Addr, Imm, Instr, Reg, Sym

_PURE = {"mov", "add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor", "not", "neg", "cvta", "cvt", "min",
         "max", "setp", "selp"}  # fmt: skip
_SPECIALS = ("%tid.", "%ntid.", "%ctaid.", "%nctaid.", "%laneid", "%warpid", "%lanemask_")


def dominators(prog: Program) -> list[int]:
    """Immediate dominator of each instruction (-1: the entry; unreachable instructions: -2)."""
    succ = successors(prog)
    n = len(prog.code)
    if not n:
        return []
    order: list[int] = []  # reverse postorder
    seen = [False] * n
    stack = [(0, iter(succ[0]))]
    seen[0] = True
    while stack:
        node, it = stack[-1]
        nxt = next(it, None)
        if nxt is None:
            order.append(node)
            stack.pop()
        elif not seen[nxt]:
            seen[nxt] = True
            stack.append((nxt, iter(succ[nxt])))
    order.reverse()
    rpo = {v: i for i, v in enumerate(order)}
    preds: list[list[int]] = [[] for _ in range(n)]
    for v in order:
        for w in succ[v]:
            preds[w].append(v)
    idom = [-2] * n
    idom[0] = 0
    changed = True
    while changed:  # Cooper, Harvey, Kennedy: "A simple, fast dominance algorithm"
        changed = False
        for v in order[1:]:
            new = -2
            for p in preds[v]:
                if idom[p] == -2:
                    continue
                if new == -2:
                    new = p
                    continue
                a, b = p, new
                while a != b:
                    while rpo[a] > rpo[b]:
                        a = idom[a]
                    while rpo[b] > rpo[a]:
                        b = idom[b]
                new = a
            if new != idom[v]:
                idom[v] = new
                changed = True
    idom[0] = -1
    return idom


def _operand_ok(x, ok_reg) -> bool:
    if isinstance(x, Imm):
        return True
    if isinstance(x, Reg):
        return x.name.startswith(_SPECIALS) or ok_reg(x.name)
    if isinstance(x, Sym):
        return True  # addresses of variables and parameters, WARP_SZ
    return False


class Remat:
    def __init__(self, prog: Program) -> None:
        self.prog = prog
        code = prog.code
        defs: dict[str, list[int]] = {}
        for i, ins in enumerate(code):
            if no_dest(ins) or not ins.args:
                continue
            d: set[str] = set()
            _regs(ins.args[0], d)
            for r in d:
                defs.setdefault(r, []).append(i)
        self.def_of = {r: v[0] for r, v in defs.items() if len(v) == 1}
        self.idom = dominators(prog) if any(ins.parts[0] in ("bar", "barrier") for ins in code) else []
        self._pure: dict[str, bool] = {}

    def _pure_def(self, r: str) -> bool:
        """r has one unguarded pure definition whose operands are pure (independent of any barrier)."""
        if r in self._pure:
            return self._pure[r]
        self._pure[r] = False  # cycles (a register defined from itself) do not qualify
        i = self.def_of.get(r)
        ok = False
        if i is not None:
            ins: Instr = self.prog.code[i]
            op = ins.parts[0]
            if ins.guard is None and isinstance(ins.args[0], Reg):
                if op in _PURE:
                    ok = all(_operand_ok(a, self._pure_def) for a in ins.args[1:])
                elif op == "ld" and "param" in ins.parts and not ins.callee:
                    a = ins.args[1]
                    ok = isinstance(a, Addr) and isinstance(a.base, Sym)
        self._pure[r] = ok
        return ok

    def at(self, barrier: int, live: set[str]) -> list[int]:
        """Definitions (instruction indices, in an order that computes operands first) that recompute the
        registers of `live` that qualify at `barrier`; empty when none."""
        if not self.idom:
            return []
        out: list[int] = []
        done: set[str] = set()
        doms = self._doms(barrier)

        def need(r: str) -> bool:
            if r in done:
                return True
            i = self.def_of.get(r)
            if i is None or not self._pure_def(r) or i not in doms:
                return False
            ins = self.prog.code[i]
            deps: set[str] = set()
            for a in ins.args[1:]:
                _regs(a, deps)
            for q in sorted(deps):
                if not q.startswith(_SPECIALS) and not need(q):
                    return False
            done.add(r)
            out.append(i)
            return True

        for r in sorted(live):
            need(r)
        return out

    def _doms(self, i: int) -> set[int]:
        """The instructions that dominate instruction i (its chain of immediate dominators, i included)."""
        out = set()
        while i >= 0:
            out.add(i)
            i = self.idom[i]
        return out

    def regs_of(self, defs: list[int]) -> set[str]:
        out: set[str] = set()
        for i in defs:
            _regs(self.prog.code[i].args[0], out)
        return out
