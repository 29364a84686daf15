"""dp4a / dp2a (integer dot products of packed bytes and halves), bmsk and fns in the compiling engine (a mixin of
codegen.Codegen), computed as the interpreter's ops_bits.py computes them."""

from __future__ import annotations

from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import I32, I64, JitUnsupported
from gpushim.ptx.nodes import Instr

_T = ("u32", "s32")


class IntExtraOps:
    def _lane(self, x, t: str, k: int, width: int):
        """lane k of width bits of x (i32), sign- or zero-extended to i64 by type t"""
        b = self.b
        v = b.trunc(b.lshr(x, ir.Constant(I32, width * k)), ir.IntType(width))
        return b.sext(v, I64) if t[0] == "s" else b.zext(v, I64)

    def _dp(self, ins: Instr, two: bool) -> None:
        p = ins.parts
        hi = "hi" in p
        mods = set(p[1:-2]) - ({"hi", "lo"} if two else set())
        if len(p) < 3 or p[-2] not in _T or p[-1] not in _T or mods or (two and "hi" not in p and "lo" not in p):
            raise JitUnsupported(ins.op)
        ta, tb = p[-2], p[-1]
        b = self.b
        a, bb, c = (self.read(x, "b32") for x in ins.args[1:4])
        s = b.zext(c, I64)
        if two:
            pairs = [(self._lane(a, ta, k, 16), self._lane(bb, tb, k + (2 if hi else 0), 8)) for k in range(2)]
        else:
            pairs = [(self._lane(a, ta, k, 8), self._lane(bb, tb, k, 8)) for k in range(4)]
        for x, y in pairs:
            s = b.add(s, b.mul(x, y))
        self.write(ins.args[0], b.trunc(s, I32), "b32")

    def op_dp4a(self, ins: Instr) -> None:
        self._dp(ins, False)

    def op_dp2a(self, ins: Instr) -> None:
        self._dp(ins, True)

    def op_bmsk(self, ins: Instr) -> None:
        p = ins.parts
        if p[1:] not in (["clamp", "b32"], ["wrap", "b32"]):
            raise JitUnsupported(ins.op)
        b = self.b

        def k(v):
            return ir.Constant(I64, v)

        a, n = (b.zext(self.read(x, "u32"), I64) for x in ins.args[1:3])
        a1, b1 = b.and_(a, k(31)), b.and_(n, k(31))
        full = k(0xFFFFFFFF)
        mask0 = b.and_(b.shl(full, a1), full)
        s = b.add(a1, b1)
        mask1 = b.and_(b.shl(full, b.select(b.icmp_signed("<", s, k(31)), s, k(31))), full)
        over = b.icmp_signed(">=", s, k(32))
        if p[1] == "clamp":
            abig = b.icmp_unsigned(">=", a, k(32))
            mask0 = b.select(abig, k(0), mask0)
            over = b.or_(over, b.or_(abig, b.icmp_unsigned(">=", n, k(32))))
        mask1 = b.select(over, k(0), b.select(b.icmp_signed("==", b1, k(0)), full, mask1))
        self.write(ins.args[0], b.trunc(b.and_(mask0, b.xor(mask1, k(-1))), I32), "b32")

    def op_fns(self, ins: Instr) -> None:
        """fns.b32 d, mask, base, offset: the position of the offset-th set bit of mask counting up from base
        (offset > 0) or down (offset < 0), base itself included; 0xffffffff when there is none (ops_bits.py)"""
        if ins.parts[1:] != ["b32"]:
            raise JitUnsupported(ins.op)
        args = [self.read(x, t) for x, t in zip(ins.args[1:4], ("b32", "u32", "s32"), strict=True)]
        self.write(ins.args[0], self._pure(("fns",), I32, [I32] * 3, self._fns, args), "b32")

    def _fns(self, mask, base, offset):
        b = self.b

        def k(v):
            return ir.Constant(I64, v)

        def popc(x):
            return b.call(self.i_ctpop[64], [x])

        mk, bs, o = b.zext(mask, I64), b.and_(b.zext(base, I64), k(31)), b.sext(offset, I64)
        up = b.icmp_signed(">", o, k(0))
        # the candidate bits: base and above, or base and below; the wanted one as an index n from the bottom
        m = b.select(up, b.and_(mk, b.shl(k(0xFFFFFFFF), bs)), b.and_(mk, b.sub(b.shl(k(2), bs), k(1))))
        cnt = popc(m)
        need = b.select(up, o, b.sub(k(0), o))
        n = b.select(up, o, b.add(b.sub(cnt, need), k(1)))
        r = k(0)
        for w in (16, 8, 4, 2, 1):  # binary search: keep the n-th set bit above r
            c = popc(b.and_(b.lshr(m, r), k((1 << w) - 1)))
            more = b.icmp_signed(">", n, c)
            r = b.select(more, b.add(r, k(w)), r)
            n = b.select(more, b.sub(n, c), n)
        found = b.icmp_signed("<=", need, cnt)
        zero = b.icmp_unsigned("!=", b.and_(b.lshr(mk, bs), k(1)), k(0))  # offset 0: base if its bit is set
        none = k(0xFFFFFFFF)
        r = b.select(b.icmp_signed("==", o, k(0)), b.select(zero, bs, none), b.select(found, r, none))
        return b.trunc(r, I32)

    def op_szext(self, ins: Instr) -> None:
        """szext.{clamp,wrap}.{s32,u32} d, a, b: a's b lowest bits, sign- or zero-extended (ops_bits.py)."""
        p = ins.parts
        if len(p) != 3 or p[1] not in ("clamp", "wrap") or p[2] not in ("s32", "u32"):
            raise JitUnsupported(ins.op)
        b = self.b

        def k(v):
            return ir.Constant(I64, v)

        a = b.zext(self.read(ins.args[1], "b32"), I64)
        n = b.zext(self.read(ins.args[2], "u32"), I64)
        n = b.select(b.icmp_unsigned("<", n, k(32)), n, k(32)) if p[1] == "clamp" else b.and_(n, k(31))
        top = b.shl(k(1), n)
        low = b.and_(a, b.sub(top, k(1)))
        if p[2] == "s32":
            nz = b.icmp_unsigned("!=", n, k(0))
            sign = b.and_(b.lshr(low, b.select(nz, b.sub(n, k(1)), k(0))), k(1))
            neg = b.and_(b.icmp_unsigned("!=", sign, k(0)), b.icmp_unsigned("<", n, k(32)))
            low = b.select(neg, b.sub(low, top), low)
        self.write(ins.args[0], b.trunc(low, I32), "b32")  # n == 0: low is 0

    # -- carry chains: add.cc, addc, sub.cc, subc, mad.cc, madc (ops_int.py's hidden %cc register) ---------
    def _cc(self):
        """the carry flag (i1), a hidden register of the thread, 0 at its start (not saved across barriers:
        PTX keeps no carry across them)"""
        if "%cc" not in self.regs:
            b = self.b
            here = b.block
            b.position_at_start(self.f.entry_basic_block)
            a = b.alloca(ir.IntType(1), name="r_cc")
            b.store(ir.Constant(ir.IntType(1), 0), a)
            b.position_at_end(here)
            self.regs["%cc"] = (a, ir.IntType(1))
        return self.regs["%cc"][0]

    def _carry(self, ins: Instr) -> None:
        p = ins.parts
        base = p[0]
        typ = p[-1]
        if typ not in ("u32", "s32", "u64", "s64", "b32", "b64"):
            raise JitUnsupported(ins.op)
        mods = set(p[1:-1])
        uses = base in ("addc", "subc", "madc")
        sets = "cc" in mods
        b = self.b
        w = ir.IntType(32 if typ.endswith("32") else 64)
        cin = b.zext(b.load(self._cc()), w) if uses else ir.Constant(w, 0)
        has_cin = b.icmp_unsigned("!=", cin, ir.Constant(w, 0))
        if base in ("add", "addc", "sub", "subc"):
            if mods - {"cc"}:
                raise JitUnsupported(ins.op)
            a, c = (self.read(x, typ) for x in ins.args[1:3])
            if base in ("sub", "subc"):
                d = b.sub(b.sub(a, c), cin)
                cout = b.or_(b.icmp_unsigned("<", a, c), b.and_(b.icmp_unsigned("==", a, c), has_cin))  # borrow
            else:
                d = b.add(b.add(a, c), cin)
                cout = b.or_(b.icmp_unsigned("<", d, a), b.and_(b.icmp_unsigned("==", d, a), has_cin))
        else:  # mad.lo/.hi.cc, madc.lo/.hi(.cc)
            half = mods & {"lo", "hi"}
            if mods - {"cc", "lo", "hi"} or len(half) != 1:
                raise JitUnsupported(ins.op)
            a, c, e = (self.read(x, typ) for x in ins.args[1:4])
            if "lo" in half:
                prod = b.mul(a, c)
            else:
                wide = ir.IntType(2 * w.width)
                ext = b.sext if typ[0] == "s" else b.zext
                prod = b.trunc(b.lshr(b.mul(ext(a, wide), ext(c, wide)), ir.Constant(wide, w.width)), w)
            d = b.add(b.add(prod, e), cin)
            cout = b.or_(b.icmp_unsigned("<", d, prod), b.and_(b.icmp_unsigned("==", d, prod), has_cin))
        self.write(ins.args[0], d, typ)
        if sets:
            b.store(cout, self._cc())

    def op_shf(self, ins: Instr) -> None:
        """shf.{l,r}.{clamp,wrap}.b32 d, a, b, c: the 64-bit b:a shifted by c, 32 bits of it (ops_bits.py)"""
        p = ins.parts
        if len(p) != 4 or p[1] not in ("l", "r") or p[2] not in ("clamp", "wrap") or p[3] != "b32":
            raise JitUnsupported(ins.op)
        b = self.b
        lo, hi = (b.zext(self.read(x, "b32"), I64) for x in ins.args[1:3])
        c = b.zext(self.read(ins.args[3], "u32"), I64)
        if p[2] == "clamp":
            n = b.select(b.icmp_unsigned("<", c, ir.Constant(I64, 32)), c, ir.Constant(I64, 32))
        else:
            n = b.and_(c, ir.Constant(I64, 31))
        v = b.or_(b.shl(hi, ir.Constant(I64, 32)), lo)
        r = b.lshr(b.shl(v, n), ir.Constant(I64, 32)) if p[1] == "l" else b.lshr(v, n)
        self.write(ins.args[0], b.trunc(r, I32), "b32")
