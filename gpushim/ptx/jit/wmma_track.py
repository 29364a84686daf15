"""wmma.load/store without a stop (a mixin of codegen.Codegen), in kernels that also have a `wmma.mma`.

The interpreter runs a wmma.load/store once per warp and fails a partial or diverged warp with
ILLEGAL_INSTRUCTION naming the load/store (PTX leaves that undefined). A stop per load/store (a warp collective)
cost tier 1 a save and restore of every live register and blocks: half the compile time of the wmma kernels.
Here each lane does its own accesses in place (its own address, as after the stop), by a call of one function
per load/store, element type and space in the module (the element loop, its checked accesses and fault exits),
and keeps a record in its collective slots: how many loads/stores it executed since the warp was last checked,
a hash of their sites in order, and its first LOG sites. The warp is checked (the runtime library's `wmma_rec`)
at each `wmma.mma`'s `@combine` case, before its own full-warp check, and when the block ends: it passes when
no lane has a record, or when all 32 lanes exist and their records agree (then they are reset). Otherwise
ILLEGAL_INSTRUCTION with the interpreter's message of the load/store at the first position where the lanes'
site sequences differ (a missing lane has none), naming the first lane that has it there: the load/store and
thread the interpreter reports.

Kernels without a `wmma.mma` keep the stop (ops_warp.py; they are small). Differences from the interpreter, all
in cases PTX leaves undefined, are in jit/README.md ("wmma.load/store in a kernel with a wmma.mma").
"""

from __future__ import annotations

from gpushim.cuda_errors import Err
from gpushim.ptx.jit import layout as L
from gpushim.ptx.jit import rtlib
from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import I32, I64, P8, P64
from gpushim.ptx.jit.ops_mma import partial_msg, wmma_ldst_form
from gpushim.ptx.nodes import Instr

LOG = 8  # the sites of a lane's first LOG loads/stores since the last check (then the hash alone tells)
NREC = 3 + LOG  # a lane's record, in its collective slots: count, hash, LOG sites + 1, a slot for the rest
_MAXREGS = 16  # fragment registers of a wmma.load/store at most
_HASH = 0x100000001B3  # (FNV's prime: h = h * P + site + 1)


def is_wmma_ldst(ins: Instr) -> bool:
    return ins.parts[0] == "wmma" and ins.parts[1] in ("load", "store")


def ldst_inline(code: list[Instr]) -> bool:
    """Whether the kernel's wmma.load/store run in place (it has a wmma.mma, where the warp is checked)"""
    return any(ins.parts[:2] == ["wmma", "mma"] for ins in code)


class WmmaTrack:
    # -- the thread's side ----------------------------------------------------------------------------------
    def _wmma_inline(self, ins: Instr) -> None:
        """A wmma.load/store in place: the lane's accesses (check mode: the checks only), then its record"""
        if self.mode == "check":
            self._mma_check(ins)
            return
        site = self._site(Err.ILLEGAL_INSTRUCTION, partial_msg(ins))

        def emit():
            self._wmma_call(ins)
            self._wrec_note(site)

        if ins.guard is None:
            emit()
        else:
            self._when(self._guard(ins), emit)

    def _wmma_call(self, ins: Instr) -> None:
        """The lane's accesses by a call of the function of the instruction's form (_wmma_fn; its registers in
        an array): the element loops, their checked accesses and fault exits once per form, not per instance"""
        b = self.b
        regs = wmma_ldst_form(ins)[6]
        load = ins.parts[1] == "load"
        a, ld, src = self._wmma_operands(ins)
        if getattr(self, "_wmma_arr", (None,))[0] is not self.f:  # (one array per thread function)
            here = b.block
            b.position_at_start(self.entry)
            self._wmma_arr = self.f, b.bitcast(b.alloca(ir.ArrayType(I32, _MAXREGS)), I32.as_pointer())
            b.position_at_end(here)
        arr = self._wmma_arr[1]
        for q, v in enumerate(src):
            b.store(v, b.gep(arr, [ir.Constant(I64, q)]))
        fn, delta = self._wmma_fn(ins)
        tab, ne = self._wmma_table(ins)
        args = [self.ctx, self.t, self.blk, a, ld, arr, self.acache, self.kc, self.kparam, tab, ir.Constant(I64, ne)]
        bad = b.call(fn, args)
        if self.mode != "fast":  # (fast: no checks, no faults)
            fix = self._wmma_fix()
            ok = self.f.append_basic_block()
            b.cbranch(bad, fix[0], ok).set_weights([1, 1 << 20])
            fix[1].add_incoming(ir.Constant(I64, delta), b.block)
            b.position_at_end(ok)
        if load:
            for q, r in enumerate(regs):
                self.write(r, b.load(b.gep(arr, [ir.Constant(I64, q)])), "b32")

    def _wmma_fix(self):
        """The thread function's exit of a fault in a form's function: the site it recorded moved to the
        instance's copy of its sites (a phi of the distance), then the fault exit"""
        fix = getattr(self, "_wmma_fixblk", None)
        if fix is None or fix[0].function is not self.f:
            blk = self.f.append_basic_block("wmma_fault")
            fb = ir.IRBuilder(blk)
            delta = fb.phi(I64)
            p = fb.gep(self.ctx, [ir.Constant(I32, L.ERR_SITE)])
            fb.store(fb.add(fb.load(p), delta), p)
            fb.branch(self.fail_blk)
            fix = self._wmma_fixblk = blk, delta
        return fix

    def _wmma_fn(self, ins: Instr) -> tuple:
        """(i1 @wmma_ldst(ctx, t, blk, a, ld, regs, acache, kc, kparam, table, E): 1 after recording a fault, of
        the instruction's load/store, element type and space and the code generator's mode (the table of its
        elements per lane an argument); the distance from the sites it records to this instance's copy of them
        (the messages name the instruction and its line))"""
        form = wmma_ldst_form(ins)
        key = (id(self.m), self.mode, ins.parts[1], form[1], self._resolve(form[2], form[7], ins))
        cache = self.__dict__.setdefault("_wmma_fns", {})
        if key not in cache:
            s0 = len(self.sites)
            fn = self._wmma_build(ins)
            cache[key] = fn, s0, self.sites[s0:], f"{ins.op} (line {ins.line})"
            return fn, 0
        fn, s0, sites, what = cache[key]
        mine = f"{ins.op} (line {ins.line})"
        first = len(self.sites)
        for code, msg in sites:
            self._site(code, msg.replace(what, mine, 1))
        return fn, first - s0

    def _wmma_build(self, ins: Instr) -> ir.Function:
        names = ("f", "b", "entry", "ctx", "t", "blk", "acache", "kc", "kparam", "arena", "base", "param", "psize",
                 "shsize", "losize", "shbuf", "lobuf", "fail_blk", "_fault", "_bounds", "_bounds_b", "_caches",
                 "_bounds_fault")  # fmt: skip
        saved = {k: getattr(self, k) for k in names}
        fty = ir.FunctionType(ir.IntType(1), [P64, I64, I64, I64, I64, I32.as_pointer(), P64, P64, P8,
                                               I32.as_pointer(), I64])  # fmt: skip
        f = ir.Function(self.m, fty, name=f"wmma_ldst_{len(self.m.functions)}")
        f.linkage = "internal"
        if self.mode != "fast":  # (tier 1: one copy; tier 2's fast code may inline it)
            f.attributes.add("noinline")
        try:
            self.f = f
            self.ctx, self.t, self.blk, a, ld, arr, self.acache, self.kc, self.kparam, tab, ne = f.args
            self.entry = f.append_basic_block("entry")
            b = self.b = ir.IRBuilder(self.entry)
            self.arena, self.base = self._ctx_ptr(L.ARENA), self._ctx(L.BASE)
            self.param, self.psize = self._ctx_ptr(L.PARAM), self._ctx(L.PSIZE)
            self.shsize, self.losize, self.shbuf = self._ctx(L.SHSIZE), self._ctx(L.LOSIZE), self._ctx_ptr(L.SHBUF)
            self.lobuf = b.gep(self._ctx_ptr(L.LOBUF), [b.mul(self.t, self._ctx(L.LOSTRIDE))])
            self._fault = None
            self.fail_blk = f.append_basic_block("fail")
            ir.IRBuilder(self.fail_blk).ret(ir.Constant(ir.IntType(1), 1))
            body = f.append_basic_block("body")
            self._bounds_block(b).branch(body)
            b = self.b = ir.IRBuilder(body)
            if ins.parts[1] == "load":  # (the forms that share it load up to _MAXREGS registers)
                for q in range(_MAXREGS):
                    b.store(ir.Constant(I32, 0), b.gep(arr, [ir.Constant(I64, q)]))
            self._wmma_elems(ins, a, ld, arr, table=(tab, ne))
            self.b.ret(ir.Constant(ir.IntType(1), 0))
        finally:
            for k, v in saved.items():
                setattr(self, k, v)
        return f

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
        """i64 @wrec (_wrec_define): the runtime library's, or without the library a definition in the module"""
        build = lambda m, name: _wrec_define(m, name, self._for)  # noqa: E731
        return rtlib.function(self, ("wmma_rec", LOG, NREC), "wmma_rec", _WREC, build)

    def _wrec_call(self, b: ir.IRBuilder, spill, tpb, t0):
        """The check of the warp at t0 (_wrec_define): 0, or (site + 1) << 32 | (thread + 1) of its fault"""
        ts, js = self.slot_strides(tpb)
        p = b.gep(spill, [b.mul(ir.Constant(I64, self.cbase + self.rec0), js)])  # (slot rec0 of thread 0)
        return b.call(self._wrec_fn(), [p, ts, js, tpb, t0])

    def _wrec_value(self, b: ir.IRBuilder, env):
        """At a wmma.mma's @combine case, before its own check: the warp's record check (0, or the fault as
        (site + 1) << 32 | (thread + 1), which _mma_out reports), or None in kernels without records"""
        if not getattr(self, "wmma_inline", False):
            return None
        spill, tpb = b.function.args[1], b.function.args[2]
        return self._wrec_call(b, spill, tpb, env[5])

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
            r = self._wrec_call(b, spill, tpb, b.mul(w, c64(32)))
            bad, go = f.append_basic_block("wend_fault"), f.append_basic_block("wend_ok")
            b.cbranch(b.icmp_unsigned("!=", r, c64(0)), bad, go)
            b.position_at_end(bad)
            self._record_partial(b, ctx, r, bi)
            b.branch(failed)
            b.position_at_end(go)

        self._for(b, nw, warp)
        b.branch(blk_next)


_WREC = ir.FunctionType(I64, [P64, I64, I64, I64, I64])


def _wrec_define(m: ir.Module, name: str, loop) -> ir.Function:
    """i64 @wrec(rec, ts, js, tpb, t0): 0 when the warp at t0 passes (its records reset), else (site + 1) << 32 |
    (thread + 1) of the fault (the module docstring). Slot j of thread t's record is at rec + t * ts + j * js
    (the spill area's layout). Kernel-independent (the runtime library); loop: ops_warp's _for."""
    f = ir.Function(m, _WREC, name=name)
    f.attributes.add("noinline")
    rec0, ts, js, tpb, t0 = f.args
    b = ir.IRBuilder(f.append_basic_block("e"))
    c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
    anyr, diff, best, who = (b.alloca(I64) for _ in range(4))
    nl = b.sub(tpb, t0)
    nl = b.select(b.icmp_signed("<", nl, c64(32)), nl, c64(32))
    partial = b.icmp_unsigned("<", nl, c64(32))

    def slot(ln, j):
        return b.gep(rec0, [b.add(b.mul(b.add(t0, ln), ts), b.mul(j if not isinstance(j, int) else c64(j), js))])

    def rec(ln, j):
        return b.load(slot(ln, j))

    def fault():  # (best: a site + 1, who: the lane)
        return b.or_(b.shl(b.load(best), c64(32)), b.add(b.add(t0, b.load(who)), c64(1)))

    def scan(entry):
        """Over the lanes: diff |= entry != lane 0's, anyr |= entry != 0, (best, who) the lowest nonzero entry
        and its first lane"""
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

        loop(b, nl, lane)

    def position(i):  # the first position where the lanes' sites differ (a lane not there has none)
        scan(lambda ln: b.select(b.icmp_unsigned(">", rec(ln, 0), i), rec(ln, b.add(c64(2), i)), c64(0)))
        differs = b.or_(b.icmp_unsigned("!=", b.load(diff), c64(0)),
                        b.and_(partial, b.icmp_unsigned("!=", b.load(anyr), c64(0))))  # fmt: skip
        bad, go = f.append_basic_block("wrec_at"), f.append_basic_block("wrec_next")
        b.cbranch(differs, bad, go)
        b.position_at_end(bad)
        b.ret(fault())
        b.position_at_end(go)

    loop(b, c64(LOG), position)
    # the first LOG sites agree (so a partial warp has no records): then the counts and hashes tell; a fault
    # names the earliest first site
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
            b.store(c64(0), slot(ln, j))

    loop(b, nl, reset)
    b.ret(c64(0))
    return f
