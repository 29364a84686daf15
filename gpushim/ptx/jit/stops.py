"""Stops (barriers, warp collectives) in the compiling engine's thread function (a mixin of codegen.Codegen):
which registers each stop saves and its resume point restores or recomputes, and the code that does it.

A thread reaching a stop saves the registers its resume point needs in its spill slots and returns the resume
point; called again with it, the thread function restores them, recomputes the others (remat.py) and goes on.
The registers a resume point needs are those read before the next stop (or saved there), not every register
live after it: one recomputed at a later stop's resume point is not carried through the stops before
(`_stop_live`). On tier 1 the stops with similar sets of registers share one save and one restore sequence
(`save_groups`: each saves the union of the group's sets; a register saved that its stop does not need is
restored where nothing reads it), which costs a few stores at run time and saves much code to compile; tier
2 keeps a sequence per stop (its region loops inline one resume point each).
"""

from __future__ import annotations

from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import I32, I64
from gpushim.ptx.jit.liveness import live_after
from gpushim.ptx.jit.ops_mbarrier import is_mbar_wait


def save_groups(sets: dict[int, set[str]]) -> dict[int, frozenset[str]]:
    """Stops (instruction index -> registers to save) grouped greedily, in program order, while the group's
    union exceeds each member's set by at most a quarter of it (at least 2): per grouped stop, the union.
    Stops left alone (no similar stop, or nothing to save) are not in the result."""
    groups: list[tuple[set[str], list[int]]] = []
    for i in sorted(sets):
        s = sets[i]
        if not s:
            continue
        best = None
        for g in groups:
            u = g[0] | s
            if all(len(u) - len(sets[m]) <= max(2, len(sets[m]) // 4) for m in (*g[1], i)):
                if best is None or len(u) < len(best[0] | s):
                    best = g
        if best is None:
            groups.append((set(s), [i]))
        else:
            best[0].update(s)
            best[1].append(i)
    return {i: frozenset(u) for u, members in groups if len(members) > 1 for i in members}


class StopOps:
    thread_major = False  # the spill area's layout (slot_addr; generate() sets it per tier)

    def _liveness(self) -> dict[int, set[str]]:
        """live_after of the stops, and at -1 the registers live at the kernel's start (once per kernel)."""
        if not hasattr(self, "_live"):
            self._live = live_after(self.prog, [*self.bar_idx, -1])
        return self._live

    def _stop_live(self) -> dict[int, set[str]]:
        """Per stop, the registers its resume point must restore or recompute: those live after it, where a
        register recomputed at a later stop's resume point (remat.py) is not live before that stop (so it is
        neither carried through the stops before nor recomputed where nothing up to the next stop reads it)."""
        if not self.bar_idx:
            return {}
        live = {i: r for i, r in self._liveness().items() if i >= 0}
        if not self.remat.idom:
            return live
        # (not through mbarrier waits: those stop only while the phase is incomplete, ops_mbarrier.py)
        redo = {i: self.remat.regs_of(self.remat.at(i, r)) & r for i, r in live.items()
                if not is_mbar_wait(self.prog.code[i])}
        return live_after(self.prog, self.bar_idx, cut=redo)

    def _plan_stops(self) -> None:
        """Per stop: the definitions that recompute registers at its resume point, and the registers saved
        (bar_plan); their slots (slot_of; then ops_warp's collective slots, nspill in all); tier 1's shared
        save sequences (save_group)."""
        self.bar_plan = {}
        for i, live in self._stop_live().items():
            defs = self.remat.at(i, live)
            self.bar_plan[i] = (defs, live - self.remat.regs_of(defs))
        across = set().union(*(sp for _, sp in self.bar_plan.values())) if self.bar_plan else set()
        self.slot_of = {r: j for j, r in enumerate(r for r in self.regs if r in across)}
        self.nspill = max(len(self.slot_of), 1)
        self._coll_setup()  # warp collectives: their slots (ops_warp.py)
        share = self.thread_major and self.mode != "check"
        self.save_group = save_groups({i: sp for i, (_, sp) in self.bar_plan.items()}) if share else {}
        self._shared_saves: dict[frozenset[str], list] = {}  # group -> [save block, its phi, restore block, switch]

    def _stop(self) -> int:
        """A stop at the current instruction (a barrier, a warp collective): save the registers live after it,
        return its resume point; resuming restores them and continues after it. Returns the resume point."""
        b = self.b
        k = len(self.barriers) + 1
        defs, spilled = self.bar_plan[self.i]
        self._flush_count()
        blk = self.f.append_basic_block(f"resume{k}")
        self.barriers.append(blk)
        group = self.save_group.get(self.i)
        if group is None:
            live = self._saved(spilled)
            self._save(live)
            self._count_out()
            b.ret(ir.Constant(I32, k))
            self.dispatch.add_case(ir.Constant(I32, k), blk)
            b.position_at_end(blk)
            self._restore(live)
        else:
            shared = self._shared_saves.get(group)
            if shared is None:
                shared = self._shared_saves[group] = self._shared_save(group, blk)
            else:
                shared[3].add_case(ir.Constant(I32, k), blk)
            shared[1].add_incoming(ir.Constant(I32, k), b.block)
            b.branch(shared[0])
            self.dispatch.add_case(ir.Constant(I32, k), shared[2])
            b.position_at_end(blk)
        self._known_blk = None  # (stores below bypass write())
        here = self.i
        for i in defs:  # recomputed (remat.py); not counted: they ran before the stop
            self.i, self.ins = i, self.prog.code[i]
            self._body(self.ins, self.ins.parts[0])
        self.i, self.ins = here, self.prog.code[here]
        return k

    def _saved(self, regs) -> list[tuple[int, tuple]]:
        return [(self.slot_of[r], self.regs[r]) for r in self.regs if r in regs]

    def _save(self, live) -> None:
        b = self.b
        for j, (a, _) in live:
            self._tag(b.store(self._conv_bits(b.load(a), I64, False), self._spill_slot(j)), "spill")

    def _restore(self, live) -> None:
        b = self.b
        for j, (a, rt) in live:
            v = self._tag(b.load(self._spill_slot(j)), "spill")
            b.store(b.trunc(v, rt) if rt.width < 64 else v, a)

    def _shared_save(self, group: frozenset[str], first: ir.Block) -> list:
        """A group's save block (returns the resume point of the stop that branched to it: a phi) and restore
        block (continues at the resume point's block: a switch, first's by default)."""
        cur, live = self.b, self._saved(group)
        save, restore = self.f.append_basic_block("save"), self.f.append_basic_block("restore")
        self.b = ir.IRBuilder(save)
        k = self.b.phi(I32)
        self._save(live)
        self._count_out()
        self.b.ret(k)
        self.b = ir.IRBuilder(restore)
        self._restore(live)
        sw = self.b.switch(self.resume, first)
        self.b = cur
        return [save, k, restore, sw]

    def _spill_slot(self, j: int):
        """This thread's slot j."""
        if self.thread_major:
            return self.b.gep(self.spill_row, [ir.Constant(I64, j)])
        return self.slot_addr(self.b, self.spill, self.tpb, j, self.t)

    def slot_addr(self, b: ir.IRBuilder, spill, tpb, j: int, t):
        """The address of slot j of thread t in the spill area (registers saved at stops, then ops_warp's
        collective slots; nspill slots per thread). Tier 1: a thread's slots adjacent (a thread addresses
        them from one row pointer: less code to compile); tier 2: the slots of consecutive threads adjacent
        (the region loops vectorise)."""
        if self.thread_major:
            return b.gep(spill, [b.add(b.mul(t, ir.Constant(I64, self.nspill)), ir.Constant(I64, j))])
        return b.gep(spill, [b.add(b.mul(ir.Constant(I64, j), tpb), t)])

    def slot_strides(self, tpb) -> tuple:
        """(thread stride, slot stride) of the spill area (slot_addr's layout), for code that walks it with
        computed indices (the runtime library's mma_warp and wmma_rec)"""
        return (ir.Constant(I64, self.nspill), ir.Constant(I64, 1)) if self.thread_major else (ir.Constant(I64, 1), tpb)
