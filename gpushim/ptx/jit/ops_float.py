"""Code generation of floating-point arithmetic and comparisons (a mixin of codegen.Codegen): the
interpreter's rounding, NaN, .ftz and .sat rules."""

from __future__ import annotations

from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import (
    _CMP_F,
    _CMP_I,
    F32,
    F64,
    I32,
    I64,
    JitUnsupported,
    _ftype,
    _itype,
)
from gpushim.ptx.jit.ops_round import DIRECTED
from gpushim.ptx.nodes import Instr, PredPair


class FloatOps:
    # floating point
    def _canon(self, r):
        if r.type != F32:
            return r
        b = self.b
        # on the bits: LLVM folds select(isnan(r), NaN constant, r) to r (any NaN may stand for another)
        bits = b.bitcast(r, I32)
        nan = b.icmp_unsigned(">", b.and_(bits, ir.Constant(I32, 0x7FFFFFFF)), ir.Constant(I32, 0x7F800000))
        return b.bitcast(b.select(nan, ir.Constant(I32, 0x7FFFFFFF), bits), F32)

    def _ftz(self, x):
        b = self.b
        tiny = b.fcmp_ordered("<", self._fabs(x), b.bitcast(ir.Constant(I32, 0x00800000), F32))
        return b.select(tiny, b.bitcast(b.and_(b.bitcast(x, I32), ir.Constant(I32, 0x80000000)), F32), x)

    def _fabs(self, x):
        b = self.b
        it = I32 if x.type == F32 else I64
        return b.bitcast(b.and_(b.bitcast(x, it), ir.Constant(it, (1 << (it.width - 1)) - 1)), x.type)

    def _sat(self, x):
        b = self.b
        zero, one = ir.Constant(x.type, 0.0), ir.Constant(x.type, 1.0)
        x = b.select(b.fcmp_unordered("uno", x, x), zero, x)
        x = b.select(b.fcmp_ordered("<", x, zero), zero, x)
        return b.select(b.fcmp_ordered(">", x, one), one, x)

    def _fwrap(self, ins: Instr, typ: str, m: set[str], args, f, canonical: bool = True) -> None:
        ftz = "ftz" in m and typ == "f32"
        if ftz:
            args = [self._ftz(a) for a in args]
        r = f(*args)
        if canonical:
            r = self._canon(r)
        if ftz:
            r = self._ftz(r)
        if "sat" in m:
            r = self._sat(r)
        self.write(ins.args[0], r, typ)

    def _farith(self, ins: Instr, kind: str) -> None:
        typ = _itype(ins)
        ft = _ftype(typ)
        allowed = {"rn", "ftz", "sat"} | ({"approx", "full"} if kind == "div" else set())
        m = self._fmods(ins, allowed | DIRECTED)
        args = [self.read(a, typ) for a in ins.args[1:3]]
        if m & DIRECTED:  # ops_round.py
            return self._directed(ins, kind, typ, m, args)
        b = self.b
        f = {"add": b.fadd, "sub": b.fsub, "mul": b.fmul, "div": b.fdiv}[kind]
        del ft
        self._fwrap(ins, typ, m, args, f)

    def op_fma(self, ins: Instr) -> None:
        typ = _itype(ins)
        _ftype(typ)
        m = self._fmods(ins, {"rn", "ftz", "sat"} | DIRECTED)
        args = [self.read(a, typ) for a in ins.args[1:4]]
        if m & DIRECTED:  # ops_round.py
            return self._directed(ins, "fma", typ, m, args)
        i = self.i_fma32 if typ == "f32" else self.i_fma64
        if ins.parts[0] == "mad" and typ == "f64" and "rn" not in m:
            raise JitUnsupported(ins.op)
        self._fwrap(ins, typ, m, args, lambda a, c, d: self.b.call(i, [a, c, d]))

    def _fabsneg(self, ins: Instr, is_abs: bool) -> None:
        typ = _itype(ins)
        m = self._fmods(ins, {"ftz"})
        a = self.read(ins.args[1], typ)
        b = self.b
        it = I32 if typ == "f32" else I64
        sign = ir.Constant(it, 1 << (it.width - 1))

        def f(x):
            bits = b.bitcast(x, it)
            return b.bitcast(b.and_(bits, b.not_(sign)) if is_abs else b.xor(bits, sign), x.type)

        self._fwrap(ins, typ, m, [a], f, canonical=False)

    def _fminmax(self, ins: Instr, is_min: bool) -> None:
        typ = _itype(ins)
        m = self._fmods(ins, {"ftz", "NaN"})
        args = [self.read(a, typ) for a in ins.args[1:3]]
        b = self.b
        it = I32 if typ == "f32" else I64

        def f(x, y):
            xn = b.fcmp_unordered("uno", x, x)
            yn = b.fcmp_unordered("uno", y, y)
            pick = b.fcmp_ordered("<" if is_min else ">", x, y)
            r = b.select(pick, x, y)
            both_zero = b.and_(
                b.fcmp_ordered("==", x, ir.Constant(x.type, 0.0)), b.fcmp_ordered("==", y, ir.Constant(x.type, 0.0))
            )
            xb, yb = b.bitcast(x, it), b.bitcast(y, it)
            zbits = b.bitcast(b.or_(xb, yb) if is_min else b.and_(xb, yb), x.type)
            r = b.select(both_zero, zbits, r)
            if "NaN" in m:
                return b.select(xn, x, b.select(yn, y, r))
            return b.select(xn, y, b.select(yn, x, r))

        self._fwrap(ins, typ, m, args, f)

    def op_copysign(self, ins: Instr) -> None:
        typ = _itype(ins)
        _ftype(typ)
        self._fmods(ins, set())
        a, c = (self.read(x, typ) for x in ins.args[1:3])
        b = self.b
        it = I32 if typ == "f32" else I64
        sign = ir.Constant(it, 1 << (it.width - 1))
        bits = b.or_(b.and_(b.bitcast(c, it), b.not_(sign)), b.and_(b.bitcast(a, it), sign))  # |c| with a's sign
        self.write(ins.args[0], b.bitcast(bits, c.type), typ)

    def op_sqrt(self, ins: Instr) -> None:
        typ = _itype(ins)
        _ftype(typ)
        m = self._fmods(ins, {"rn", "approx", "ftz"} | DIRECTED)
        i = self.i_sqrt32 if typ == "f32" else self.i_sqrt64
        f = lambda a: self.b.call(i, [a])  # noqa: E731
        if m & DIRECTED:  # on the FPU's rounding mode (ops_hwround.py): the correctly rounded root, as fexact
            if "approx" in m:
                raise JitUnsupported(ins.op)
            mode = self._mode_of(m)
            f = lambda a: self._hw("sqrt", F32, mode, [a]) if typ == "f32" else self._hw_f64("sqrt", mode, [a])  # noqa: E731
        self._fwrap(ins, typ, m, [self.read(ins.args[1], typ)], f)

    def op_rcp(self, ins: Instr) -> None:
        typ = _itype(ins)
        ft = _ftype(typ)
        m = self._fmods(ins, {"rn", "approx", "ftz"} | DIRECTED)
        b = self.b
        if "approx" in m and typ == "f32":
            f = lambda a: b.fptrunc(b.fdiv(ir.Constant(F64, 1.0), b.fpext(a, F64)), F32)  # noqa: E731
        elif m & DIRECTED:  # the f64 reciprocal (within 2^-48 relative of no f32) rounded in the mode: ops_float.py
            if "approx" in m:
                raise JitUnsupported(ins.op)
            mode = self._mode_of(m)
            if typ == "f32":
                f = lambda a: self._f64_to_f32(b.fdiv(ir.Constant(F64, 1.0), b.fpext(a, F64)), mode)  # noqa: E731
            else:  # on the FPU's rounding mode: ops_hwround.py
                f = lambda a: self._hw_f64("rcp", mode, [a])  # noqa: E731
        else:
            f = lambda a: b.fdiv(ir.Constant(ft, 1.0), a)  # noqa: E731
        self._fwrap(ins, typ, m, [self.read(ins.args[1], typ)], f)

    def op_rsqrt(self, ins: Instr) -> None:
        typ = _itype(ins)
        ft = _ftype(typ)
        m = self._fmods(ins, {"approx", "ftz"})
        b = self.b
        x64 = (lambda a: b.fpext(a, F64)) if typ == "f32" else (lambda a: a)
        back = (lambda r: b.fptrunc(r, F32)) if typ == "f32" else (lambda r: r)
        f = lambda a: back(b.fdiv(ir.Constant(F64, 1.0), b.call(self.i_sqrt64, [x64(a)])))  # noqa: E731
        del ft
        self._fwrap(ins, typ, m, [self.read(ins.args[1], typ)], f)

    def _libm(self, name: str):
        """double name(double) from the C library (the interpreter computes these with numpy in f64)."""
        f = self.m.globals.get(name)
        if f is None:
            f = ir.Function(self.m, ir.FunctionType(F64, [F64]), name=name)
        return f

    def _approx(self, ins: Instr, fname: str) -> None:
        typ = _itype(ins)
        if typ != "f32":
            raise JitUnsupported(ins.op)
        m = self._fmods(ins, {"approx", "ftz"})
        b = self.b
        fn = self._libm(fname)
        f = lambda a: b.fptrunc(b.call(fn, [b.fpext(a, F64)]), F32)  # noqa: E731
        self._fwrap(ins, typ, m, [self.read(ins.args[1], typ)], f)

    def op_sin(self, ins: Instr) -> None:
        self._approx(ins, "sin")

    def op_cos(self, ins: Instr) -> None:
        self._approx(ins, "cos")

    def op_ex2(self, ins: Instr) -> None:
        self._approx(ins, "exp2")

    def op_lg2(self, ins: Instr) -> None:
        self._approx(ins, "log2")

    def op_tanh(self, ins: Instr) -> None:
        self._approx(ins, "tanh")

    def op_testp(self, ins: Instr) -> None:
        """testp.{finite,infinite,number,notanumber,normal,subnormal}.{f32,f64} p, a (ops_float.compile_testp)"""
        p = ins.parts
        if len(p) != 3 or p[2] not in ("f32", "f64"):
            raise JitUnsupported(ins.op)
        a = self.read(ins.args[1], p[2])
        b = self.b
        mag = self._fabs(a)
        inf, zero = ir.Constant(a.type, float("inf")), ir.Constant(a.type, 0.0)
        tiny = b.bitcast(ir.Constant(I32, 0x00800000), F32) if p[2] == "f32" else ir.Constant(F64, 2.0**-1022)
        test = {
            "finite": lambda: b.fcmp_ordered("<", mag, inf),
            "infinite": lambda: b.fcmp_ordered("==", mag, inf),
            "number": lambda: b.fcmp_ordered("ord", a, a),
            "notanumber": lambda: b.fcmp_unordered("uno", a, a),
            "normal": lambda: b.and_(b.fcmp_ordered("<", mag, inf), b.fcmp_ordered(">=", mag, tiny)),
            "subnormal": lambda: b.and_(b.fcmp_ordered("<", mag, tiny), b.fcmp_ordered("!=", a, zero)),
        }.get(p[1])
        if test is None:
            raise JitUnsupported(ins.op)
        self.write(ins.args[0], test(), "pred")

    # comparisons
    def op_setp(self, ins: Instr) -> None:
        parts = ins.parts
        typ = _itype(ins)
        cmpop = parts[1]
        boolop = next((p for p in parts[2:] if p in ("and", "or", "xor")), None)
        if set(parts[2:]) - {typ, boolop, "ftz"}:
            raise JitUnsupported(ins.op)
        a, c = self.read(ins.args[1], typ), self.read(ins.args[2], typ)
        t = self._compare(cmpop, typ, a, c, "ftz" in parts)
        b = self.b
        dst = ins.args[0]
        if boolop:
            pc = self.read(ins.args[3], "pred")
            comb = {"and": b.and_, "or": b.or_, "xor": b.xor}[boolop]
            p, q = comb(t, pc), comb(b.not_(t), pc)
        else:
            p, q = t, b.not_(t)
        if isinstance(dst, PredPair):
            if dst.first is not None:
                self.write(dst.first, p, "pred")
            if dst.second is not None:
                self.write(dst.second, q, "pred")
        else:
            self.write(dst, p, "pred")

    def op_set(self, ins: Instr) -> None:
        """set.cmp(.bool).dtype.stype d, a, b(, c): d is all ones (u32/s32) or 1.0 (f32) where the comparison
        (combined with c) holds, else 0 (ops_cmp.py compile_set)."""
        parts = ins.parts
        dtyp, styp = parts[-2], parts[-1]
        boolop = next((p for p in parts[2:] if p in ("and", "or", "xor")), None)
        # .ftz: subnormal f32 inputs compare as zeros of their sign (as setp; ops_cmp.py)
        if len(parts) < 4 or set(parts[2:-2]) - {boolop, "ftz"} or dtyp not in ("u32", "s32", "f32"):
            raise JitUnsupported(ins.op)
        if styp not in ("f32", "f64") and (styp[0] not in "bsu" or styp[1:] not in ("16", "32", "64")):
            raise JitUnsupported(ins.op)
        b = self.b
        t = self._compare(parts[1], styp, self.read(ins.args[1], styp), self.read(ins.args[2], styp), "ftz" in parts)
        if boolop:
            t = {"and": b.and_, "or": b.or_, "xor": b.xor}[boolop](t, self.read(ins.args[3], "pred"))
        one = 0x3F800000 if dtyp == "f32" else 0xFFFFFFFF
        self.write(ins.args[0], b.select(t, ir.Constant(I32, one), ir.Constant(I32, 0)), "b32")

    def _compare(self, cmpop: str, typ: str, a, c, ftz: bool):
        b = self.b
        if typ in ("f32", "f64"):
            if ftz and typ == "f32":
                a, c = self._ftz(a), self._ftz(c)
            if cmpop == "num":
                return b.fcmp_ordered("ord", a, c)
            if cmpop == "nan":
                return b.fcmp_unordered("uno", a, c)
            if cmpop.endswith("u") and cmpop[:-1] in _CMP_F:
                return b.fcmp_unordered(_CMP_F[cmpop[:-1]], a, c)
            if cmpop in _CMP_F:
                if cmpop == "ne":
                    return b.fcmp_ordered("!=", a, c)
                return b.fcmp_ordered(_CMP_F[cmpop], a, c)
            raise JitUnsupported(f"setp.{cmpop}")
        if typ == "pred":
            if cmpop not in ("eq", "ne"):
                raise JitUnsupported(f"setp.{cmpop}.pred")
            return b.icmp_unsigned(_CMP_I[cmpop], a, c)
        if cmpop not in _CMP_I:
            raise JitUnsupported(f"setp.{cmpop}")
        signed = typ[0] == "s" and cmpop not in ("lo", "ls", "hi", "hs")
        return (b.icmp_signed if signed else b.icmp_unsigned)(_CMP_I[cmpop], a, c)

    def op_selp(self, ins: Instr) -> None:
        typ = _itype(ins)
        a, c = self.read(ins.args[1], typ), self.read(ins.args[2], typ)
        p = self.read(ins.args[3], "pred")
        self.write(ins.args[0], self.b.select(p, a, c), typ)
