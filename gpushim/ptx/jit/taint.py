"""Can a launch's memory accesses be checked before it runs? (the JIT's check-then-run fast path)

A kernel qualifies when no address of a memory access, no guard of one and no branch condition depends on a
value read from device memory (global, shared, local or generic loads, atomics): then a pass that runs every
thread without touching memory (codegen mode "check") sees the same control flow and the same addresses as the
real run, and when it finds every access in bounds and aligned the real run may skip the checks (mode "fast").
Kernel parameters and constant memory do not change during a launch: reading them keeps a value clean.
"""

from __future__ import annotations

from gpushim.ptx.jit.liveness import _regs, no_dest
from gpushim.ptx.jit.ops_sys import HOST_OPS
from gpushim.ptx.jit.ops_warp import is_bar_red, is_collective
from gpushim.ptx.link import Program
from gpushim.ptx.nodes import Addr, Instr, Reg

_MEM = {"ld", "ldu", "st", "atom", "red"}


def _reads_memory(ins: Instr) -> bool:
    op = ins.parts[0]
    if is_collective(ins) or is_bar_red(ins):  # other threads' values: the check pass runs each thread alone
        return True
    if op in ("atom", "red"):
        return True
    if op not in ("ld", "ldu"):
        return False
    parts = set(ins.parts[1:])
    if "const" in parts:
        return False
    if parts & {"param", "param::entry"} and not ins.callee:
        # the kernel's named parameters (in a callee, .param is the caller's frame: memory; a computed
        # address into the parameters is not read by the check pass)
        return any(isinstance(a, Addr) and isinstance(a.base, Reg) for a in ins.args)
    return True


def _dests(ins: Instr) -> set[str]:
    d: set[str] = set()
    if (not no_dest(ins) or is_bar_red(ins)) and ins.args:
        _regs(ins.args[0], d)
    return d


def _sources(ins: Instr) -> set[str]:
    s: set[str] = set()
    if ins.guard is not None:
        s.add(ins.guard[0])
    args = ins.args if no_dest(ins) else ins.args[1:]
    for a in args:
        _regs(a, s)
    return s


def why_unchecked(prog: Program) -> str | None:
    """None when the kernel qualifies for the check-then-run path, else why not."""
    code = prog.code
    info = [(ins, _dests(ins), _sources(ins), _reads_memory(ins)) for ins in code]
    tainted: set[str] = set()
    changed = True
    while changed:  # flow-insensitive: a register is tainted when any of its definitions is
        changed = False
        for _, dests, srcs, mem in info:
            if dests - tainted and (mem or srcs & tainted):
                tainted |= dests
                changed = True
    for ins in code:
        op = ins.parts[0]
        if op == "trap":
            return "trap"
        if op == "mbarrier" or (op == "cp" and "mbarrier" in ins.parts):  # (ops_mbarrier.py: objects in memory)
            return f"line {ins.line}: mbarrier"
        if op in HOST_OPS:  # (a malloc'd address is memory-derived; printf's output must not run twice)
            return f"line {ins.line}: {op[1:]}"
        mem = op in _MEM or op == "wmma"  # (wmma.load/store: ops_mma.py)
        if ins.guard is not None and ins.guard[0] in tainted and (mem or op in ("bra", "ret", "exit")):
            return f"line {ins.line}: a guard read from memory"
        if mem:
            for a in ins.args:
                if isinstance(a, Addr) and isinstance(a.base, Reg) and a.base.name in tainted:
                    return f"line {ins.line}: an address read from memory"
    return None
