"""Warp collectives in the compiling engine (a mixin of codegen.Codegen): shfl, vote, match, redux, activemask,
bar.warp.sync — the "hierarchical collapsing" of CuPBoP/COX, with the interpreter's semantics.

A thread reaching a collective stores its operands in its collective slots (after its saved registers in the
spill area: CA the value, CB the lane/mask word, CG its guard) and stops there like at a barrier (a resume
point). The launch function (`_coll_rounds`) runs every runnable thread of the block to its next stop, then
runs each warp whose live lanes all wait at the same collective: `@combine` computes the results of every lane
of the warp that executes it (CR, CP) from the slots of the lanes there, and those lanes resume, read their
results and go on. As in the interpreter (scheduler.py), a collective runs once every live lane of the warp
arrived; when no thread can run and no warp is complete, the collective with the lowest program counter runs
with the lanes that arrived (its starvation override), and when every live thread waits at a barrier the
barrier releases. `activemask` is a collective here (the lanes at it), as its result is in the interpreter
(the threads of the group running it).

A shuffle whose source lane (inside the block) is not at the shuffle reads a value CUDA leaves undefined (the
interpreter returns that thread's register as it is at that moment): the JIT returns the source lane's
last collective operand and flags the launch (kernel.py logs a warning; the engines may differ there).
"""

from __future__ import annotations

from gpushim.ptx.jit import layout as L
from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import ERR_RET, I1, I8, I32, I64, JitUnsupported
from gpushim.ptx.jit.ops_mma import MmaOps, is_mma, matrix_form, mma_dests, mma_slots
from gpushim.ptx.jit.wmma_track import NREC
from gpushim.ptx.nodes import Imm, Instr, PredPair, Reg

_OPS = ("shfl", "vote", "activemask", "match", "redux", "elect")
NSLOTS = 6  # CA, CB, CG, CR, CP; CW (tier 2's region rounds: the live lanes of each warp, at its first lane)
CA, CB, CG, CR, CP, CW = range(NSLOTS)


def is_collective(ins: Instr) -> bool:
    p = ins.parts
    return p[0] in _OPS or p[0] in ("mma", "wmma") or (p[0] == "bar" and len(p) > 1 and p[1] == "warp")


def coll_form(ins: Instr) -> tuple[str, str]:
    """(kind, mode) of a collective the JIT supports; JitUnsupported for the others."""
    p = ins.parts
    s = set(p[1:])
    op = p[0]
    if op in ("mma", "wmma"):  # ops_mma.py: every mma shares one case (its form is data); a load/store stop its own
        matrix_form(ins)
        return "mma", "mma" if is_mma(ins) else ins.op
    if op == "bar":
        if p[1:] != ["warp", "sync"] or len(ins.args) != 1:
            raise JitUnsupported(ins.op)
        return "syncwarp", ""
    if op == "elect":  # elect.sync d|p, membermask
        if p[1:] != ["sync"] or len(ins.args) != 2:
            raise JitUnsupported(ins.op)
        return "elect", ""
    if op == "activemask":
        if p[1:] != ["b32"] or len(ins.args) != 1:
            raise JitUnsupported(ins.op)
        return "activemask", ""
    if op == "shfl":
        mode = next((m for m in ("up", "down", "bfly", "idx") if m in s), None)
        if mode is None or p[-1] != "b32" or len(ins.args) not in (4, 5):
            raise JitUnsupported(ins.op)
        return "shfl", mode
    if op == "vote":
        mode = next((m for m in ("all", "any", "uni", "ballot") if m in s), None)
        want = "b32" if mode == "ballot" else "pred"
        if mode is None or p[-1] != want or len(ins.args) not in (2, 3) or isinstance(ins.args[0], PredPair):
            raise JitUnsupported(ins.op)
        return "vote", mode
    if op == "match":
        mode = "all" if "all" in s else "any" if "any" in s else None
        if mode is None or p[-1] not in ("b32", "b64") or len(ins.args) != 3:
            raise JitUnsupported(ins.op)
        if mode == "any" and isinstance(ins.args[0], PredPair):
            raise JitUnsupported(ins.op)
        return "match", mode
    if op == "redux":
        mode = next((m for m in ("add", "min", "max", "and", "or", "xor") if m in s), None)
        if mode is None or p[-1] not in ("u32", "s32", "b32") or len(ins.args) not in (2, 3):
            raise JitUnsupported(ins.op)
        return "redux", mode
    raise JitUnsupported(ins.op)


def _redux_init(mode: str, signed: bool) -> int:
    """The identity of a reduction (its fold's initial value)."""
    lo, hi = (0x80000000, 0x7FFFFFFF) if signed else (0, 0xFFFFFFFF)
    return {"add": 0, "and": 0xFFFFFFFF, "or": 0, "xor": 0, "min": hi, "max": lo}[mode]


def is_bar_red(ins: Instr) -> bool:
    return ins.parts[0] in ("bar", "barrier") and "red" in ins.parts


def red_form(ins: Instr) -> str:
    """bar.red.{popc,and,or} d, 0, {!}c (barrier 0, every thread of the block): the reduction; else unsupported"""
    p = ins.parts
    op = next((x for x in p if x in ("popc", "and", "or")), None)
    extra = set(p[1:]) - {"red", "popc", "and", "or", "u32", "pred", "aligned", "cta", "sync"}
    if op is None or extra or ins.guard is not None or len(ins.args) != 3:
        raise JitUnsupported(f"{ins.op} (with a thread count, a guard or another form)")
    bid = ins.args[1]
    if not (isinstance(bid, Imm) and int(bid.value) == 0):
        raise JitUnsupported(f"{ins.op} with a barrier id")
    return op


def coll_dests(ins: Instr) -> set[str]:
    if ins.parts[0] in ("mma", "wmma"):
        return mma_dests(ins)
    d = ins.args[0] if ins.args and ins.parts[0] != "bar" else None
    if isinstance(d, Reg):
        return {d.name}
    if isinstance(d, PredPair):
        return {r.name for r in (d.first, d.second) if r is not None}
    return set()


class _Fold:
    """i64 arithmetic folded where the operands are constants (the IR builder emits every instruction)."""

    _PY = {"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y,
           "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "lshr": lambda x, y: x >> y}  # fmt: skip

    def __init__(self, b: ir.IRBuilder) -> None:
        self.b = b

    def zext(self, v):
        if isinstance(v, ir.Constant):
            return ir.Constant(I64, v.constant & ((1 << v.type.width) - 1))
        return self.b.zext(v, I64) if v.type.width < 64 else v

    def op(self, name: str, x, y):
        if isinstance(x, ir.Constant) and isinstance(y, ir.Constant):
            m = (1 << 64) - 1
            return ir.Constant(I64, self._PY[name](x.constant & m, y.constant & m) & m)
        zero = [isinstance(v, ir.Constant) and v.constant == 0 for v in (x, y)]
        if name in ("or", "xor", "add") and any(zero):  # the identities that occur (a zero segment mask, ...)
            return y if zero[0] else x
        if name == "and" and any(zero):
            return ir.Constant(I64, 0)
        if name in ("sub", "lshr") and zero[1]:
            return x
        return {"and": self.b.and_, "or": self.b.or_, "xor": self.b.xor, "add": self.b.add, "sub": self.b.sub,
                "lshr": self.b.lshr}[name](x, y)  # fmt: skip


class WarpOps(MmaOps):
    # -- the thread's side ----------------------------------------------------------------------------------
    def _coll_setup(self) -> None:
        """After the spill slots of the registers: the collective slots (only in kernels with collectives).
        A collective's unguarded destinations are not saved across it (it writes them)."""
        code = self.prog.code
        self.coll_idx = [i for i in self.bar_idx if is_collective(code[i]) or is_bar_red(code[i])]
        self.coll_at: dict[int, int] = {}  # resume point -> instruction index
        self.red_at: dict[int, int] = {}  # bar.red's resume points -> instruction index
        if not self.coll_idx:
            return
        for i in self.coll_idx:
            if is_bar_red(code[i]):
                red_form(code[i])
                continue
            coll_form(code[i])
            if code[i].guard is None:
                defs, spilled = self.bar_plan[i]
                self.bar_plan[i] = (defs, spilled - coll_dests(code[i]))
        across = set().union(*(sp for _, sp in self.bar_plan.values()))
        self.slot_of = {r: j for j, r in enumerate(r for r in self.regs if r in across)}
        self.cbase = len(self.slot_of)
        # mma.sync's operands and results: slots after ops_warp's (ops_mma.py)
        extra = max((mma_slots(code[i]) for i in self.coll_idx if code[i].parts[0] in ("mma", "wmma")), default=0)
        self.rec0 = NSLOTS + extra  # then the records of wmma.load/store run in place (wmma_track.py)
        self.nspill = self.cbase + self.rec0 + (NREC if self.wmma_inline else 0)

    def _cslot(self, j: int):
        return self._spill_slot(self.cbase + j)

    def _bar_red(self, ins: Instr) -> None:
        """bar.red: a barrier whose threads get the reduction of their predicates over the block's threads
        waiting at it when it releases (barriers.py: the reduction runs at the release, over those threads)"""
        op = red_form(ins)
        b = self.b
        d = ins.args[0]
        if self.mode == "check":  # other threads' values: tainted (taint.py), any value does
            zero = ir.Constant(I32, 0) if op == "popc" else ir.Constant(I1, 0)
            self.write(d, zero, "u32" if op == "popc" else "pred")
            return
        self._tag(b.store(b.zext(self.read(ins.args[2], "pred"), I64), self._cslot(CA)), "coll_in")
        self.red_at[self._stop()] = self.i
        r = self._tag(b.load(self._cslot(CR)), "coll_out")
        if op == "popc":
            self.write(d, b.trunc(r, I32), "u32")
        else:
            self.write(d, b.icmp_unsigned("!=", r, ir.Constant(I64, 0)), "pred")

    def _red_release(self, b, state, spill, tpb) -> None:
        """Before barriers release: each bar.red's result for the threads waiting at it (popc of their
        predicates, all of them, any of them)"""
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        for k, i in sorted(self.red_at.items()):
            op = red_form(self.prog.code[i])

            def slot(j, t):
                return self.slot_addr(b, spill, tpb, self.cbase + j, t)

            here = b.block
            b.position_at_start(b.function.entry_basic_block)
            yes_a, all_a = b.alloca(I64), b.alloca(I64)
            b.position_at_end(here)
            b.store(c64(0), yes_a)
            b.store(c64(0), all_a)
            want = ir.Constant(I32, -k - 1)

            def count(t, want=want, yes_a=yes_a, all_a=all_a):
                at = b.icmp_signed("==", self._tag(b.load(b.gep(state, [t])), "state"), want)
                p = self._tag(b.load(slot(CA, t)), "coll_in")
                b.store(b.add(b.load(yes_a), b.select(at, p, c64(0))), yes_a)
                b.store(b.add(b.load(all_a), b.zext(at, I64)), all_a)

            self._for(b, tpb, count)
            yes, tot = b.load(yes_a), b.load(all_a)
            if op == "popc":
                r = yes
            elif op == "and":
                r = b.zext(b.icmp_unsigned("==", yes, tot), I64)
            else:
                r = b.zext(b.icmp_unsigned("!=", yes, c64(0)), I64)

            def put(t, want=want, r=r):
                at = b.icmp_signed("==", self._tag(b.load(b.gep(state, [t])), "state"), want)
                self._if(b, at, lambda: self._tag(b.store(r, slot(CR, t)), "coll_out"))

            self._for(b, tpb, put)

    def _collective(self, ins: Instr) -> None:
        kind, mode = coll_form(ins)
        b = self.b
        if self.mode == "check":  # no other threads: any value (taint.py keeps addresses and branches off them)
            if kind == "mma":
                self._mma_check(ins)
            elif kind != "syncwarp":
                self._coll_write(ins, kind, mode, ir.Constant(I64, 0), ir.Constant(I1, 0), check=True)
            return
        if ins.guard is None:
            g = ir.Constant(I1, 1)
        else:
            g = self.read(Reg(ins.guard[0]), "pred")
            if ins.guard[1]:
                g = b.not_(g)
        ca = cb = ir.Constant(I64, 0)
        if kind == "shfl":
            ca, cb = self._shfl_src(ins, mode)
        elif kind == "vote":
            ca = b.zext(self.read(ins.args[1], "pred"), I64)
            cb = self._mask_word(ins, 2)
        elif kind == "elect":
            cb = self._mask_word(ins, 1)
        elif kind in ("match", "redux"):
            typ = ins.parts[-1]
            ca = b.zext(self.read(ins.args[1], typ), I64) if typ != "b64" else self.read(ins.args[1], typ)
            cb = self._mask_word(ins, 2)
        stores = self._mma_in(ins, NSLOTS) if kind == "mma" else []
        stores += [(CA, ca)] if kind in ("shfl", "vote", "match", "redux") else []
        stores += [(CB, cb)] if kind in ("shfl", "vote", "match", "redux", "elect") else []
        stores += [(CG, b.zext(g, I64))] if ins.guard is not None else []  # (unguarded: @combine knows)
        for j, v in stores:
            self._tag(b.store(v, self._cslot(j)), "coll_in")
        # stop like at a barrier: save the live registers, return the resume point
        self.coll_at[self._stop()] = self.i
        if kind == "syncwarp":
            return
        if kind == "mma":
            went = None if ins.guard is None else b.icmp_unsigned("!=", self._tag(b.load(self._cslot(CG)),
                                                                                  "coll_in"), ir.Constant(I64, 0))
            self._mma_out(ins, NSLOTS, self._tag(b.load(self._cslot(CP)), "coll_out"), went)
            return
        # the results, for a lane that executed it (its guard held)
        r = self._tag(b.load(self._cslot(CR)), "coll_out")
        p = b.trunc(self._tag(b.load(self._cslot(CP)), "coll_out"), I1)
        if ins.guard is None:
            self._coll_write(ins, kind, mode, r, p)
            return
        went = b.icmp_unsigned("!=", self._tag(b.load(self._cslot(CG)), "coll_in"), ir.Constant(I64, 0))
        self._when(went, lambda: self._coll_write(ins, kind, mode, r, p))

    def _lanemask(self, name: str):
        """%lanemask_eq/lt/le/gt/ge (state.py)."""
        b = self.b
        lane = b.urem(self.t, ir.Constant(I64, 32))
        one = b.shl(ir.Constant(I64, 1), lane)
        m = {"eq": one, "lt": b.sub(one, ir.Constant(I64, 1)), "le": b.sub(b.shl(one, ir.Constant(I64, 1)),
             ir.Constant(I64, 1))}  # fmt: skip
        kind = name[len("%lanemask_") :]
        if kind in ("gt", "ge"):
            return b.not_(b.trunc(m["le" if kind == "gt" else "lt"], I32))
        if kind not in m:
            raise JitUnsupported(f"special register {name}")
        return b.trunc(m[kind], I32)

    def _mask_word(self, ins: Instr, pos: int):
        """The member mask (the key that groups lanes: labeled partitions), 0 when the form has none."""
        if len(ins.args) > pos:
            return self.b.zext(self.read(ins.args[pos], "u32"), I64)
        return ir.Constant(I64, 0)

    def _shfl_src(self, ins: Instr, mode: str):
        """(the value, the source lane j | the predicate << 32), as compile_shfl computes them (folded where
        the operands are constants, as the clamp and segment mask usually are: less code to compile)."""
        b = self.b
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        k = _Fold(b)
        lane = b.urem(self.t, c64(32))
        a = k.zext(self.read(ins.args[1], "b32"))
        bb = k.op("and", k.zext(self.read(ins.args[2], "u32")), c64(31))
        c = k.zext(self.read(ins.args[3], "u32"))
        seg = k.op("and", k.op("lshr", c, c64(8)), c64(0x1F))
        nseg = k.op("xor", seg, c64(-1))
        minl = k.op("and", lane, seg)
        maxl = k.op("or", minl, k.op("and", k.op("and", c, c64(0x1F)), nseg))
        if mode == "up":
            j = k.op("sub", lane, bb)
            pv = b.icmp_signed(">=", j, maxl)
        else:
            j = {"down": lambda: k.op("add", lane, bb), "bfly": lambda: k.op("xor", lane, bb),
                 "idx": lambda: k.op("or", minl, k.op("and", bb, nseg))}[mode]()  # fmt: skip
            pv = b.icmp_signed("<=", j, maxl)
        j = b.select(pv, j, lane)
        return a, b.or_(j, b.shl(b.zext(pv, I64), c64(32)))

    def _coll_write(self, ins: Instr, kind: str, mode: str, r, p, check: bool = False, dest=None) -> None:
        """Write a collective's results (r: i64 value, p: i1 predicate) to its destinations (or to dest)."""
        b = self.b
        if check and ins.guard is not None:
            self._when(self._guard(ins), lambda: self._coll_write(ins, kind, mode, r, p, dest=dest))
            return
        d = ins.args[0] if dest is None else dest
        if kind == "vote" and mode != "ballot":
            self.write(d, b.icmp_unsigned("!=", r, ir.Constant(I64, 0)), "pred")
            return
        typ = ins.parts[-1] if kind in ("match", "redux") else "b32"
        if kind == "match" and mode == "any":
            typ = "b32"
        if kind == "match":
            typ = "b32"  # the lane mask
        val = b.trunc(r, I32)
        if isinstance(d, PredPair):
            if d.first is not None:
                self.write(d.first, val, typ)
            if d.second is not None:
                self.write(d.second, p, "pred")
        else:
            self.write(d, val, typ)

    # -- the launch's side ----------------------------------------------------------------------------------
    def _for(self, b: ir.IRBuilder, n, body) -> None:
        """for i in [0, n) (i64): body(i); the builder ends after the loop."""
        f = b.function
        pre = b.block
        head, blk, done = (f.append_basic_block(x) for x in ("for", "for_body", "for_done"))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64)
        i.add_incoming(ir.Constant(I64, 0), pre)
        b.cbranch(b.icmp_signed("<", i, n), blk, done)
        b.position_at_end(blk)
        body(i)
        i.add_incoming(b.add(i, ir.Constant(I64, 1)), b.block)
        b.branch(head)
        b.position_at_end(done)

    def _if(self, b: ir.IRBuilder, cond, body) -> None:
        f = b.function
        yes, join = f.append_basic_block("if"), f.append_basic_block("fi")
        b.cbranch(cond, yes, join)
        b.position_at_end(yes)
        body()
        b.branch(join)
        b.position_at_end(join)

    def _combine_fn(self) -> ir.Function:
        """@combine(ctx, spill, tpb, t0, k, part): the results of collective k for the lanes of the warp at t0
        that execute it (part: the lanes there; those whose guard held execute it), as ops_warp.py (the
        interpreter's) computes them. Loops without branches (LLVM vectorises them): results are computed for
        every lane of the warp; lanes that do not execute it never read them (a lane waiting at another
        collective gets its results when that one runs)."""
        fty = ir.FunctionType(ir.VoidType(), [I64.as_pointer(), I64.as_pointer(), I64, I64, I32, I32])
        f = ir.Function(self.m, fty, name=f"combine_{len(self.m.functions)}")
        f.linkage = "internal"
        ctx, spill, tpb, t0, k, part = f.args
        b = ir.IRBuilder(f.append_basic_block("e"))
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        part64 = b.zext(part, I64)
        nl = b.sub(tpb, t0)
        nl = b.select(b.icmp_signed("<", nl, c64(32)), nl, c64(32))

        def slot(j, lane):
            return self.slot_addr(b, spill, tpb, self.cbase + j, b.add(t0, lane))

        def ld(j, lane):
            return self._tag(b.load(slot(j, lane)), "coll_in")

        def st(j, lane, v):
            self._tag(b.store(v, slot(j, lane)), "coll_out")

        def bit(mask, lane):
            return b.and_(b.lshr(mask, lane), c64(1))

        acc = b.alloca(I64, name="acc")
        acc2 = b.alloca(I64, name="acc2")

        def fold(init, step):
            """acc = init; for every lane m of the warp: acc = step(acc, m); the result"""
            b.store(init, acc)
            self._for(b, nl, lambda m: b.store(step(b.load(acc), m), acc))
            return b.load(acc)

        cur: dict = {}  # per collective: "act", the lanes that execute it (there, with their guard)

        def set_act(guarded: bool) -> None:
            if not guarded:  # (its lanes stored no guard)
                cur["act"] = part64
                return
            cur["act"] = fold(c64(0), lambda a, m: b.or_(a, b.shl(b.and_(bit(part64, m), b.zext(
                b.icmp_unsigned("!=", ld(CG, m), c64(0)), I64)), m)))  # fmt: skip

        def uniform():
            """whether they all name the same member mask (then one group: each result once)"""
            act = cur["act"]
            low = b.call(self._cttz(), [act, ir.Constant(I1, 0)])
            first = b.select(b.icmp_unsigned("==", act, c64(0)), c64(0), low)
            key0 = ld(CB, first)
            return b.icmp_unsigned("==", fold(c64(0), lambda a, m: b.or_(a, b.and_(bit(act, m), b.zext(
                b.icmp_unsigned("!=", ld(CB, m), key0), I64)))), c64(0))  # fmt: skip

        ret = f.append_basic_block("ret")
        sw = b.switch(k, ret)

        def each(body):
            self._for(b, nl, body)

        def grouped(fast, slow):
            """fast() when every lane executing it names the same mask, else slow() (per-lane groups)"""
            yes, no, join = (f.append_basic_block(x) for x in ("uni", "groups", "join"))
            b.cbranch(uniform(), yes, no)
            b.position_at_end(yes)
            fast()
            b.branch(join)
            b.position_at_end(no)
            slow()
            b.branch(join)
            b.position_at_end(join)

        def members(lane, step, init):
            """(fold of step over the lanes executing it with lane's member mask, those lanes)"""
            key = ld(CB, lane)
            b.store(c64(0), acc2)

            def inner(a, m):
                inm = b.and_(b.trunc(bit(cur["act"], m), I1), b.icmp_unsigned("==", ld(CB, m), key))
                b.store(b.or_(b.load(acc2), b.shl(b.zext(inm, I64), m)), acc2)
                return b.select(inm, step(a, m), a)

            r = fold(init, inner)
            return r, b.load(acc2)

        def only_act(step):
            return lambda a, m: b.select(b.trunc(bit(cur["act"], m), I1), step(a, m), a)

        def case(kk: int, i: int, variants: list | None = None) -> tuple:
            """The case of collective kk (instruction i); with variants (votes or reductions of several modes:
            (mode, signed) each), the case of them all, the variant's index and the reduction's initial value
            coming in as phis. (A function: the closures below bind its variables.)"""
            ins = self.prog.code[i]
            kind, mode = coll_form(ins)
            cb = f.append_basic_block(f"k{kk}")
            b.position_at_end(cb)
            phis = [b.phi(I32), b.phi(I64)] if variants else []
            set_act(ins.guard is not None)

            def pick(emit, signed=False):
                """emit(mode, signed) for this collective's mode, or selected by the variant's index"""
                if not variants:
                    return emit(mode, signed)
                r = emit(*variants[0])
                for n, v in enumerate(variants[1:], 1):
                    r = b.select(b.icmp_unsigned("==", phis[0], ir.Constant(I32, n)), emit(*v), r)
                return r

            if kind == "activemask":
                each(lambda lane: st(CR, lane, cur["act"]))
            elif kind == "shfl":
                undef = b.alloca(I64)
                b.store(c64(0), undef)

                def shfl(lane):
                    w = ld(CB, lane)
                    j = b.and_(w, c64(31))
                    pv = b.and_(b.lshr(w, c64(32)), c64(1))
                    ok = b.icmp_signed("<", b.add(t0, j), tpb)
                    st(CR, lane, ld(CA, b.select(ok, j, lane)))
                    st(CP, lane, b.and_(pv, b.zext(ok, I64)))
                    u = b.and_(b.and_(bit(cur["act"], lane), b.zext(ok, I64)), b.xor(bit(part64, j), c64(1)))
                    b.store(b.or_(b.load(undef), u), undef)

                each(shfl)
                self._if(b, b.icmp_unsigned("!=", b.load(undef), c64(0)),
                         lambda: b.store(c64(1), b.gep(ctx, [ir.Constant(I32, L.UNDEF)])))  # fmt: skip
            elif kind == "vote":

                def ballot(a, m):
                    return b.or_(a, b.shl(b.and_(ld(CA, m), c64(1)), m))

                def result(yes, mem):
                    def one(mode, _signed):
                        if mode == "ballot":
                            return yes
                        if mode == "all":
                            return b.zext(b.icmp_unsigned("==", yes, mem), I64)
                        if mode == "any":
                            return b.zext(b.icmp_unsigned("!=", yes, c64(0)), I64)
                        return b.zext(b.or_(b.icmp_unsigned("==", yes, c64(0)), b.icmp_unsigned("==", yes, mem)),
                                      I64)  # fmt: skip

                    return pick(one)

                def fast():
                    r = result(fold(c64(0), only_act(ballot)), cur["act"])
                    each(lambda lane: st(CR, lane, r))

                def slow():
                    each(lambda lane: st(CR, lane, result(*members(lane, ballot, c64(0)))))

                grouped(fast, slow)
            elif kind == "redux":

                def red(a, m):
                    x, y = b.trunc(a, I32), b.trunc(ld(CA, m), I32)

                    def one(mode, signed):
                        if mode == "add":
                            return b.add(x, y)
                        if mode in ("and", "or", "xor"):
                            return {"and": b.and_, "or": b.or_, "xor": b.xor}[mode](x, y)
                        cmp = b.icmp_signed if signed else b.icmp_unsigned
                        return b.select(cmp("<" if mode == "min" else ">", y, x), y, x)

                    return b.zext(pick(one), I64)

                init = phis[1] if variants else c64(_redux_init(mode, ins.parts[-1] == "s32"))

                def fast():
                    r = fold(init, only_act(red))
                    each(lambda lane: st(CR, lane, r))

                grouped(fast, lambda: each(lambda lane: st(CR, lane, members(lane, red, init)[0])))
            elif kind == "elect":  # the lowest lane of each member-mask group leads

                def lowest(a, m):
                    return b.select(b.icmp_unsigned("<", m, a), m, a)

                def elect(lane):
                    leader = members(lane, lowest, c64(32))[0]
                    st(CR, lane, leader)
                    st(CP, lane, b.zext(b.icmp_unsigned("==", leader, lane), I64))

                each(elect)
            elif kind == "match" and mode == "any":

                def match_any(lane):
                    v = ld(CA, lane)
                    hits = fold(c64(0), lambda a, m: b.or_(a, b.shl(b.and_(bit(cur["act"], m), b.zext(
                        b.icmp_unsigned("==", ld(CA, m), v), I64)), m)))  # fmt: skip
                    st(CR, lane, b.and_(hits, ld(CB, lane)))

                each(match_any)
            elif kind == "mma":
                self._mma_case(b, ins, (ld, st, each, cur["act"], nl, t0, NSLOTS, CP))
            elif kind == "match":

                def match_all(lane):
                    v = ld(CA, lane)
                    diff, mem = members(lane, lambda a, m: b.or_(
                        a, b.zext(b.icmp_unsigned("!=", ld(CA, m), v), I64)), c64(0))  # fmt: skip
                    same = b.icmp_unsigned("==", diff, c64(0))
                    st(CR, lane, b.select(same, mem, c64(0)))
                    st(CP, lane, b.zext(same, I64))

                each(match_all)
            b.branch(ret)
            return cb, phis

        # one case per form: the collectives of one kind, mode, guardedness (and redux type) share it; votes
        # and reductions of several modes share one (the mode chosen by selects)
        variants: dict[tuple, list] = {}
        for i in self.coll_at.values():
            kind, mode = coll_form(self.prog.code[i])
            v = variants.setdefault((kind, self.prog.code[i].guard is not None), [])
            if (mode, self.prog.code[i].parts[-1] == "s32") not in v:
                v.append((mode, self.prog.code[i].parts[-1] == "s32"))
        shared: dict[tuple, tuple] = {}
        for kk, i in sorted(self.coll_at.items()):
            ins = self.prog.code[i]
            kind, mode = coll_form(ins)
            v = variants[kind, ins.guard is not None]
            signed = ins.parts[-1] == "s32"
            if kind in ("vote", "redux") and len(v) > 1:
                form = (kind, "", ins.guard is not None, False)
                if form not in shared:
                    shared[form] = case(kk, i, v)
                cb, (mid, init) = shared[form]
                tb = f.append_basic_block(f"k{kk}")  # the variant's index and initial value, on to the case
                b.position_at_end(tb)
                b.branch(cb)
                mid.add_incoming(ir.Constant(I32, v.index((mode, signed))), tb)
                init.add_incoming(c64(_redux_init(mode, signed) if kind == "redux" else 0), tb)
                sw.add_case(ir.Constant(I32, kk), tb)
                continue
            form = (kind, mode, ins.guard is not None, signed if kind == "redux" else False)
            if form not in shared:
                shared[form] = case(kk, i)
            sw.add_case(ir.Constant(I32, kk), shared[form][0])
        b.position_at_end(ret)
        b.ret_void()
        return f

    def _cttz(self) -> ir.Function:
        name = "llvm.cttz.i64"
        try:
            return self.m.get_global(name)
        except KeyError:
            return ir.Function(self.m, ir.FunctionType(I64, [I64, I1]), name=name)

    def _coll_rounds(self, f, b, ctx, thread, ids, bufs, state, blocks, regions: int = 0) -> None:
        """One block's threads with barriers and warp collectives (the module docstring): rounds of running
        every runnable thread to its next stop, then the complete warps' collectives; when none is complete,
        the lowest collective with the lanes that arrived, or, with every live thread at a barrier, its
        release. state[t]: >= 0 runnable from that resume point, -1 exited, -k-1 waiting at resume point k."""
        cx, cy, cz, bi = ids
        cache, cnt, kc, kp = bufs
        blk_next, stop, failed = blocks
        c32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        combine = self._combine_fn()
        nk = len(self.barriers) + 1
        tab = ir.GlobalVariable(self.m, ir.ArrayType(I8, nk), name=f"iscoll_{len(self.m.functions)}")
        tab.global_constant = True
        tab.linkage = "internal"
        tab.initializer = ir.Constant(ir.ArrayType(I8, nk), [int(k in self.coll_at) for k in range(nk)])

        def iscoll(k):
            return b.icmp_unsigned("!=", b.load(b.gep(tab, [c32(0), k])), ir.Constant(I8, 0))

        bx, by, bz = (self._slot(b, ctx, L.BLOCK + i) for i in range(3))
        tpb = b.mul(b.mul(bx, by), bz)
        nw = b.udiv(b.add(tpb, c64(31)), c64(32))
        spill = b.inttoptr(self._slot(b, ctx, L.SPILL), I64.as_pointer())
        blk_after, blk_next = blk_next, self._wrec_begin(f, b, spill, tpb, blk_next)  # (wmma_track.py)
        here = b.block
        b.position_at_start(f.entry_basic_block)  # (allocas in the entry block: once per launch, promoted)
        prog_a, kmin_a, nlive_a = b.alloca(I32), b.alloca(I32), b.alloca(I32)
        mn_a, mx_a, part_a = b.alloca(I32), b.alloca(I32), b.alloca(I32)
        tid_a = [b.alloca(I64) for _ in range(3)]  # the round's thread index as (tx, ty, tz)
        b.position_at_end(here)
        rnd = f.append_basic_block("coll_round")
        if regions:
            self._coll_regions(f, b, ctx, thread, ids, bufs, state, (rnd, blk_next, stop, failed), regions,
                               (combine, iscoll, tpb, nw, spill, mn_a, mx_a))  # fmt: skip
        else:
            b.branch(rnd)
        b.position_at_end(rnd)
        self._poll_round(b, ctx, bi, stop)

        def run(t):  # every runnable thread to its next stop
            sp = b.gep(state, [t])
            s = self._tag(b.load(sp), "state")
            tx, ty, tz = (b.load(a) for a in tid_a)

            def go():
                r = self._resume(f, b, ctx, thread, t, s, ids, bufs, (bx, by), failed, "coll_ok", (tx, ty, tz))
                st = b.select(b.icmp_signed("==", r, c32(0)), c32(-1), b.sub(c32(-1), r))
                self._tag(b.store(st, sp), "state")

            self._if(b, b.icmp_signed(">=", s, c32(0)), go)
            # the next thread's index, counted on (three 64-bit divisions per thread and round were a third
            # of cubBlockOps' run time on tier 1's cheap code)
            tx1 = b.add(tx, c64(1))
            wx = b.icmp_unsigned("==", tx1, bx)
            ty1 = b.add(ty, b.zext(wx, I64))
            wy = b.icmp_unsigned("==", ty1, by)
            b.store(b.select(wx, c64(0), tx1), tid_a[0])
            b.store(b.select(wy, c64(0), ty1), tid_a[1])
            b.store(b.add(tz, b.zext(wy, I64)), tid_a[2])

        for a in tid_a:
            b.store(c64(0), a)
        self._for(b, tpb, run)
        b.store(c32(0), prog_a)
        b.store(c32(2**31 - 1), kmin_a)
        b.store(c32(0), nlive_a)

        def lanes(w, body):
            t0 = b.mul(w, c64(32))
            n = b.sub(tpb, t0)
            n = b.select(b.icmp_signed("<", n, c64(32)), n, c64(32))
            self._for(b, n, lambda lane: body(t0, lane, b.add(t0, lane)))
            return t0

        def at(k):
            """the lanes of the warp waiting at k into part_a, them runnable from k"""

            def body(t0, lane, t):
                sp = b.gep(state, [t])

                def take():
                    b.store(b.or_(b.load(part_a), b.shl(c32(1), b.trunc(lane, I32))), part_a)
                    self._tag(b.store(k, sp), "state")

                self._if(b, b.icmp_signed("==", self._tag(b.load(sp), "state"), b.sub(c32(-1), k)), take)

            return body

        def resolve(w):  # a warp whose live lanes all wait at one collective runs it
            b.store(c32(2**31 - 1), mn_a)
            b.store(c32(-1), mx_a)

            def scan(t0, lane, t):
                s = self._tag(b.load(b.gep(state, [t])), "state")

                def live():
                    k = b.sub(c32(-1), s)
                    b.store(b.add(b.load(nlive_a), c32(1)), nlive_a)
                    mn, mx = b.load(mn_a), b.load(mx_a)
                    b.store(b.select(b.icmp_signed("<", k, mn), k, mn), mn_a)
                    b.store(b.select(b.icmp_signed(">", k, mx), k, mx), mx_a)
                    km = b.load(kmin_a)
                    b.store(b.select(b.and_(iscoll(k), b.icmp_signed("<", k, km)), k, km), kmin_a)

                self._if(b, b.icmp_signed("!=", s, c32(-1)), live)

            lanes(w, scan)
            mn, mx = b.load(mn_a), b.load(mx_a)
            one = b.and_(b.icmp_signed(">=", mx, c32(0)), b.icmp_signed("==", mn, mx))

            def complete():
                def fire():
                    b.store(c32(0), part_a)
                    t0 = lanes(w, at(mn))
                    b.call(combine, [ctx, spill, tpb, t0, mn, b.load(part_a)])
                    b.store(c32(1), prog_a)

                self._if(b, iscoll(mn), fire)

            self._if(b, one, complete)

        self._for(b, nw, resolve)
        again = f.append_basic_block("coll_again")
        idle = f.append_basic_block("coll_idle")
        b.cbranch(b.icmp_signed("!=", b.load(prog_a), c32(0)), again, idle)
        b.position_at_end(again)
        b.branch(rnd)
        b.position_at_end(idle)
        some = f.append_basic_block("coll_some")
        b.cbranch(b.icmp_signed("==", b.load(nlive_a), c32(0)), blk_next, some)
        b.position_at_end(some)
        kmin = b.load(kmin_a)
        release = f.append_basic_block("coll_release")
        force = f.append_basic_block("coll_force")
        b.cbranch(b.icmp_signed("==", kmin, c32(2**31 - 1)), release, force)
        b.position_at_end(release)  # every live thread waits at a barrier: it releases

        def rel(t):
            sp = b.gep(state, [t])
            s = self._tag(b.load(sp), "state")
            self._if(b, b.icmp_signed("<=", s, c32(-2)), lambda: self._tag(b.store(b.sub(c32(-1), s), sp), "state"))

        self._red_release(b, state, spill, tpb)
        self._for(b, tpb, rel)
        b.branch(rnd)
        b.position_at_end(force)  # the lowest collective runs with the lanes that arrived

        def forced(w):
            b.store(c32(0), part_a)
            t0 = lanes(w, at(kmin))
            self._if(
                b,
                b.icmp_unsigned("!=", b.load(part_a), c32(0)),
                lambda: b.call(combine, [ctx, spill, tpb, t0, kmin, b.load(part_a)]),
            )

        self._for(b, nw, forced)
        b.branch(rnd)
        self._wrec_end(b, ctx, spill, tpb, nw, bi, failed, blk_next, blk_after)
        b.position_at_end(blk_after)

    def _coll_regions(self, f, b, ctx, thread, ids, bufs, state, blocks, nres: int, env) -> None:
        """Tier 2: while every live thread of the block stops at the same point k (a barrier, or a collective
        that then runs for every warp with its live lanes), the next round runs the threads with k a constant
        (after inlining, that region's code alone), as launchgen's region rounds: while no thread exited, a
        loop over all threads (which LLVM vectorises); after some exited, a loop over the warps with live lanes
        (their lanes in CW: the block tails where one warp goes on). Otherwise the general rounds take over."""
        cx, cy, cz, bi = ids
        cache, cnt, kc, kp = bufs
        rnd, blk_next, stop, failed = blocks
        combine, iscoll, tpb, nw, spill, mn_a, mx_a = env
        c32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        here = b.block
        b.position_at_start(f.entry_basic_block)
        ex_a, m_a = b.alloca(I1), b.alloca(I32)
        b.position_at_end(here)
        bx, by = self._slot(b, ctx, L.BLOCK), self._slot(b, ctx, L.BLOCK + 1)

        def cw(w):  # the live lanes of warp w (i32 in the i64 slot)
            p = self.slot_addr(b, spill, tpb, self.cbase + CW, b.mul(w, c64(32)))
            return b.bitcast(p, I32.as_pointer())

        def nlanes(w):
            n = b.sub(tpb, b.mul(w, c64(32)))
            return b.select(b.icmp_signed("<", n, c64(32)), n, c64(32))

        def track(st):  # mn: min of the new states (-1 only if all exited); mx: max of those still running
            mn, mx = b.load(mn_a), b.load(mx_a)
            b.store(b.select(b.icmp_signed("<", st, mn), st, mn), mn_a)
            w = b.select(b.icmp_signed("==", st, c32(-1)), c32(-(2**31)), st)
            b.store(b.select(b.icmp_signed(">", w, mx), w, mx), mx_a)
            b.store(b.or_(b.load(ex_a), b.icmp_signed("==", st, c32(-1))), ex_a)

        def run(t, j, tx, ty, tz):
            kj = c32(j) if isinstance(j, int) else j
            r = b.call(thread, [ctx, t, kj, cx, cy, cz, bi, tx, ty, tz, cache, cnt, kc, kp])
            st = b.select(b.icmp_signed("==", r, c32(0)), c32(-1), b.sub(c32(-1), r))
            self._tag(b.store(st, b.gep(state, [t])), "state")
            track(st)
            return r, st

        pre = b.block
        head = f.append_basic_block("cregion_round")
        b.branch(head)
        b.position_at_end(head)
        k = b.phi(I32)
        k.add_incoming(c32(0), pre)
        partial = b.phi(I1)
        partial.add_incoming(ir.Constant(I1, 0), pre)
        self._poll_round(b, ctx, bi, stop)
        b.store(c32(2**31 - 1), mn_a)
        b.store(c32(-(2**31)), mx_a)
        b.store(ir.Constant(I1, 0), ex_a)
        hf, hp = f.append_basic_block("cregion_all"), f.append_basic_block("cregion_live")
        b.cbranch(partial, hp, hf)
        join = f.append_basic_block("cregion_done")
        # every thread (none exited yet)
        b.position_at_end(hf)
        sw = b.switch(k, rnd)
        for j in range(nres):
            rb = f.append_basic_block(f"cregion{j}")
            sw.add_case(c32(j), rb)
            b.position_at_end(rb)
            self._thread_nest(f, b, ctx, lambda t, tx, ty, tz, j=j: run(t, j, tx, ty, tz)[0], failed)
            b.branch(join)
        # the live lanes of the warps with some (one loop for every k: tails are short, specialising them per
        # resume point would double tier 2's compile time)
        b.position_at_end(hp)

        def warp(w):
            m = self._tag(b.load(cw(w)), "state")

            def lanes():
                b.store(m, m_a)

                def lane(ln):
                    def go():
                        t = b.add(b.mul(w, c64(32)), ln)
                        tx, ty, tz = b.urem(t, bx), b.urem(b.udiv(t, bx), by), b.udiv(t, b.mul(bx, by))
                        r, st = run(t, k, tx, ty, tz)
                        ok = f.append_basic_block("clive_ok")
                        b.cbranch(b.icmp_signed("==", r, c32(ERR_RET)), failed, ok)
                        b.position_at_end(ok)
                        gone = b.shl(b.zext(b.icmp_signed("==", st, c32(-1)), I32), b.trunc(ln, I32))
                        b.store(b.and_(b.load(m_a), b.not_(gone)), m_a)

                    self._if(b, b.trunc(b.lshr(m, b.trunc(ln, I32)), I1), go)

                self._for(b, nlanes(w), lane)
                self._tag(b.store(b.load(m_a), cw(w)), "state")

            self._if(b, b.icmp_unsigned("!=", m, c32(0)), lanes)

        self._for(b, nw, warp)
        b.branch(join)
        b.position_at_end(join)
        mn, mx, ex = b.load(mn_a), b.load(mx_a), b.load(ex_a)
        more = f.append_basic_block("cregion_more")
        # all exited: mn is -1 (or untouched: no thread ran)
        b.cbranch(b.or_(b.icmp_signed("==", mn, c32(-1)), b.icmp_signed("==", mn, c32(2**31 - 1))), blk_next, more)
        b.position_at_end(more)
        same = f.append_basic_block("cregion_same")
        b.cbranch(b.icmp_signed("==", mn, mx), same, rnd)
        b.position_at_end(same)  # every live thread at resume point kk
        kk = b.sub(c32(-1), mn)
        now_partial = b.or_(partial, ex)

        def masks():  # the first exits: the live lanes of each warp from the states
            def warp(w):
                b.store(c32(0), m_a)

                def lane(ln):
                    s = self._tag(b.load(b.gep(state, [b.add(b.mul(w, c64(32)), ln)])), "state")
                    live = b.zext(b.icmp_signed("!=", s, c32(-1)), I32)
                    b.store(b.or_(b.load(m_a), b.shl(live, b.trunc(ln, I32))), m_a)

                self._for(b, nlanes(w), lane)
                self._tag(b.store(b.load(m_a), cw(w)), "state")

            self._for(b, nw, warp)

        self._if(b, b.and_(ex, b.not_(partial)), masks)

        def fire(w):
            n = nlanes(w)
            full = b.select(b.icmp_signed("<", n, c64(32)), b.trunc(b.sub(b.shl(c64(1), n), c64(1)), I32), c32(-1))
            part = b.select(now_partial, self._tag(b.load(cw(w)), "state"), full)
            t0 = b.mul(w, c64(32))
            self._if(b, b.icmp_unsigned("!=", part, c32(0)),
                     lambda: b.call(combine, [ctx, spill, tpb, t0, kk, part]))  # fmt: skip

        if self.red_at:
            self._if(b, b.not_(iscoll(kk)), lambda: self._red_release(b, state, spill, tpb))
        self._if(b, iscoll(kk), lambda: self._for(b, nw, fire))
        k.add_incoming(kk, b.block)
        partial.add_incoming(now_partial, b.block)
        b.branch(head)
