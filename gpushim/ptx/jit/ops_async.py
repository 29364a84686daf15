"""cp.async in the compiling engine (a mixin of codegen.Codegen), as the interpreter's ops_mem.compile_cp_async
performs it: the copy is done when the instruction runs (reading the destination before cp.async.wait_* is
undefined, so an eager copy is one valid execution) with the checks of a vector load of cp-size bytes from
global memory and a vector store of them to shared memory; commit_group / wait_group / wait_all do nothing.
cp.async.mbarrier.arrive: ops_mbarrier.py; the bulk forms are left to the interpreter."""

from __future__ import annotations

from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import I64, JitUnsupported
from gpushim.ptx.nodes import Imm, Instr


class AsyncCopyOps:
    def op_cp(self, ins: Instr) -> None:
        p = ins.parts
        if len(p) < 3 or p[1] != "async":
            raise JitUnsupported(ins.op)
        if p[2] in ("commit_group", "wait_group", "wait_all"):
            return
        if p[2] == "mbarrier":
            self.op_cp_mbarrier(ins)  # ops_mbarrier.py
            return
        if "bulk" in p or p[2] not in ("ca", "cg") or len(ins.args) not in (3, 4) or not isinstance(ins.args[2], Imm):
            raise JitUnsupported(ins.op)
        size = int(ins.args[2].value)
        src_size = ins.args[3] if len(ins.args) > 3 else None
        fixed = int(src_size.value) if isinstance(src_size, Imm) else size
        unit = 4 if size % 4 == 0 and fixed % 4 == 0 and not (src_size is not None and not isinstance(src_size, Imm)) \
            else 1  # fmt: skip
        b = self.b
        what = f"{ins.op} (line {ins.line})"
        keep = None
        if src_size is not None and not isinstance(src_size, Imm):
            keep = b.zext(self.read(src_size, "u32"), I64)
        elif fixed < size:
            keep = ir.Constant(I64, fixed)
        dst, src = ins.args[0], ins.args[1]
        dspace, sspace = self._resolve("shared", dst, ins), self._resolve("global", src, ins)
        _, ad = self._address(dst)
        _, asrc = self._address(src)
        ps = self._ptr(sspace, asrc, unit, size, what, False)
        if self.mode == "check":
            self._ptr(dspace, ad, unit, size, what, True)
            return
        it = ir.IntType(8 * unit)
        vals = []
        for j in range(size // unit):
            q = b.bitcast(b.gep(ps, [ir.Constant(I64, j * unit)]) if j else ps, it.as_pointer())
            v = self._tag(b.load(q, align=unit), sspace)
            if keep is not None:  # the bytes past src-size are zeros
                v = b.select(b.icmp_signed(">", keep, ir.Constant(I64, j * unit)), v, ir.Constant(it, 0))
            vals.append(v)
        pd = self._ptr(dspace, ad, unit, size, what, True)
        for j, v in enumerate(vals):
            q = b.bitcast(b.gep(pd, [ir.Constant(I64, j * unit)]) if j else pd, it.as_pointer())
            self._tag(b.store(v, q, align=unit), dspace)
