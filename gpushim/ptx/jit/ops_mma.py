"""mma.sync in the compiling engine (a mixin of codegen.Codegen): a warp collective (ops_warp.py) whose lanes
deposit their A, B and C fragment registers in collective slots after ops_warp's; `@combine` gathers the warp's
matrices (doubles, by the interpreter's fragment layouts: mma_frag.py), computes D = A B + C as the interpreter
does (ops_mma.matmul_acc: products exact in f64, summed in f64 in order of k from c, rounded once to f32, then
to f16 for an f16 D; NaN results canonical) and writes each lane's D registers to its slots.

Supported: .row.col, f16/bf16/tf32 sources, m16n8k16, m16n8k8 and m16n8k4 (tf32), f32 or (f16 sources) f16
C and D. Everything else (integer, f64, fp8, b1 sources; m8n8k4 f16; ldmatrix, wmma) stays on the interpreter,
with the reason. As in the interpreter, the instruction needs all 32 lanes of the warp executing it: otherwise
ILLEGAL_INSTRUCTION, naming the first executing thread of the warp (mma_frag.warp_threads).
"""

from __future__ import annotations

from gpushim.cuda_errors import Err
from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import F32, F64, I1, I32, I64, JitUnsupported
from gpushim.ptx.mma_frag import ELEM_BITS, dims, mma_layout, per_reg
from gpushim.ptx.nodes import Instr, Vec

_SHAPES = {"f16": ("m16n8k16", "m16n8k8"), "bf16": ("m16n8k16", "m16n8k8"), "tf32": ("m16n8k8", "m16n8k4")}
_ACC = {"f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",)}


def mma_form(ins: Instr) -> tuple:
    """(shape, dtype, atype, ctype, register counts of D, A, B, C) of an mma.sync the JIT supports; else
    JitUnsupported naming what it lacks."""
    p = ins.parts
    types = [x for x in p if x in ("f16", "bf16", "tf32", "f32", "f64", "s8", "u8", "s4", "u4", "b1", "s32",
                                   "e4m3", "e5m2")]  # fmt: skip
    shape = next((x for x in p if x.startswith("m") and x[1:2].isdigit()), None)
    if "sync" not in p or "aligned" not in p or len(types) != 4 or shape is None:
        raise JitUnsupported(f"{ins.op} (JIT: form)")
    dtyp, atyp, btyp, ctyp = types
    extra = set(p[1:]) - {"sync", "aligned", "row", "col", shape, *types}
    if atyp not in _SHAPES or btyp != atyp or shape not in _SHAPES[atyp] or extra:
        raise JitUnsupported(f"{ins.op} (JIT: only .row.col f16/bf16/tf32 m16n8k16/k8/k4)")
    if [x for x in p if x in ("row", "col")] != ["row", "col"]:
        raise JitUnsupported(f"{ins.op} (JIT: layout)")
    if dtyp != ctyp or dtyp not in _ACC[atyp]:
        raise JitUnsupported(f"{ins.op} (JIT: accumulators)")
    if len(ins.args) != 4 or not all(isinstance(a, Vec) for a in ins.args):
        raise JitUnsupported(f"{ins.op} (JIT: operands)")
    counts = tuple(len(a.items) for a in ins.args)
    want = tuple(_layout(shape, atyp, w)[0].shape[1] // per_reg(t)
                 for w, t in (("c", dtyp), ("a", atyp), ("b", atyp), ("c", ctyp)))  # fmt: skip
    if counts != want:  # (the interpreter reports the wrong register count)
        raise JitUnsupported(f"{ins.op} (JIT: register counts {counts})")
    return shape, dtyp, atyp, ctyp, counts


def _layout(shape: str, atyp: str, which: str):
    return mma_layout(shape, atyp, which)


def mma_slots(ins: Instr) -> int:
    """Collective slots the instruction uses after ops_warp's: A, B, C in, D out."""
    return sum(mma_form(ins)[4])


def mma_dests(ins: Instr) -> set[str]:
    return {r.name for r in ins.args[0].items if hasattr(r, "name")}


class MmaOps:
    # -- the thread's side ----------------------------------------------------------------------------------
    def _mma_in(self, ins: Instr, first: int) -> list:
        """(slot, value) of the A, B and C registers (slots from first on; D's follow them)."""
        nd, na, nb, nc = mma_form(ins)[4]
        regs = [*ins.args[1].items, *ins.args[2].items, *ins.args[3].items]
        return [(first + j, self.b.zext(self.read(r, "b32"), I64)) for j, r in enumerate(regs)]

    def _mma_out(self, ins: Instr, first: int, cp, went) -> None:
        """After the stop, for a lane that executed it: the fault the combine found (cp: the thread + 1), or the
        D registers from their slots."""
        b = self.b
        nd, na, nb, nc = mma_form(ins)[4]

        def out():
            bad = b.icmp_unsigned("!=", cp, ir.Constant(I64, 0))
            self._mma_fault(ins, bad, b.sub(cp, ir.Constant(I64, 1)))
            for j, r in enumerate(ins.args[0].items):
                v = self._tag(b.load(self._cslot(first + na + nb + nc + j)), "coll_out")
                self.write(r, b.trunc(v, I32), "b32")

        if went is None:
            out()
        else:
            self._when(went, out)

    def _mma_fault(self, ins: Instr, bad, thread) -> None:
        """ILLEGAL_INSTRUCTION naming `thread` (the interpreter's message, mma_frag.warp_threads)"""
        b = self.b
        what = f"{ins.op} (line {ins.line})"
        site = self._site(Err.ILLEGAL_INSTRUCTION, f"{what}: a warp-collective matrix instruction needs all 32 "
                          "threads of the warp; {who} ran it in a partial or diverged warp")  # fmt: skip
        okb, failb = self.f.append_basic_block(), self.f.append_basic_block()
        b.cbranch(bad, failb, okb).set_weights([1, 1 << 20])
        b.position_at_end(failb)
        self._record_fault(b, self.ctx, ir.Constant(I64, Err.ILLEGAL_INSTRUCTION), ir.Constant(I64, site),
                           ir.Constant(I64, 0), thread, self.blk)  # fmt: skip
        b.branch(self.fail_blk)
        b.position_at_end(okb)

    # -- @combine's case ------------------------------------------------------------------------------------
    def _mma_case(self, b, ins: Instr, env) -> None:
        """D = A B + C for the warp at t0 (env: the combine's ld/st of a lane's slot, `each` over its lanes,
        the lanes executing it, the lanes there, t0, the first slot); or, unless all 32 lanes execute it, the
        fault (the first executing lane + 1 in CP of every lane)."""
        ld, st, each, act, nl, first, cp_slot = env
        shape, dtyp, atyp, ctyp, (nd, na, nb, nc) = mma_form(ins)
        m, n, k = dims(shape)
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        saved = self.b
        self.b = b  # (the decoders and encoders below, and the helpers they call, build with self.b)
        try:
            f = b.function
            full = b.and_(b.icmp_unsigned("==", act, c64(0xFFFFFFFF)), b.icmp_unsigned("==", nl, c64(32)))
            yes, no, join = (f.append_basic_block(x) for x in ("mma", "mma_partial", "mma_done"))
            b.cbranch(full, yes, no)
            b.position_at_end(no)
            low = b.call(self._cttz(), [act, ir.Constant(I1, 0)])
            each(lambda lane: st(cp_slot, lane, b.add(low, c64(1))))
            b.branch(join)
            b.position_at_end(yes)
            each(lambda lane: st(cp_slot, lane, c64(0)))
            here = b.block
            b.position_at_start(f.entry_basic_block)
            mats = [b.alloca(ir.ArrayType(F64, r * c)) for r, c in ((m, k), (k, n), (m, n), (m, n))]
            acc = b.alloca(F64)
            b.position_at_end(here)
            ma, mb, mc, md = mats
            off = first
            for which, typ, nreg, mat, cols in (("a", atyp, na, ma, k), ("b", atyp, nb, mb, n),
                                                ("c", ctyp, nc, mc, n)):  # fmt: skip
                self._mma_gather(b, ld, each, (which, typ, shape, atyp), off, mat, cols)
                off += nreg

            def elem(mat, i):
                return b.gep(mat, [ir.Constant(I32, 0), i])

            def row(i):
                def col(j):
                    b.store(b.load(elem(mc, b.add(b.mul(i, c64(n)), j))), acc)

                    def step(q):
                        x = b.fmul(b.load(elem(ma, b.add(b.mul(i, c64(k)), q))),
                                   b.load(elem(mb, b.add(b.mul(q, c64(n)), j))))  # fmt: skip
                        b.store(b.fadd(b.load(acc), x), acc)

                    self._for(b, c64(k), step)
                    b.store(b.load(acc), elem(md, b.add(b.mul(i, c64(n)), j)))

                self._for(b, c64(n), col)

            self._for(b, c64(m), row)
            self._mma_scatter(b, st, each, (dtyp, shape, atyp), off, md, n)
            b.branch(join)
            b.position_at_end(join)
        finally:
            self.b = saved

    def _mma_table(self, rows, cols, ncols: int):
        """A constant i32 table: lane * E + e -> the flat index of lane's element e"""
        e = rows.shape[1]
        vals = [int(rows[ln, i]) * ncols + int(cols[ln, i]) for ln in range(32) for i in range(e)]
        ty = ir.ArrayType(I32, len(vals))
        g = ir.GlobalVariable(self.m, ty, name=f"mmatab_{len(self.m.functions)}_{len(self.m._gvars)}")
        g.global_constant = True
        g.linkage = "internal"
        g.initializer = ir.Constant(ty, vals)
        return g, e

    def _mma_gather(self, b, ld, each, form, first: int, mat, ncols: int) -> None:
        which, typ, shape, atyp = form
        rows, cols = _layout(shape, atyp, which)
        tab, ne = self._mma_table(rows, cols, ncols)
        per, eb = per_reg(typ), ELEM_BITS[typ]

        def lane(ln):
            for e in range(ne):
                bits = b.trunc(ld(first + e // per, ln), I32)
                if per > 1:
                    bits = b.and_(b.lshr(bits, ir.Constant(I32, (e % per) * eb)), ir.Constant(I32, 0xFFFF))
                at = b.load(b.gep(tab, [ir.Constant(I32, 0), b.add(b.mul(ln, ir.Constant(I64, ne)),
                                                                   ir.Constant(I64, e))]))  # fmt: skip
                b.store(self._mma_decode(bits, typ), b.gep(mat, [ir.Constant(I32, 0), at]))

        each(lane)

    def _mma_decode(self, bits, typ: str):
        """Element bits (i32) -> double, exactly (mma_frag.decode)"""
        b = self.b
        if typ == "f16":
            return b.fpext(self._h2f(bits, False), F64)
        if typ == "bf16":
            return b.fpext(b.bitcast(b.shl(bits, ir.Constant(I32, 16)), F32), F64)
        if typ == "tf32":
            bits = b.and_(bits, ir.Constant(I32, 0xFFFFE000))
        return b.fpext(b.bitcast(bits, F32), F64)

    def _mma_scatter(self, b, st, each, form, first: int, mat, ncols: int) -> None:
        typ, shape, atyp = form
        rows, cols = _layout(shape, atyp, "c")
        tab, ne = self._mma_table(rows, cols, ncols)
        per = per_reg(typ)

        def lane(ln):
            regs: list = [None] * (ne // per)
            for e in range(ne):
                at = b.load(b.gep(tab, [ir.Constant(I32, 0), b.add(b.mul(ln, ir.Constant(I64, ne)),
                                                                   ir.Constant(I64, e))]))  # fmt: skip
                f = b.fptrunc(b.load(b.gep(mat, [ir.Constant(I32, 0), at])), F32)  # to nearest even
                if typ == "f16":  # then once more (NaN: 0x7fff)
                    v = b.shl(self._f2h(f), ir.Constant(I32, 16 * (e % per)))
                else:
                    nan = b.fcmp_unordered("uno", f, f)
                    v = b.select(nan, ir.Constant(I32, 0x7FFFFFFF), b.bitcast(f, I32))
                q = e // per
                regs[q] = v if regs[q] is None else b.or_(regs[q], v)
            for q, v in enumerate(regs):
                st(first + q, ln, b.zext(v, I64))

        each(lane)
