"""Named barriers in the JIT: `bar.sync`/`bar.arrive`/`barrier.sync`/`barrier.arrive` with a barrier id (0-15)
and an optional thread count, with the interpreter's semantics (../barriers.py).

The thread's side is a stop like `bar.sync 0` (stops.py); the barrier's id, count and kind are immediates, so
the launch function reads them from constant tables indexed by the resume point. The block's rounds
(`_named_rounds`, used for kernels with any named form) keep an arrival count per barrier id:
- a thread reaching a barrier adds one arrival to its id; at `bar.arrive` it stays runnable (from after the
  barrier), at `bar.sync` it waits (state -k-1, k its resume point);
- when the arrivals reach the count (the instruction's, or every live thread of the block without one), the
  id's count is reset and every thread waiting at a barrier of that id becomes runnable;
- a thread's exit re-checks every id with arrivals against the live threads (barriers.recheck);
- when no thread can run, every waiting thread is released (barriers.release_all: no deadlock report).
Arrivals are counted per thread, in the JIT's order (thread after thread); the interpreter counts the threads
of each group that arrives together. The two agree whenever a barrier's count is reached exactly (CUDA's
requirement: the count is the number of threads that arrive at the barrier in that phase); when more threads
than the count arrive at once, the interpreter releases the whole group and the JIT the first `count` of them.
"""

from __future__ import annotations

from gpushim.ptx.jit import layout as L
from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import I8, I32, I64, JitUnsupported
from gpushim.ptx.nodes import Imm, Instr

NBAR = 16  # barrier ids per block (PTX: 0-15)
_FORMS = {"cta", "sync", "arrive", "aligned"}


def bar_form(ins: Instr) -> tuple[int, int, bool]:
    """(barrier id, thread count or -1 for every live thread, arrive-only) of a bar/barrier .sync/.arrive with
    immediate operands; JitUnsupported for the other forms."""
    p = set(ins.parts[1:])
    if not p <= _FORMS or len(p & {"sync", "arrive"}) != 1 or len(ins.args) not in (1, 2):
        raise JitUnsupported(ins.op)
    if not all(isinstance(a, Imm) for a in ins.args):
        raise JitUnsupported(f"{ins.op} with a register barrier id or thread count")
    bid = int(ins.args[0].value) & (NBAR - 1)  # as barriers.py
    count = int(ins.args[1].value) if len(ins.args) == 2 else -1
    arrive = "arrive" in p
    if arrive and count < 0:
        raise JitUnsupported(f"{ins.op} without a thread count")
    return bid, count, arrive


class NamedBarOps:
    def _named_tab(self, name: str, vals: list[int], ty) -> ir.GlobalVariable:
        tab = ir.GlobalVariable(self.m, ir.ArrayType(ty, len(vals)), name=f"{name}_{len(self.m.functions)}")
        tab.global_constant = True
        tab.linkage = "internal"
        tab.initializer = ir.Constant(ir.ArrayType(ty, len(vals)), vals)
        return tab

    def _named_rounds(self, f, b, ctx, thread, ids, bufs, state, blocks) -> None:
        """One block's threads with named barriers (the module docstring). state[t]: >= 0 runnable from that
        resume point, -1 exited, -k-1 waiting at the barrier of resume point k."""
        if getattr(self, "coll_at", None) or getattr(self, "red_at", None):
            raise JitUnsupported("named barriers, bar.arrive or mbarrier waits with warp collectives or bar.red")
        bi = ids[3]
        blk_next, stop, failed = blocks
        c32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        nk = len(self.barriers) + 1
        info = [self.bar_info.get(k, (0, -1, False)) for k in range(nk)]
        bid_t = self._named_tab("bar_id", [i[0] for i in info], I32)
        cnt_t = self._named_tab("bar_count", [i[1] for i in info], I32)
        arr_t = self._named_tab("bar_arrive", [int(i[2]) for i in info], I8)
        bx, by, bz = (self._slot(b, ctx, L.BLOCK + i) for i in range(3))
        tpb = b.mul(b.mul(bx, by), bz)
        here = b.block
        b.position_at_start(f.entry_basic_block)  # (allocas in the entry block: once per launch)
        arrived = b.alloca(ir.ArrayType(I32, NBAR), name="bar_arrived")
        nlive_a, prog_a = b.alloca(I32, name="bar_live"), b.alloca(I32, name="bar_progress")
        b.position_at_end(here)
        for j in range(NBAR):
            b.store(c32(0), self._arrived(b, arrived, c32(j)))
        b.store(b.trunc(tpb, I32), nlive_a)
        rnd = f.append_basic_block("nbar_round")
        b.branch(rnd)
        b.position_at_end(rnd)
        self._poll_round(b, ctx, bi, stop)
        b.store(c32(0), prog_a)

        def release(bid):  # the id's count back to 0, its waiting threads runnable
            b.store(c32(0), self._arrived(b, arrived, bid))

            def wake(t):
                sp = b.gep(state, [t])
                s = self._tag(b.load(sp), "state")

                def waiting():
                    k = b.sub(c32(-1), s)
                    same = b.icmp_signed("==", b.load(b.gep(bid_t, [c32(0), k])), bid)
                    self._if(b, same, lambda: self._tag(b.store(k, sp), "state"))

                self._if(b, b.icmp_signed("<=", s, c32(-2)), waiting)

            self._for(b, tpb, wake)

        def recheck():  # after an exit: ids whose arrivals now cover every live thread
            def one(j):
                bid = b.trunc(j, I32)
                a = b.load(self._arrived(b, arrived, bid))
                done = b.and_(b.icmp_signed(">", a, c32(0)), b.icmp_signed(">=", a, b.load(nlive_a)))
                self._if(b, done, lambda: release(bid))

            self._for(b, c64(NBAR), one)

        def run(t):  # a runnable thread to its next stop
            sp = b.gep(state, [t])
            s = self._tag(b.load(sp), "state")

            def go():
                r = self._resume(f, b, ctx, thread, t, s, ids, bufs, (bx, by), failed, "nbar_ok")
                b.store(c32(1), prog_a)
                exited = b.icmp_signed("==", r, c32(0))

                def gone():
                    self._tag(b.store(c32(-1), sp), "state")
                    b.store(b.sub(b.load(nlive_a), c32(1)), nlive_a)
                    recheck()

                def arrived_at():
                    bid = b.load(b.gep(bid_t, [c32(0), r]))
                    count = b.load(b.gep(cnt_t, [c32(0), r]))
                    only = b.icmp_unsigned("!=", b.load(b.gep(arr_t, [c32(0), r])), ir.Constant(I8, 0))
                    self._tag(b.store(b.select(only, r, b.sub(c32(-1), r)), sp), "state")

                    def arrival():
                        ap = self._arrived(b, arrived, bid)
                        a = b.add(b.load(ap), c32(1))
                        b.store(a, ap)
                        want = b.select(b.icmp_signed("<", count, c32(0)), b.load(nlive_a), count)
                        self._if(b, b.icmp_signed(">=", a, want), lambda: release(bid))

                    self._if(b, b.icmp_signed("!=", count, c32(-2)), arrival)  # -2: a yield (ops_mbarrier.py)

                self._if(b, exited, gone)
                self._if(b, b.not_(exited), arrived_at)

            self._if(b, b.icmp_signed(">=", s, c32(0)), go)

        self._for(b, tpb, run)
        idle = f.append_basic_block("nbar_idle")
        some = f.append_basic_block("nbar_some")
        b.cbranch(b.icmp_signed("==", b.load(nlive_a), c32(0)), blk_next, some)
        b.position_at_end(some)
        b.cbranch(b.icmp_signed("!=", b.load(prog_a), c32(0)), rnd, idle)
        b.position_at_end(idle)  # every live thread waits and no count is reached: all released (release_all)
        for j in range(NBAR):
            b.store(c32(0), self._arrived(b, arrived, c32(j)))

        def free(t):
            sp = b.gep(state, [t])
            s = self._tag(b.load(sp), "state")
            self._if(b, b.icmp_signed("<=", s, c32(-2)), lambda: self._tag(b.store(b.sub(c32(-1), s), sp), "state"))

        self._for(b, tpb, free)
        b.branch(rnd)
        b.position_at_end(blk_next)

    @staticmethod
    def _arrived(b, arrived, bid):
        return b.gep(arrived, [ir.Constant(I32, 0), bid])
