"""SIMD video instructions in the compiling engine (a mixin of codegen.Codegen): vadd4/2, vsub4/2, vabsdiff4/2,
vmin4/2, vmax4/2, vavrg4/2 with .sat and the .add accumulation, no lane selectors or masks — the forms the
interpreter runs (../ops_simd.py), computed as it computes them: each lane sign- or zero-extended by its
operand's type, the lane operation in 64 bits, .sat clamping to the lane range of d's type. Also min/max
(.relu) on packed 16-bit integers (.u16x2, .s16x2)."""

from __future__ import annotations

from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import I32, I64, JitUnsupported
from gpushim.ptx.nodes import Instr, Reg

VIDEO_OPS = frozenset(f"v{o}{n}" for o in ("add", "sub", "absdiff", "min", "max", "avrg") for n in (2, 4))
PACKED_INT_TYPES = frozenset({"u16x2", "s16x2"})  # min/max on packed halves (../ops_simd.py compile_packed_minmax)


class VideoOps:
    def _video(self, ins: Instr) -> None:
        parts = ins.parts
        base = parts[0]
        op, lanes = base[1:-1], int(base[-1])
        types = [p for p in parts[1:] if p in ("u32", "s32")]
        if len(types) != 3 or set(parts[1:]) - {"u32", "s32", "sat", "add"}:
            raise JitUnsupported(ins.op)
        if len(ins.args) != 4 or not all(isinstance(a, Reg) for a in ins.args[:3]):
            raise JitUnsupported(f"{ins.op} with lane selectors or masks")
        dtyp, atyp, btyp = types
        sat, acc = "sat" in parts, "add" in parts[1:]
        width = 32 // lanes
        mask = (1 << width) - 1
        lo_d, hi_d = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if dtyp[0] == "s" else (0, mask)
        b = self.b

        def k(v):
            return ir.Constant(I64, v)

        a, bb = (self.read(x, "b32") for x in ins.args[1:3])
        total = b.zext(self.read(ins.args[3], "b32"), I64) if acc else k(0)
        for i in range(lanes):
            x, y = self._lane(a, atyp, i, width), self._lane(bb, btyp, i, width)  # ops_intx.py
            if op == "add":
                r = b.add(x, y)
            elif op == "sub":
                r = b.sub(x, y)
            elif op == "absdiff":
                d = b.sub(x, y)
                r = b.select(b.icmp_signed("<", d, k(0)), b.sub(k(0), d), d)
            elif op == "min":
                r = b.select(b.icmp_signed("<", x, y), x, y)
            elif op == "max":
                r = b.select(b.icmp_signed(">", x, y), x, y)
            else:  # avrg: rounded up
                r = b.ashr(b.add(b.add(x, y), k(1)), k(1))
            if sat:
                r = b.select(b.icmp_signed("<", r, k(lo_d)), k(lo_d), r)
                r = b.select(b.icmp_signed(">", r, k(hi_d)), k(hi_d), r)
            total = b.add(total, r) if acc else b.or_(total, b.shl(b.and_(r, k(mask)), k(width * i)))
        self.write(ins.args[0], b.trunc(total, I32), "b32")

    def _packed_minmax(self, ins: Instr) -> None:
        """min/max{.relu}.{u16x2,s16x2} d, a, b: per 16-bit half; .relu (only .s16x2) clamps negatives to 0"""
        p = ins.parts
        if len(p) not in (2, 3) or p[-1] not in PACKED_INT_TYPES or (len(p) == 3 and p[1:] != ["relu", "s16x2"]):
            raise JitUnsupported(ins.op)
        if len(ins.args) != 3:
            raise JitUnsupported(ins.op)
        b = self.b
        t = "s32" if p[-1] == "s16x2" else "u32"
        a, c = (self.read(x, "b32") for x in ins.args[1:3])
        cmp = "<" if p[0] == "min" else ">"
        out = ir.Constant(I64, 0)
        for i in range(2):
            x, y = self._lane(a, t, i, 16), self._lane(c, t, i, 16)  # ops_intx.py
            r = b.select(b.icmp_signed(cmp, x, y), x, y)
            if len(p) == 3:
                r = b.select(b.icmp_signed("<", r, ir.Constant(I64, 0)), ir.Constant(I64, 0), r)
            out = b.or_(out, b.shl(b.and_(r, ir.Constant(I64, 0xFFFF)), ir.Constant(I64, 16 * i)))
        self.write(ins.args[0], b.trunc(out, I32), "b32")
