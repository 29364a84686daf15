"""mma.sync in the compiling engine (a mixin of codegen.Codegen): a warp collective (ops_warp.py) whose lanes
deposit their A, B and C fragment registers in collective slots after ops_warp's; `@combine` calls the runtime
library's mma_warp (mma_rt.py), which gathers the warp's matrices (doubles, by the interpreter's fragment layouts:
mma_frag.py), computes D = A B + C as the interpreter does (ops_mma.matmul_acc: products exact in f64, summed in
f64 in order of k from c, rounded once to f32, then to f16 for an f16 D; NaN results canonical) and writes each
lane's D registers to its slots.

Supported: .row.col, f16/bf16/tf32 sources, m16n8k16, m16n8k8 and m16n8k4 (tf32), f32 or (f16 sources) f16
C and D. Everything else (integer, f64, fp8, b1 sources; m8n8k4 f16; ldmatrix, wmma) stays on the interpreter,
with the reason. As in the interpreter, the instruction needs all 32 lanes of the warp executing it: otherwise
ILLEGAL_INSTRUCTION, naming the first executing thread of the warp (mma_frag.warp_threads).
"""

from __future__ import annotations

import functools

from gpushim.cuda_errors import Err
from gpushim.ptx.jit import mma_rt
from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import I1, I32, I64, JitUnsupported
from gpushim.ptx.mma_frag import ELEM_BITS, dims, per_reg
from gpushim.ptx.mma_frag import mma_layout as _mma_layout
from gpushim.ptx.mma_frag import wmma_layout as _wmma_layout
from gpushim.ptx.nodes import Addr, Instr, Reg, Vec

# The layouts and forms are asked for several times per instruction and were a third of the Python side of a
# wmma kernel's compile: memoised (the layouts' arrays are shared: read only)
mma_layout = functools.cache(_mma_layout)
wmma_layout = functools.cache(_wmma_layout)


def _memo(fn):
    """fn(ins) kept in the instruction (its result, not its JitUnsupported: that is raised again)"""
    key = f"_jit_{fn.__name__}"

    @functools.wraps(fn)
    def cached(ins: Instr):
        hit = ins.__dict__.get(key)
        if hit is None:
            hit = ins.__dict__[key] = fn(ins)
        return hit

    return cached


_SHAPES = {"f16": ("m16n8k16", "m16n8k8"), "bf16": ("m16n8k16", "m16n8k8"), "tf32": ("m16n8k8", "m16n8k4"),
           "s8": ("m16n8k32", "m16n8k16", "m8n8k16"), "u8": ("m16n8k32", "m16n8k16", "m8n8k16")}  # fmt: skip
_WMMA_SHAPES = {"f16": ("m16n16k16", "m32n8k16", "m8n32k16"), "bf16": ("m16n16k16", "m32n8k16", "m8n32k16"),
                "tf32": ("m16n16k8",), "s8": ("m16n16k16", "m32n8k16", "m8n32k16"),
                "u8": ("m16n16k16", "m32n8k16", "m8n32k16")}  # fmt: skip
_ACC = {"f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",), "s8": ("s32",), "u8": ("s32",)}
_INT = ("s8", "u8")
_TYPES = ("f16", "bf16", "tf32", "f32", "f64", "s8", "u8", "s4", "u4", "b1", "s32", "e4m3", "e5m2")


def _shape(parts: list[str]) -> str | None:
    return next((x for x in parts if x.startswith("m") and x[1:2].isdigit()), None)


@_memo
def mma_form(ins: Instr) -> tuple:
    """((m, n, k), (dtype, atype, btype, ctype, .satfinite), register counts of D, A, B, C, their layouts ((rows,
    cols) of each lane's elements, mma_frag.py)) of an mma.sync or wmma.mma the JIT supports; else JitUnsupported
    naming what it lacks."""
    p = ins.parts
    wmma = p[0] == "wmma"
    types = [x for x in p if x in _TYPES]
    shape = _shape(p)
    if wmma and len(types) == 2:
        types = [types[0], "f16", "f16", types[1]]
    if "sync" not in p or "aligned" not in p or len(types) != 4 or shape is None:
        raise JitUnsupported(f"{ins.op} (JIT: form)")
    dtyp, atyp, btyp, ctyp = types
    extra = set(p[1 + wmma :]) - {"sync", "aligned", "row", "col", shape, *types}
    sat = "satfinite" in extra and atyp in _INT
    shapes = (_WMMA_SHAPES if wmma else _SHAPES).get(atyp, ())
    mixed = btyp != atyp and not {atyp, btyp} <= set(_INT)
    if mixed or shape not in shapes or extra - ({"satfinite"} if sat else set()):
        raise JitUnsupported(f"{ins.op} (JIT: only f16/bf16/tf32/s8/u8 sources)")
    lay = [x for x in p if x in ("row", "col")]
    if len(lay) != 2 or (not wmma and lay != ["row", "col"]):
        raise JitUnsupported(f"{ins.op} (JIT: layout)")
    if dtyp not in _ACC[atyp] or ctyp not in _ACC[atyp] or (not wmma and dtyp != ctyp):
        raise JitUnsupported(f"{ins.op} (JIT: accumulators)")
    if len(ins.args) != 4 or not all(isinstance(a, Vec) for a in ins.args):
        raise JitUnsupported(f"{ins.op} (JIT: operands)")
    m, n, k = dims(shape)
    counts = tuple(len(a.items) for a in ins.args)
    lays = []
    for which, typ, nreg in zip("dabc", (dtyp, atyp, btyp, ctyp), counts, strict=True):
        if wmma:
            lays.append(wmma_frag(which, shape, typ, nreg)[0])
        else:
            lays.append(mma_layout(shape, btyp if which == "b" else atyp, "c" if which in "cd" else which))
        if lays[-1][0].shape[1] != nreg * per_reg(typ):  # (the interpreter reports the wrong register count)
            raise JitUnsupported(f"{ins.op} (JIT: register counts {counts})")
    return (m, n, k), (dtyp, atyp, btyp, ctyp, sat), counts, lays


def wmma_frag(which: str, shape: str, typ: str, nreg: int):
    """(rows, cols) of each lane's elements of a wmma fragment, and the matrix's (rows, cols) (ops_mma._wmma_frag)"""
    m, n, k = dims(shape)
    nr, nc = {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[which]
    want = 16 if typ == "f16" and which in "ab" else nr * nc // 32
    if nreg * per_reg(typ) != want:  # (the interpreter reports the wrong register count)
        raise JitUnsupported(f"wmma .{which} fragment of {nreg} registers (JIT)")
    return wmma_layout(shape, typ, which, nr, nc, want), (nr, nc)


@_memo
def wmma_ldst_form(ins: Instr) -> tuple:
    """(which, typ, space, layout, fragment layout, matrix (rows, cols), fragment registers, address operand) of a
    wmma.load/store the JIT supports (the shapes and types wmma_form takes)"""
    p = ins.parts
    load = p[1] == "load"
    which, typ, shape = p[2], p[-1], _shape(p)
    extra = set(p[3:-1]) - {"sync", "aligned", "row", "col", shape, "global", "shared"}
    if ((load and which not in "abc") or (not load and which != "d") or extra or shape is None
            or len(ins.args) not in (2, 3)):  # fmt: skip
        raise JitUnsupported(f"{ins.op} (JIT: form)")
    ok = typ in ("f16", "f32", "s32") if which in "cd" else shape in _WMMA_SHAPES.get(typ, ())
    if not ok or shape not in _WMMA_SHAPES["f16"] + _WMMA_SHAPES["tf32"]:
        raise JitUnsupported(f"{ins.op} (JIT: only f16/bf16/tf32 sources, f16/f32 accumulators)")
    frag, addr = (ins.args[0], ins.args[1]) if load else (ins.args[1], ins.args[0])
    if not isinstance(frag, Vec) or not isinstance(addr, Addr):
        raise JitUnsupported(f"{ins.op} (JIT: operands)")
    lay, mat = wmma_frag(which, shape, typ, len(frag.items))
    space = "shared" if "shared" in p else "global" if "global" in p else None
    return which, typ, space, "col" if "col" in p else "row", lay, mat, frag.items, addr


def partial_msg(ins: Instr) -> str:
    """The interpreter's message of a matrix instruction in a partial or diverged warp ({who}: the thread)"""
    return (f"{ins.op} (line {ins.line}): a warp-collective matrix instruction needs all 32 threads of the warp; "
            "{who} ran it in a partial or diverged warp")  # fmt: skip


def mma_slots(ins: Instr) -> int:
    """Collective slots the instruction uses after ops_warp's: A, B, C in, D out (wmma.load/store: none)."""
    if is_mma(ins):
        return sum(mma_form(ins)[2])
    return 2 + (len(ins.args[1].items) if ins.parts[1] == "store" else 0)  # address, stride (, the fragment)


def is_mma(ins: Instr) -> bool:
    return ins.parts[0] == "mma" or ins.parts[1] == "mma"


def matrix_form(ins: Instr) -> None:
    """Whether the JIT supports the matrix instruction (JitUnsupported with the reason otherwise)"""
    if is_mma(ins):
        mma_form(ins)
    elif ins.parts[1] in ("load", "store"):
        wmma_ldst_form(ins)
    else:
        raise JitUnsupported(ins.op)


def mma_dests(ins: Instr) -> set[str]:
    if ins.parts[0] == "wmma" and ins.parts[1] == "store":
        return set()
    d = ins.args[0]
    return {r.name for r in d.items if hasattr(r, "name")} if isinstance(d, Vec) else set()


class MmaOps:
    def _cvt_tf32(self, ins: Instr) -> None:
        """cvt.{rna,rn,rz}{.satfinite}.tf32.f32 as ops_mma.compile_cvt_tf32 (on the bits)"""
        mods = set(ins.parts[1:-2])
        rnd = mods & {"rna", "rn", "rz"}
        if len(rnd) != 1 or mods - rnd - {"satfinite"} or len(ins.args) != 2:
            raise JitUnsupported(ins.op)
        b, k = self.b, lambda v: ir.Constant(I32, v)
        x = self.read(ins.args[1], "u32")
        mag = b.and_(x, k(0x7FFFFFFF))
        r = {"rna": lambda: b.add(x, k(0x1000)), "rz": lambda: x,
             "rn": lambda: b.add(b.add(x, k(0xFFF)), b.and_(b.lshr(x, k(13)), k(1)))}[rnd.pop()]()  # fmt: skip
        r = b.and_(r, k(0xFFFFE000))
        finite = b.icmp_unsigned("<", mag, k(0x7F800000))
        r = b.select(finite, r, x)  # infinities unchanged
        r = b.select(b.icmp_unsigned(">", mag, k(0x7F800000)), k(0x7FFFFFFF), r)  # NaN: canonical
        if "satfinite" in mods:
            big = b.and_(finite, b.icmp_unsigned(">=", b.and_(r, k(0x7FFFFFFF)), k(0x7F800000)))
            r = b.select(big, b.or_(b.and_(r, k(0x80000000)), k(0x7F7FE000)), r)
            inf = b.icmp_unsigned("==", mag, k(0x7F800000))
            r = b.select(inf, b.or_(b.and_(x, k(0x80000000)), k(0x7F7FE000)), r)
        self.write(ins.args[0], r, "u32")

    # -- the thread's side ----------------------------------------------------------------------------------
    def _mma_in(self, ins: Instr, first: int) -> list:
        """(slot, value) of the A, B and C registers (slots from first on; D's follow them)."""
        if not is_mma(ins):  # the operands, read before the stop (registers dead after it are not restored)
            a, ld, src = self._wmma_operands(ins)
            return [(first + j, v) for j, v in enumerate([a, ld, *(self.b.zext(v, I64) for v in src)])]
        nd, na, nb, nc = mma_form(ins)[2]
        regs = [*ins.args[1].items, *ins.args[2].items, *ins.args[3].items]
        return [(first + j, self.b.zext(self.read(r, "b32"), I64)) for j, r in enumerate(regs)]

    def _mma_out(self, ins: Instr, first: int, cp, went) -> None:
        """After the stop, for a lane that executed it: the fault the combine found (cp: the thread + 1), or the
        D registers from their slots."""
        b = self.b

        def out():
            bad = b.icmp_unsigned("!=", cp, ir.Constant(I64, 0))
            self._mma_fault(ins, bad, cp)
            if not is_mma(ins):
                n = len(ins.args[1].items) if ins.parts[1] == "store" else 0
                a, ld, *src = (self._tag(b.load(self._cslot(first + j)), "coll_in") for j in range(2 + n))
                self._wmma_ldst(ins, (a, ld, [b.trunc(v, I32) for v in src]))
                return
            nd, na, nb, nc = mma_form(ins)[2]
            for j, r in enumerate(ins.args[0].items):
                v = self._tag(b.load(self._cslot(first + na + nb + nc + j)), "coll_out")
                self.write(r, b.trunc(v, I32), "b32")

        if went is None:
            out()
        else:
            self._when(went, out)

    def _wmma_operands(self, ins: Instr) -> tuple:
        """(address, stride in elements (i64), the stored registers) of a wmma.load/store"""
        b = self.b
        which, typ, space, layout, _, (nr, nc), regs, addr = wmma_ldst_form(ins)
        _, a = self._address(addr)
        ld = b.zext(self.read(ins.args[2], "u32"), I64) if len(ins.args) > 2 else None
        ld = ir.Constant(I64, nc if layout == "row" else nr) if ld is None else ld
        return a, ld, [] if ins.parts[1] == "load" else [self.read(r, "b32") for r in regs]

    def _wmma_ldst(self, ins: Instr, operands=None, check: bool = False) -> None:
        """wmma.load/store: the lane's fragment elements from/to memory through the checked accesses, at the
        interpreter's addresses (ops_mma._compile_wmma_ldst; check mode: the checks only, destinations 0)"""
        b = self.b
        regs = wmma_ldst_form(ins)[6]
        load = ins.parts[1] == "load"
        a, ld, src = operands or self._wmma_operands(ins)
        c32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        here = b.block  # the registers as an array (the elements in a loop: one checked access site, less IR)
        b.position_at_start(self.entry)
        arr = b.alloca(ir.ArrayType(I32, len(regs)))
        b.position_at_end(here)
        for q in range(len(regs)):
            b.store(c32(0) if load else src[q], b.gep(arr, [c32(0), c32(q)]))
        self._wmma_elems(ins, a, ld, b.bitcast(arr, I32.as_pointer()), check)
        if load and not check:
            for q, r in enumerate(regs):
                self.write(r, b.load(b.gep(arr, [c32(0), c32(q)])), "b32")

    def _wmma_elems(self, ins: Instr, a, ld, arr, check: bool = False, table=None) -> None:
        """The element loop of a wmma.load/store of the lane (self.t): its registers in arr (i32*; a load ORs
        the elements into them: zero before). table: (i32* to _wmma_table's, its elements per lane) as values."""
        b = self.b
        which, typ, space, layout, _, _, regs, addr = wmma_ldst_form(ins)
        load = ins.parts[1] == "load"
        space = self._resolve(space, addr, ins)
        esize = ELEM_BITS[typ] // 8
        per, eb = per_reg(typ), ELEM_BITS[typ]
        what = f"{ins.op} (line {ins.line})"
        tab, ne = table or self._wmma_table(ins)
        lane = b.urem(self.t, ir.Constant(I64, 32))
        it = ir.IntType(8 * esize)
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        ne = c64(ne) if isinstance(ne, int) else ne

        def elem(e):
            rc = b.zext(b.load(b.gep(tab, [b.add(b.mul(lane, ne), e)])), I64)
            off = b.add(b.mul(b.lshr(rc, c64(16)), ld), b.and_(rc, c64(0xFFFF)))
            p = self._ptr(space, b.add(a, b.mul(off, c64(esize))), esize, esize, what, not load, addr.base)
            if check:
                return
            reg = b.gep(arr, [b.udiv(e, c64(per))])
            sh = b.trunc(b.mul(b.urem(e, c64(per)), c64(eb)), I32)
            ptr = b.bitcast(p, it.as_pointer())
            if load:
                v = self._tag(b.load(ptr, align=esize), space)
                b.store(b.or_(b.load(reg), b.shl(b.zext(v, I32), sh) if per > 1 else v), reg)
            else:
                v = b.load(reg)
                self._tag(b.store(b.trunc(b.lshr(v, sh), it) if per > 1 else v, ptr, align=esize), space)

        self._for(b, ne, elem)

    def _wmma_table(self, ins: Instr) -> tuple:
        """(i32* to the table lane * E + e -> row << 16 | col of the lane's element e (in the memory's layout), E)"""
        _, _, _, layout, (rows, cols), _, _, _ = wmma_ldst_form(ins)
        r_, c_ = (rows, cols) if layout == "row" else (cols, rows)
        tab, ne = self._mma_table(r_, c_, 1 << 16)
        return self.b.bitcast(tab, I32.as_pointer()), ne

    def _mma_check(self, ins: Instr) -> None:
        """Check mode (each thread alone): a wmma.load/store's accesses checked; the destinations 0 (any value:
        taint.py keeps addresses and branches off them)"""

        def emit():
            if ins.parts[0] == "wmma" and ins.parts[1] in ("load", "store"):
                self._wmma_ldst(ins, check=True)
            for r in sorted(mma_dests(ins)):  # (sorted: the same IR in every process)
                self.write(Reg(r), ir.Constant(I32, 0), "b32")

        if ins.guard is None:
            emit()
        else:
            self._when(self._guard(ins), emit)

    def _mma_fault(self, ins: Instr, bad, cp) -> None:
        """ILLEGAL_INSTRUCTION naming the thread cp - 1 (the interpreter's message, mma_frag.warp_threads); the
        site is this instruction's, or (site + 1) << 32 in cp: a wmma.load/store's (wmma_track.py). One fault
        exit per thread function (cp and the site in its phis: a block less per matrix instruction)."""
        b = self.b
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        site = self._site(Err.ILLEGAL_INSTRUCTION, partial_msg(ins))
        fx = getattr(self, "_mma_exit", None)
        if fx is None or fx[0].function is not self.f:
            fb = ir.IRBuilder(self.f.append_basic_block("mma_fault"))
            cpv, own = fb.phi(I64), fb.phi(I64)
            self._record_partial(fb, self.ctx, cpv, self.blk, own)
            fb.branch(self.fail_blk)
            fx = self._mma_exit = fb.block, cpv, own
        okb = self.f.append_basic_block()
        b.cbranch(bad, fx[0], okb).set_weights([1, 1 << 20])
        fx[1].add_incoming(cp, b.block)
        fx[2].add_incoming(c64(site), b.block)
        b.position_at_end(okb)

    def _record_partial(self, b, ctx, cp, blk, own=None) -> None:
        """Record the partial-warp fault cp: (site + 1) << 32 | (thread + 1), the site a wmma.load/store's
        (wmma_track.py); with no site in it (cp: thread + 1), the site own (the instruction's)"""
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        hi = b.lshr(cp, c64(32))
        site = b.sub(hi, c64(1)) if own is None else b.select(b.icmp_unsigned("==", hi, c64(0)), own, b.sub(hi, c64(1)))
        thread = b.sub(b.and_(cp, c64(0xFFFFFFFF)), c64(1))
        self._record_fault(b, ctx, c64(Err.ILLEGAL_INSTRUCTION), site, c64(0), thread, blk)

    # -- @combine's case ------------------------------------------------------------------------------------
    def _mma_case(self, b, ins: Instr, env) -> None:
        """D = A B + C for the warp at t0 (env: the combine's ld/st of a lane's slot, `each` over its lanes,
        the lanes executing it, the lanes there, t0, the first slot); or the fault in CP of every lane: the warp's
        wmma.load/store records' (wmma_track.py), else, unless all 32 lanes execute it, the first executing lane
        + 1. One case serves every mma of the kernel with the same guardedness (the form, mma_warp's descriptor,
        chosen by the resume point): straight code, one loop and one branch (blocks are what LLVM's time grows
        with)."""
        ld, st, each, act, nl, t0, first, cp_slot = env
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        saved = self.b
        self.b = b  # (code built with self.b lands in @combine)
        try:
            full = b.and_(b.icmp_unsigned("==", act, c64(0xFFFFFFFF)), b.icmp_unsigned("==", nl, c64(32)))
            low = b.call(self._cttz(), [act, ir.Constant(I1, 0)])
            cp = b.select(full, c64(0), b.add(b.add(t0, low), c64(1)))  # (the first executing thread + 1)
            rec = self._wrec_value(b, env)  # the warp's wmma.load/store records first (wmma_track.py)
            if rec is not None:
                cp = b.select(b.icmp_unsigned("!=", rec, c64(0)), rec, cp)
            each(lambda lane: st(cp_slot, lane, cp))
            if not is_mma(ins):  # wmma.load/store: the lanes go on to their accesses
                return
            # one call of the runtime library's mma_warp (mma_rt.py); slot j of lane l: base + l * ls + j * ss
            f = b.function
            spill, tpb, k = f.args[1], f.args[2], f.args[4]  # (@combine's, ops_warp._combine_fn)
            base = self.slot_addr(b, spill, tpb, self.cbase + first, t0)
            ls, ss = self.slot_strides(tpb)
            code, guarded = self.prog.code, ins.guard is not None
            descs = {}  # the descriptor of each resume point of this case's mmas (one per form)
            for kk, i in sorted(self.coll_at.items()):
                if is_mma(code[i]) and (code[i].guard is not None) == guarded:
                    descs[kk] = mma_rt.desc_global(self, mma_form(code[i]))
            zero = [ir.Constant(I32, 0), ir.Constant(I32, 0)]
            ptrs = {gv: b.gep(gv, zero) for gv in dict.fromkeys(descs.values())}  # (one per form)
            base_gv = descs[min(descs)]
            desc = ptrs[base_gv]
            for kk, gv in descs.items():
                if gv is not base_gv:
                    desc = b.select(b.icmp_unsigned("==", k, ir.Constant(I32, kk)), ptrs[gv], desc)
            self._if(b, b.icmp_unsigned("==", cp, c64(0)), lambda: b.call(mma_rt.function(self), [base, ls, ss, desc]))
        finally:
            self.b = saved

    def _mma_table(self, rows, cols, ncols: int):
        """A constant i32 table: lane * E + e -> the flat index of lane's element e (one per distinct table in the
        module: the loads and stores of one form share it)"""
        vals = (rows.astype(int) * ncols + cols).ravel().tolist()
        return mma_rt.const_table(self, "mmatab", vals), rows.shape[1]
