"""Compiles a linked kernel (link.Program) into basic blocks of closures for the SIMT scheduler.

Every instruction becomes one closure `f(st, idx)` with its operands resolved; control instructions, barriers
and warp-synchronous instructions end basic blocks and are handled by the scheduler. Anything the engine
cannot execute raises PtxUnsupported here, when the module loads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpushim.ptx import ops_bits, ops_cmp, ops_cvt, ops_float, ops_int, ops_simd, ops_tex
from gpushim.ptx.errors import PtxError, PtxUnsupported
from gpushim.ptx.groups import alive_only
from gpushim.ptx.link import Program
from gpushim.ptx.nodes import Instr, Module, Reg, Sym
from gpushim.ptx.operands import Ctx

HANDLERS: dict = {}
for _m in (ops_int, ops_float, ops_bits, ops_cmp, ops_cvt, ops_simd, ops_tex):
    HANDLERS.update(_m.HANDLERS)


def _late_handlers() -> None:
    from gpushim.ptx import (
        devrt,
        ops_atom,
        ops_graphcond,
        ops_matrix,
        ops_mbarrier,
        ops_mem,
        ops_mma,
        ops_sys,
        ops_warp,
    )

    HANDLERS.update(devrt.HANDLERS)  # dynamic parallelism's device runtime calls
    EFFECTS.update(devrt.HANDLERS)

    HANDLERS.update({
        "ld": ops_mem.compile_ld, "ldu": ops_mem.compile_ld, "st": ops_mem.compile_st, "cvta": ops_mem.compile_cvta,
        "isspacep": ops_mem.compile_isspacep, "prefetch": ops_mem.compile_nop, "prefetchu": ops_mem.compile_nop,
        "membar": ops_mem.compile_nop, "fence": ops_mem.compile_nop, "nanosleep": ops_mem.compile_nop,
        "brkpt": ops_mem.compile_nop, "pmevent": ops_mem.compile_nop, "discard": ops_mem.compile_nop,
        "applypriority": ops_mem.compile_nop, "createpolicy": ops_sys.compile_createpolicy,
        "cp": ops_mem.compile_cp_async, "atom": ops_atom.compile_atom, "red": ops_atom.compile_atom,
        "activemask": ops_warp.compile_activemask,
        "@vprintf": ops_sys.compile_vprintf, "@__assertfail": ops_sys.compile_assertfail,
        "@malloc": ops_sys.compile_malloc, "@free": ops_sys.compile_free,
        "@stackoverflow": ops_sys.compile_stackoverflow,
        "mbarrier": ops_mbarrier.compile_mbarrier, "griddepcontrol": ops_mbarrier.compile_griddepcontrol,
        "@cudaGraphSetConditional": ops_graphcond.compile_set_conditional,
    })  # fmt: skip
    WARP_HANDLERS.update({
        "shfl": ops_warp.compile_shfl, "vote": ops_warp.compile_vote, "match": ops_warp.compile_match,
        "redux": ops_warp.compile_redux, "bar.warp": ops_warp.compile_warp_sync, "elect": ops_warp.compile_elect,
        "wmma": ops_mma.compile_wmma, "mma": ops_mma.compile_mma, "ldmatrix": ops_matrix.compile_ldmatrix,
        "stmatrix": ops_matrix.compile_stmatrix, "movmatrix": ops_matrix.compile_movmatrix,
    })  # fmt: skip
    BAR_HANDLERS.update({"bar": ops_warp.compile_bar, "barrier": ops_warp.compile_bar})


WARP_HANDLERS: dict = {}
# instructions whose effects go beyond registers: exited threads must not take part (groups.alive_only)
EFFECTS = {"ld", "ldu", "st", "atom", "red", "cp", "@vprintf", "@__assertfail", "@malloc", "@free", "activemask",
           "@stackoverflow", "mbarrier", "@cudaGraphSetConditional",
           "prefetch", "prefetchu", "tex", "tld4", "txq", "suq", "suld", "sust"}  # fmt: skip
BAR_HANDLERS: dict = {}

UNSUPPORTED = {
    "sured": "surface reduction (sured)", "cp.async.bulk": "bulk asynchronous copy (TMA)",
    "cp.reduce": "cp.reduce.async.bulk", "wgmma": "wgmma", "tcgen05": "tcgen05",
    "getctarank": "clusters (getctarank)", "setmaxnreg": "setmaxnreg",
    "alloca": "dynamic stack allocation (alloca)", "stacksave": "stacksave", "stackrestore": "stackrestore",
    "multimem": "multimem", "cvt.pack": "cvt.pack",
    "istypep": "istypep (texture/surface handles)", "tensormap": "tensormap", "clusterlaunchcontrol": "clusters",
}  # fmt: skip


@dataclass
class Block:
    start: int
    fns: list = field(default_factory=list)
    n: int = 0  # instructions, for the statistics
    kind: str = "fall"  # fall | bra | brx | exit | trap | bar | warp
    next: int = 0  # fall-through pc
    target: int = 0
    guard: object = None  # predicate reader of a conditional terminator
    neg: bool = False
    op: object = None  # bar: action at release (bar.red), warp: the instruction
    table: list = field(default_factory=list)
    line: int = 0
    text: str = ""

    @property
    def pure_exit(self) -> bool:
        """A block that only ends its threads (nvcc's shared `ret`)."""
        return self.kind == "exit" and not self.fns and self.guard is None


@dataclass
class Kernel:
    prog: Program
    ctx: Ctx
    blocks: dict[int, Block]
    nregs: int
    reg_init: list


def _guarded(fn, pred, neg: bool):
    def g(st, idx):
        p = pred(st, idx)
        if neg:
            p = ~p
        if p.__class__ is np.bool_:
            if p:
                fn(st, idx)
            return
        if p.all():
            fn(st, idx)
            return
        if idx is None:
            sub = np.flatnonzero(p if st.alive_idx is None else p & st.alive)
        else:
            sub = idx[p]
        if sub.size == 0:
            return
        fn(st, None if idx is None and sub.size == st.n_alive else sub)

    return g


def _kind(ins: Instr) -> str:
    op = ins.op
    base = op.split(".")[0]
    if base == "bra":
        return "bra"
    if base == "brx":
        return "brx"
    if base in ("ret", "exit"):
        return "exit"
    if base == "trap":
        return "trap"
    if op.startswith("bar.warp.sync"):
        return "warp"
    if base in ("bar", "barrier"):
        return "bar"
    if base in ("shfl", "vote", "match", "redux", "elect", "wmma", "mma", "ldmatrix", "stmatrix", "movmatrix"):
        return "warp"
    return "normal"


def compile_kernel(mod: Module, prog: Program) -> Kernel:
    if not HANDLERS.get("ld"):
        _late_handlers()
    ctx = Ctx(mod, prog)
    code = prog.code
    kinds = [_kind(i) for i in code]
    leaders = {0}
    leaders.update(prog.labels.values())
    for pc, k in enumerate(kinds):
        if k != "normal":
            leaders.add(pc + 1)
            if k in ("bar", "warp"):
                leaders.add(pc)
    leaders = sorted(x for x in leaders if x <= len(code))
    blocks: dict[int, Block] = {}
    for bi, start in enumerate(leaders):
        end = leaders[bi + 1] if bi + 1 < len(leaders) else len(code)
        blk = Block(start, next=end)
        if start >= len(code):
            blk.kind = "exit"
            blocks[start] = blk
            continue
        for pc in range(start, end):
            ins = code[pc]
            ctx.ins = ins
            k = kinds[pc]
            blk.n += 1
            blk.line = ins.line
            blk.text = ins.op
            if k == "normal":
                fn = _compile_normal(ctx, ins)
                if fn is not None and ins.op.split(".")[0] in EFFECTS:
                    fn = alive_only(fn)
                if fn is not None:
                    if ins.guard is not None:
                        fn = _guarded(fn, ctx.reader(Reg(ins.guard[0]), "pred"), ins.guard[1])
                    blk.fns.append(fn)
                continue
            blk.kind = k
            if ins.guard is not None:
                blk.guard = ctx.reader(Reg(ins.guard[0]), "pred")
                blk.neg = ins.guard[1]
            if k == "bra":
                tgt = ins.args[0]
                if not isinstance(tgt, Sym) or tgt.name not in prog.labels:
                    raise PtxError(f"line {ins.line}: branch to unknown label {tgt} (kernel {prog.kernel})")
                blk.target = prog.labels[tgt.name]
            elif k == "brx":
                tbl = ins.args[1]
                if not isinstance(tbl, Sym) or tbl.name not in prog.branch_tables:
                    raise ctx.fail("brx.idx without a .branchtargets table")
                blk.table = [prog.labels[t] for t in prog.branch_tables[tbl.name]]
                blk.op = ctx.reader(ins.args[0], "u32")
            elif k == "bar":
                base = ins.op.split(".")[0]
                blk.op = BAR_HANDLERS[base](ctx, ins)
            elif k == "warp":
                key = "bar.warp" if ins.op.startswith("bar.warp") else ins.op.split(".")[0]
                blk.op = alive_only(WARP_HANDLERS[key](ctx, ins))
        blocks[start] = blk
    reg_init = [dt.type(0) for dt in ctx.reg_dtype]
    return Kernel(prog, ctx, blocks, len(ctx.reg_dtype), reg_init)


def _compile_normal(ctx: Ctx, ins: Instr):
    op = ins.op
    base = op.split(".")[0]
    for pre, what in UNSUPPORTED.items():
        if op == pre or op.startswith(pre + "."):
            raise PtxUnsupported(what + f" [{op}]", ctx.kernel, ins.line)
    h = HANDLERS.get(base)
    if h is None:
        raise PtxUnsupported(f"instruction {op}", ctx.kernel, ins.line)
    try:
        return h(ctx, ins)
    except (PtxError, PtxUnsupported):
        raise
    except (KeyError, IndexError, ValueError, TypeError) as e:
        raise PtxUnsupported(f"instruction {op} ({type(e).__name__}: {e})", ctx.kernel, ins.line) from e
