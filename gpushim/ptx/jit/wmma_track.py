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

LOG = 8  # the sites of a lane's first LOG loads/stores since the last check (then the hash alone tells)
NREC = 3 + LOG  # a lane's record, in its collective slots: count, hash, LOG sites + 1, a slot for the rest
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
        pn, ph = self._cslot(self.rec0), self._cslot(self.rec0 + 1)
        n, h = self._tag(b.load(pn), "coll_in"), self._tag(b.load(ph), "coll_in")
        self._tag(b.store(b.add(n, c64(1)), pn), "coll_in")
        self._tag(b.store(b.add(b.mul(h, c64(_HASH)), c64(site + 1)), ph), "coll_in")
        j = b.add(b.select(b.icmp_unsigned("<", n, c64(LOG)), n, c64(LOG)), c64(self.cbase + self.rec0 + 2))
        if self.thread_major:
            p = b.gep(self.spill_row, [j])
        else:
            p = b.gep(self.spill, [b.add(b.mul(j, self.tpb), self.t)])
        self._tag(b.store(c64(site + 1), p), "coll_in")

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
        anyr, diff, best, who = (b.alloca(I64) for _ in range(4))
        nl = b.sub(tpb, t0)
        nl = b.select(b.icmp_signed("<", nl, c64(32)), nl, c64(32))
        partial = b.icmp_unsigned("<", nl, c64(32))

        def rec(ln, j):
            return self._tag(b.load(self.slot_addr(b, spill, tpb, self.cbase + self.rec0 + j, b.add(t0, ln))),
                             "coll_in")  # fmt: skip

        def fault():  # (best: a site + 1, who: the lane)
            return b.or_(b.shl(b.load(best), c64(32)), b.add(b.add(t0, b.load(who)), c64(1)))

        def scan(entry):
            """Over the lanes: diff |= entry != lane 0's, anyr |= entry != 0, (best, who) the lowest nonzero
            entry and its first lane"""
            for a, v in ((anyr, 0), (diff, 0), (best, 2**64 - 1), (who, 0)):
                b.store(c64(v), a)
            e0 = entry(c64(0))

            def lane(ln):
                e = entry(ln)
                has = b.icmp_unsigned("!=", e, c64(0))
                b.store(b.or_(b.load(anyr), b.zext(has, I64)), anyr)
                b.store(b.or_(b.load(diff), b.xor(e, e0)), diff)
                lower = b.and_(has, b.icmp_unsigned("<", e, b.load(best)))
                b.store(b.select(lower, e, b.load(best)), best)
                b.store(b.select(lower, ln, b.load(who)), who)

            self._for(b, nl, lane)

        def position(i):  # the first position where the lanes' sites differ (a lane not there has none)
            at = c64(self.cbase + self.rec0 + 2)
            scan(lambda ln: b.select(b.icmp_unsigned(">", rec(ln, 0), i), self._tag(b.load(self.slot_addr_dyn(
                b, spill, tpb, b.add(at, i), b.add(t0, ln))), "coll_in"), c64(0)))  # fmt: skip
            differs = b.or_(b.icmp_unsigned("!=", b.load(diff), c64(0)),
                            b.and_(partial, b.icmp_unsigned("!=", b.load(anyr), c64(0))))  # fmt: skip
            bad, go = f.append_basic_block("wrec_at"), f.append_basic_block("wrec_next")
            b.cbranch(differs, bad, go)
            b.position_at_end(bad)
            b.ret(fault())
            b.position_at_end(go)

        self._for(b, c64(LOG), position)
        # the first LOG sites agree (so a partial warp has no records): then the counts and hashes tell; a
        # fault names the earliest first site
        scan(lambda ln: b.xor(b.mul(rec(ln, 0), c64(_HASH)), rec(ln, 1)))
        bad_n = b.icmp_unsigned("!=", b.load(diff), c64(0))
        scan(lambda ln: b.select(b.icmp_unsigned("!=", rec(ln, 0), c64(0)), rec(ln, 2), c64(0)))
        yes, no = f.append_basic_block("pass"), f.append_basic_block("fault")
        b.cbranch(bad_n, no, yes)
        b.position_at_end(no)
        b.ret(fault())
        b.position_at_end(yes)

        def reset(ln):
            for j in range(2):
                self._tag(b.store(c64(0), self.slot_addr(b, spill, tpb, self.cbase + self.rec0 + j,
                                                         b.add(t0, ln))), "coll_in")  # fmt: skip

        self._for(b, nl, reset)
        b.ret(c64(0))
        return f

    def slot_addr_dyn(self, b: ir.IRBuilder, spill, tpb, j, t):
        """stops.slot_addr with j an i64 value"""
        if self.thread_major:
            return b.gep(spill, [b.add(b.mul(t, ir.Constant(I64, self.nspill)), j)])
        return b.gep(spill, [b.add(b.mul(j, tpb), t)])

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

        def reset(t):  # (the count and hash: a lane's sites are read only below its count)
            for j in range(2):
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
