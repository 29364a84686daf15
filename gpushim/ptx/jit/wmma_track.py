"""wmma.load/store without a stop (a mixin of codegen.Codegen), in kernels that also have a `wmma.mma`.

The interpreter runs a wmma.load/store once per warp and fails a partial or diverged warp with
ILLEGAL_INSTRUCTION naming the load/store (PTX leaves that undefined). A stop per load/store (a warp collective)
costs tier 1 a save and restore of every live register and blocks: half the compile time of the wmma kernels.
Here each lane does its own accesses in place (its own address, as after the stop) and keeps a record in its
collective slots: how many loads/stores it executed since the warp was last checked, a hash of their sites in
order, and the first site. The warp is checked at each `wmma.mma`'s `@combine` case (before its own full-warp
check) and when the block ends: it passes when no lane has a record, or when all 32 lanes exist and their
records are equal (then they are reset). Otherwise ILLEGAL_INSTRUCTION with the interpreter's message of the
load/store at the earliest first site among the lanes, naming the first lane whose record starts there.

Kernels without a `wmma.mma` keep the stop (ops_warp.py; they are small). Differences from the interpreter, all
in cases PTX leaves undefined, are in jit/README.md ("wmma.load/store").
"""

from __future__ import annotations

from gpushim.cuda_errors import Err
from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import I64
from gpushim.ptx.nodes import Instr

NREC = 3  # a lane's record, in its collective slots: count, hash of the site sequence, first site + 1
_HASH = 0x100000001B3  # (FNV's prime: h = h * P + site + 1)


def is_wmma_ldst(ins: Instr) -> bool:
    return ins.parts[0] == "wmma" and ins.parts[1] in ("load", "store")


def ldst_inline(code: list[Instr]) -> bool:
    """Whether the kernel's wmma.load/store run in place (it has a wmma.mma, where the warp is checked)"""
    return any(ins.parts[:2] == ["wmma", "mma"] for ins in code)


def partial_msg(ins: Instr) -> str:
    """The interpreter's message of a matrix instruction in a partial or diverged warp ({who}: the thread)"""
    return (f"{ins.op} (line {ins.line}): a warp-collective matrix instruction needs all 32 threads of the warp; "
            "{who} ran it in a partial or diverged warp")  # fmt: skip


class WmmaTrack:
    # -- the thread's side ----------------------------------------------------------------------------------
    def _wmma_inline(self, ins: Instr) -> None:
        """A wmma.load/store in place: the lane's accesses (check mode: the checks only), then its record"""
        if self.mode == "check":
            self._mma_check(ins)
            return
        site = self._site(Err.ILLEGAL_INSTRUCTION, partial_msg(ins))

        def emit():
            self._wmma_ldst(ins)
            self._wrec_note(site)

        if ins.guard is None:
            emit()
        else:
            self._when(self._guard(ins), emit)

    def _wrec_note(self, site: int) -> None:
        b = self.b
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        slots = [self._cslot(self.rec0 + j) for j in range(NREC)]
        n, h, first = (self._tag(b.load(p), "coll_in") for p in slots)
        vals = (b.add(n, c64(1)), b.add(b.mul(h, c64(_HASH)), c64(site + 1)),
                b.select(b.icmp_unsigned("==", n, c64(0)), c64(site + 1), first))  # fmt: skip
        for p, v in zip(slots, vals, strict=True):
            self._tag(b.store(v, p), "coll_in")

    # -- the warp's check -----------------------------------------------------------------------------------
    def _wrec_fn(self) -> ir.Function:
        """i64 @wrec(spill, tpb, t0): 0 when the warp at t0 passes (its records reset), else (site + 1) << 32 |
        (thread + 1) of the fault (the module docstring). One per module and spill layout."""
        key = (id(self.m), self.thread_major, self.cbase, self.rec0, self.nspill)
        cache = self.__dict__.setdefault("_wrec_cache", {})
        if key not in cache:
            cache[key] = self._wrec_build()
        return cache[key]

    def _wrec_build(self) -> ir.Function:
        fty = ir.FunctionType(I64, [I64.as_pointer(), I64, I64])
        f = ir.Function(self.m, fty, name=f"wrec_{len(self.m.functions)}")
        f.linkage = "internal"
        spill, tpb, t0 = f.args
        b = ir.IRBuilder(f.append_basic_block("e"))
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        accs = [b.alloca(I64) for _ in range(4)]  # any record, any difference, the lowest first site, its lane
        for a, v in zip(accs, (0, 0, 2**64 - 1, 0), strict=True):
            b.store(c64(v), a)
        anyr, diff, best, who = accs
        nl = b.sub(tpb, t0)
        nl = b.select(b.icmp_signed("<", nl, c64(32)), nl, c64(32))

        def rec(lane):
            return [self._tag(b.load(self.slot_addr(b, spill, tpb, self.cbase + self.rec0 + j, b.add(t0, lane))),
                              "coll_in") for j in range(NREC)]  # fmt: skip

        r0 = rec(c64(0))

        def lane(ln):
            r = rec(ln)
            has = b.icmp_unsigned("!=", r[0], c64(0))
            b.store(b.or_(b.load(anyr), b.zext(has, I64)), anyr)
            d = b.or_(b.or_(b.xor(r[0], r0[0]), b.xor(r[1], r0[1])), b.xor(r[2], r0[2]))
            b.store(b.or_(b.load(diff), d), diff)
            lower = b.and_(has, b.icmp_unsigned("<", r[2], b.load(best)))
            b.store(b.select(lower, r[2], b.load(best)), best)
            b.store(b.select(lower, ln, b.load(who)), who)

        self._for(b, nl, lane)
        same = b.and_(b.icmp_unsigned("==", nl, c64(32)), b.icmp_unsigned("==", b.load(diff), c64(0)))
        ok = b.or_(b.icmp_unsigned("==", b.load(anyr), c64(0)), same)
        yes, no = f.append_basic_block("pass"), f.append_basic_block("fault")
        b.cbranch(ok, yes, no)
        b.position_at_end(no)
        b.ret(b.or_(b.shl(b.load(best), c64(32)), b.add(b.add(t0, b.load(who)), c64(1))))
        b.position_at_end(yes)

        def reset(ln):
            for j in range(NREC):
                self._tag(b.store(c64(0), self.slot_addr(b, spill, tpb, self.cbase + self.rec0 + j,
                                                         b.add(t0, ln))), "coll_in")  # fmt: skip

        self._for(b, nl, reset)
        b.ret(c64(0))
        return f

    def _wrec_case(self, b: ir.IRBuilder, env) -> None:
        """At a wmma.mma's @combine case, before its own check: a failing warp's fault in every lane's CP slot
        (_mma_out reports it), and the case returns"""
        if not getattr(self, "wmma_inline", False):
            return
        ld, st, each, act, nl, t0, first, cp_slot = env
        spill, tpb = b.function.args[1], b.function.args[2]
        r = b.call(self._wrec_fn(), [spill, tpb, t0])
        bad, go = b.function.append_basic_block("wrec_fault"), b.function.append_basic_block("wrec_ok")
        b.cbranch(b.icmp_unsigned("!=", r, ir.Constant(I64, 0)), bad, go)
        b.position_at_end(bad)
        each(lambda lane: st(cp_slot, lane, r))
        b.ret_void()
        b.position_at_end(go)

    # -- the launch's side ----------------------------------------------------------------------------------
    def _wrec_begin(self, f, b: ir.IRBuilder, spill, tpb, blk_next):
        """At the start of a block's rounds: the records 0, the check function; returns the block the rounds
        go to when every thread exited (the block-end check, _wrec_end), or blk_next without records."""
        if not getattr(self, "wmma_inline", False):
            return blk_next

        def reset(t):
            for j in range(NREC):
                self._tag(b.store(ir.Constant(I64, 0), self.slot_addr(b, spill, tpb, self.cbase + self.rec0 + j,
                                                                      t)), "coll_in")  # fmt: skip

        self._for(b, tpb, reset)
        return f.append_basic_block("wrec_end")

    def _wrec_end(self, b: ir.IRBuilder, ctx, spill, tpb, nw, bi, failed, wend, blk_next) -> None:
        """The block-end check of every warp (wend: from _wrec_begin), then blk_next; a fault to failed"""
        if wend is blk_next:
            return
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        b.position_at_end(wend)
        f = b.function

        def warp(w):
            r = b.call(self._wrec_fn(), [spill, tpb, b.mul(w, c64(32))])
            bad, go = f.append_basic_block("wend_fault"), f.append_basic_block("wend_ok")
            b.cbranch(b.icmp_unsigned("!=", r, c64(0)), bad, go)
            b.position_at_end(bad)
            site = b.sub(b.lshr(r, c64(32)), c64(1))
            thread = b.sub(b.and_(r, c64(0xFFFFFFFF)), c64(1))
            self._record_fault(b, ctx, c64(Err.ILLEGAL_INSTRUCTION), site, c64(0), thread, bi)
            b.branch(failed)
            b.position_at_end(go)

        self._for(b, nw, warp)
        b.branch(blk_next)
