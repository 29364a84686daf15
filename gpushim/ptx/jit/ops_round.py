"""Directed rounding (.rz / .rm / .rp) of f32 add/sub/mul/fma/div and f64 add/sub in the compiling engine (a
mixin of codegen.Codegen), computed the way the interpreter's fexact.py computes them, in software: the exact
result as an f64 pair (TwoSum; products of f32 values are exact in f64; a quotient's remainder from an f64
fma), squeezed into one f64 by rounding to odd, then rounded to f32 in the mode (53 >= 2*24+2), or, in f64,
the RN result moved one step when the error term points the other way. f64 mul/div/fma/rcp/sqrt and f32 sqrt:
ops_hwround.py."""

from __future__ import annotations

from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import F32, F64, I1, I32, I64, JitUnsupported
from gpushim.ptx.nodes import Instr

DIRECTED = frozenset({"rz", "rm", "rp"})


class DirectedOps:
    def _mode_of(self, m: set[str]) -> str:
        d = m & DIRECTED
        return next(iter(d)) if d else "rn"

    def _finite(self, x):
        b = self.b
        return b.fcmp_ordered("<", self._fabs(x), ir.Constant(x.type, float("inf")))

    def _next(self, x, toward: str):
        """nextafter(x, 0 / -inf / +inf) on the bits (x not NaN)"""
        b = self.b
        it = I32 if x.type == F32 else I64
        bits = b.bitcast(x, it)
        one = ir.Constant(it, 1)
        sign = ir.Constant(it, 1 << (it.width - 1))
        zero = b.fcmp_ordered("==", x, ir.Constant(x.type, 0.0))
        neg = b.icmp_signed("<", bits, ir.Constant(it, 0))
        if toward == "0":
            return b.select(zero, x, b.bitcast(b.sub(bits, one), x.type))
        up = toward == "+"
        away = b.xor(neg, ir.Constant(I1, 0 if up else 1))  # the magnitude grows: +inf for positives
        stepped = b.select(away, b.sub(bits, one), b.add(bits, one))
        tiny = one if up else b.or_(sign, one)
        return b.bitcast(b.select(zero, tiny, stepped), x.type)

    def _two_sum(self, a, c):
        b = self.b
        s = b.fadd(a, c)
        bb = b.fsub(s, a)
        e = b.fadd(b.fsub(a, b.fsub(s, bb)), b.fsub(c, bb))
        return s, e

    def _to_odd(self, s, e):
        """the f64 nearest to s + e rounded to odd, given s = RN(s + e) (fexact.round_to_odd)"""
        b = self.b
        bits = b.bitcast(s, I64)
        zero = ir.Constant(F64, 0.0)
        even = b.icmp_unsigned("==", b.and_(bits, ir.Constant(I64, 1)), ir.Constant(I64, 0))
        need = b.and_(b.and_(b.fcmp_unordered("!=", e, zero), even), self._finite(s))
        away = b.icmp_unsigned("==", b.fcmp_ordered(">", e, zero), b.fcmp_ordered(">", s, zero))
        adj = b.select(away, ir.Constant(I64, 1), ir.Constant(I64, -1))
        return b.bitcast(b.select(need, b.add(bits, adj), bits), F64)

    def _f64_to_f32(self, v, mode: str):
        """fexact.f64_to_f32 (directed: a helper, pure.py)"""
        if mode == "rn":
            return self.b.fptrunc(v, F32)
        return self._pure(("f64_to_f32", mode), F32, [F64], lambda x: self._f64_to_f32_directed(x, mode), [v])

    def _f64_to_f32_directed(self, v, mode: str):
        b = self.b
        r = b.fptrunc(v, F32)
        r64 = b.fpext(r, F64)
        if mode == "rz":
            fix = b.fcmp_ordered(">", self._fabs(r64), self._fabs(v))
            return b.select(fix, self._next(r, "0"), r)
        if mode == "rm":
            return b.select(b.fcmp_ordered(">", r64, v), self._next(r, "-"), r)
        return b.select(b.fcmp_ordered("<", r64, v), self._next(r, "+"), r)

    def _f64_directed(self, s, e, mode: str):
        """fexact.f64_directed: the directed rounding of s + e, s = RN of it (a helper, pure.py)"""
        return self._pure(("f64_directed", mode), F64, [F64, F64], lambda x, y: self._f64_directed_inline(x, y, mode),
                          [s, e])  # fmt: skip

    def _f64_directed_inline(self, s, e, mode: str):
        b = self.b
        zero = ir.Constant(F64, 0.0)
        if mode == "rz":
            fix = b.and_(b.fcmp_unordered("!=", e, zero),
                         b.icmp_unsigned("!=", b.fcmp_ordered(">", e, zero), b.fcmp_ordered(">", s, zero)))  # fmt: skip
            return b.select(fix, self._next(s, "0"), s)
        if mode == "rm":
            return b.select(b.fcmp_ordered("<", e, zero), self._next(s, "-"), s)
        return b.select(b.fcmp_ordered(">", e, zero), self._next(s, "+"), s)

    def _rm_zero(self, r, a, c):
        """fexact._rm_zero: an exact zero sum of operands not both +0 is -0 when rounding toward -inf"""
        b = self.b
        it = I32 if r.type == F32 else I64

        def pos_zero(x):
            xt = I32 if x.type == F32 else I64
            return b.icmp_unsigned("==", b.bitcast(x, xt), ir.Constant(xt, 0))

        z = b.and_(b.fcmp_ordered("==", r, ir.Constant(r.type, 0.0)), b.not_(b.and_(pos_zero(a), pos_zero(c))))
        return b.select(z, b.bitcast(ir.Constant(it, 1 << (it.width - 1)), r.type), r)

    def _no_nan_err(self, e):
        b = self.b
        return b.select(self._finite(e), e, ir.Constant(F64, 0.0))

    def _directed(self, ins: Instr, kind: str, typ: str, m: set[str], args) -> None:
        """add/sub/mul/div (kind) or fma in a directed mode; wrapped in .ftz/.sat/NaN rules like the others"""
        mode = self._mode_of(m)
        if typ == "f64" and kind not in ("add", "sub"):  # on the FPU's rounding mode: ops_hwround.py
            return self._fwrap(ins, typ, m, args, lambda *xs: self._hw_f64(kind, mode, xs))

        def f32(*xs):
            b = self.b  # (the helper's builder when outlined: pure.py)
            w = [b.fpext(x, F64) for x in xs]
            if kind in ("add", "sub"):
                a, c = w[0], (b.fneg(w[1]) if kind == "sub" else w[1])
                s, e = self._two_sum(a, c)
                r = self._f64_to_f32(self._to_odd(s, self._no_nan_err(e)), mode)
                return self._rm_zero(r, a, c) if mode == "rm" else r
            if kind == "mul":
                return self._f64_to_f32(b.fmul(w[0], w[1]), mode)
            if kind == "div":
                q = b.fdiv(w[0], w[1])
                rem = b.call(self.i_fma64, [b.fneg(q), w[1], w[0]])
                e = b.select(self._finite(rem), b.fdiv(rem, w[1]), ir.Constant(F64, 0.0))
                return self._f64_to_f32(self._to_odd(q, e), mode)
            p = b.fmul(w[0], w[1])  # fma: the product is exact
            s, e = self._two_sum(p, w[2])
            v = b.select(self._finite(s), self._to_odd(s, self._no_nan_err(e)), b.fadd(p, w[2]))
            r = self._f64_to_f32(v, mode)
            return self._rm_zero(r, p, w[2]) if mode == "rm" else r

        def f64(x, y):
            b = self.b
            c = b.fneg(y) if kind == "sub" else y
            s, e = self._two_sum(x, c)
            # overflowed from finite operands: the exact sum lies below s's infinity (fexact._err)
            over = b.and_(b.and_(self._finite(x), self._finite(y)), b.fcmp_ordered("==", self._fabs(s),
                                                                                     ir.Constant(F64, float("inf"))))
            r = self._f64_directed(s, b.select(over, b.fneg(s), self._no_nan_err(e)), mode)
            r = self._rm_zero(r, x, c) if mode == "rm" else r
            # a NaN result as x86 (numpy) makes it from x + (-y): LLVM may fold x + fneg(y) into x - y, whose
            # NaN keeps y's sign; f64 NaNs are not canonicalised, so the sign must be the interpreter's
            cb = b.bitcast(y, I64)
            if kind == "sub":
                cb = b.xor(cb, ir.Constant(I64, 1 << 63))
            return self._x86_nan(r, [(self._isnan(x), b.bitcast(x, I64)), (self._isnan(y), cb)])

        core, ft = (f32, F32) if typ == "f32" else (f64, F64)

        def pure(*xs):
            return self._pure(("directed", kind, typ, mode), ft, [ft] * len(xs), core, xs)

        self._fwrap(ins, typ, m, args, pure)

    def _cvt_directed(self, ins: Instr) -> None:
        """cvt.{rz,rm,rp} to f32/f64 from f32/f64 or integers, as ops_cvt.py (f2f, int_to_float) computes it"""
        from gpushim.ptx.types import TYPES

        p = ins.parts
        types = [x for x in p[1:] if x in TYPES]
        m = set(p[1:]) - set(types)
        if len(types) != 2 or len(ins.args) != 2 or m - (DIRECTED | {"ftz", "sat"}) or len(m & DIRECTED) != 1:
            raise JitUnsupported(ins.op)
        dtyp, atyp = types
        mode = self._mode_of(m)
        ints = ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "b8", "b16", "b32", "b64")
        if dtyp not in ("f32", "f64") or (atyp not in ("f32", "f64") and atyp not in ints):
            raise JitUnsupported(ins.op)
        b = self.b
        a = self.read(ins.args[1], atyp)
        if atyp in ("f32", "f64"):
            if "ftz" in m and atyp == "f32":
                a = self._ftz(a)
            x = b.fpext(a, F64) if atyp == "f32" else a
            if dtyp == "f64":
                r = x
            else:
                r = self._canon(self._f64_to_f32(x, mode))
                if "ftz" in m:
                    r = self._ftz(r)
            if "sat" in m:
                r = self._sat(r)
            self.write(ins.args[0], r, dtyp)
            return
        signed = atyp[0] == "s"
        if a.type.width <= 32:
            x = b.sitofp(a, F64) if signed else b.uitofp(a, F64)  # exact
            r = x if dtyp == "f64" else self._f64_to_f32(x, mode)
        else:
            r = self._pure(("cvt_int64", signed, dtyp, mode), F64 if dtyp == "f64" else F32, [a.type],
                           lambda x: self._int64_directed(x, signed, dtyp, mode), [a])  # fmt: skip
        if "sat" in m:
            r = self._sat(r)
        self.write(ins.args[0], r, dtyp)

    def _int64_directed(self, a, signed: bool, dtyp: str, mode: str):
        """A 64-bit integer to f32/f64 in a directed mode (ops_cvt.int_to_float)"""
        b = self.b
        top = ir.Constant(F64, 2.0**63 if signed else 2.0**64)

        def err(r):  # the sign of q - r (as -1, 0, 1: what the directed roundings need), in integers
            ri = b.fptosi(r, I64) if signed else b.fptoui(r, I64)
            cmp = b.icmp_signed if signed else b.icmp_unsigned
            one, zero = ir.Constant(F64, 1.0), ir.Constant(F64, 0.0)
            e = b.select(cmp(">", a, ri), one, b.select(cmp("<", a, ri), ir.Constant(F64, -1.0), zero))
            return b.select(b.fcmp_ordered(">=", r, top), ir.Constant(F64, -1.0), e)  # r past the type: above q

        rn = b.sitofp(a, F64) if signed else b.uitofp(a, F64)
        if dtyp == "f64":
            r = self._f64_directed(rn, err(rn), mode)
        else:  # toward zero in f64, to odd, then the directed rounding to f32 (int_to_float)
            rz = self._f64_directed(rn, err(rn), "rz")
            inexact = b.fcmp_ordered("!=", err(rz), ir.Constant(F64, 0.0))
            bits = b.bitcast(rz, I64)
            even = b.icmp_unsigned("==", b.and_(bits, ir.Constant(I64, 1)), ir.Constant(I64, 0))
            odd = b.bitcast(b.add(bits, ir.Constant(I64, 1)), F64)  # one step away from zero
            r = self._f64_to_f32(b.select(b.and_(inexact, even), odd, rz), mode)
        return r
