"""Half precision (.f16/.f16x2/.bf16/.bf16x2 in b16/b32 registers) in the compiling engine (a mixin of
codegen.Codegen): add, sub, mul, fma (.rn, .ftz, .sat, .relu), neg, abs, min, max (.NaN), setp, and cvt between
f32 and f16/bf16 (.rn), computed as the interpreter's ops_half.py / ops_cvt.py compute them: each lane widened
exactly to f32 (f64 for fma, rounded to odd), computed, rounded once to nearest even. The conversions are done
on the bits (no dependence on the host's F16C or on compiler-rt)."""

from __future__ import annotations

from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import F32, F64, I1, I16, I32, I64, JitUnsupported
from gpushim.ptx.nodes import Instr, PredPair

HALF_TYPES = ("f16", "f16x2", "bf16", "bf16x2")
_INTS = ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")
HALF_OPS = ("add", "sub", "mul", "fma", "mad", "neg", "abs", "min", "max", "setp")


def half_type(ins: Instr) -> str | None:
    return next((p for p in ins.parts[1:] if p in HALF_TYPES), None)


class HalfOps:
    def _k(self, v: int, t=I32):
        return ir.Constant(t, v)

    # -- conversions on the bits ----------------------------------------------------------------------------
    def _h2f(self, h, bf: bool):
        """f16/bf16 bits (i32, low 16) -> f32, exact (f16: a helper, pure.py)"""
        if bf:
            return self.b.bitcast(self.b.shl(h, self._k(16)), F32)
        return self._pure(("h2f",), F32, [I32], self._f16_to_f32, [h])

    def _f16_to_f32(self, h):
        b, k = self.b, self._k
        s = b.shl(b.and_(h, k(0x8000)), k(16))
        e = b.and_(b.lshr(h, k(10)), k(0x1F))
        m = b.and_(h, k(0x3FF))
        normal = b.or_(s, b.or_(b.shl(b.add(e, k(112)), k(23)), b.shl(m, k(13))))
        special = b.or_(s, b.or_(k(0x7F800000), b.shl(m, k(13))))
        sub = b.fmul(b.uitofp(m, F32), b.bitcast(k(0x33800000), F32))  # m * 2**-24, exact
        sub = b.or_(b.bitcast(sub, I32), s)
        return b.bitcast(b.select(b.icmp_unsigned("==", e, k(0)), sub,
                                  b.select(b.icmp_unsigned("==", e, k(31)), special, normal)), F32)  # fmt: skip

    def _f2h(self, x, nan_numpy: bool = False):
        """f32 -> f16 bits (i32), to nearest even; NaN -> 0x7fff (arithmetic) or, for cvt, numpy's rule (sign,
        quieted payload >> 13) (a helper, pure.py)"""
        return self._pure(("f2h", nan_numpy), I32, [F32], lambda y: self._f32_to_f16(y, nan_numpy), [x])

    def _f32_to_f16(self, x, nan_numpy: bool):
        b, k = self.b, self._k
        bits = b.bitcast(x, I32)
        sign = b.and_(b.lshr(bits, k(16)), k(0x8000))
        a = b.and_(bits, k(0x7FFFFFFF))
        # normal range: exponent rebased, 13 bits rounded off to nearest even (a carry may reach the exponent)
        r = b.or_(b.shl(b.sub(b.lshr(a, k(23)), k(112)), k(10)), b.and_(b.lshr(a, k(13)), k(0x3FF)))
        rem = b.and_(a, k(0x1FFF))
        up = b.or_(b.icmp_unsigned(">", rem, k(0x1000)),
                   b.and_(b.icmp_unsigned("==", rem, k(0x1000)), b.trunc(b.and_(r, k(1)), I1)))  # fmt: skip
        normal = b.add(r, b.zext(up, I32))
        # below 2**-14: a multiple of 2**-24, rounded to nearest even by the FPU (scaling by 2**24 is exact)
        sub = b.fptoui(self._roundeven(b.fmul(b.bitcast(a, F32), b.bitcast(k(0x4B800000), F32))), I32)
        v = b.select(b.icmp_unsigned("<", a, k(0x38800000)), sub, normal)
        v = b.select(b.icmp_unsigned(">=", a, k(0x477FF000)), k(0x7C00), v)  # from 65520 up: infinity
        if nan_numpy:
            # (numpy widens to f64 first, which sets the quiet bit of a signaling NaN)
            pay = b.or_(k(0x7C00), b.lshr(b.or_(b.and_(a, k(0x7FFFFF)), k(0x400000)), k(13)))
            pay = b.select(b.icmp_unsigned("==", pay, k(0x7C00)), k(0x7C01), pay)
            nan = b.or_(sign, pay)
        else:
            nan = k(0x7FFF)
        return b.select(b.icmp_unsigned(">", a, k(0x7F800000)), nan, b.or_(sign, v))

    def _cvt_f16(self, ins: Instr, dtyp: str, atyp: str, m: set[str]) -> None:
        """cvt.{rn,rz,rm,rp}(.ftz).{f16,bf16}.{f32,f64,integer types} as ops_cvt._f64_to_f16/_f64_to_bf16 (the
        source converted to f64: exactly but for 64-bit integers beyond 2**53, beyond f16's range anyway)"""
        modes = m & {"rn", "rz", "rm", "rp"}
        if dtyp not in ("f16", "bf16") or m - modes - ({"ftz"} if atyp == "f32" else set()) or len(modes) != 1:
            raise JitUnsupported(ins.op)
        mode = next(iter(modes))
        a = self.read(ins.args[1], atyp)
        if "ftz" in m:
            a = self._ftz(a)
        b = self.b
        if atyp in _INTS:
            x = b.sitofp(a, F64) if atyp[0] == "s" else b.uitofp(a, F64)
        else:
            x = b.fpext(a, F64) if atyp == "f32" else a
        bf = dtyp == "bf16"
        h = self._pure(("d2h", mode, bf), I32, [F64], lambda v: self._f64_to_half(v, mode, bf), [x])
        self.write(ins.args[0], self.b.trunc(h, I16), "b16")

    def _f64_to_half(self, x, mode: str, bf: bool):
        """f64 -> f16 / bf16 bits (i32): to nearest even through f32 rounded to odd, a directed mode one step from
        it where it lies on the wrong side; a NaN as numpy converts it (f16: sign, payload >> 42, kept a NaN;
        bf16: ops_cvt.f32_to_bf16 of the f32 NaN)"""
        b, k = self.b, self._k
        bits = b.bitcast(x, I64)
        f = self._d2f_odd(x)
        h = self._f2bf(f, True) if bf else self._f32_to_f16(f, False)
        if mode != "rn":
            v = b.fpext(self._h2f(h, bf), F64)  # exact
            if mode == "rz":  # one step toward zero: the magnitude lowers (v is not 0 where it is too far)
                h = b.select(b.fcmp_ordered(">", self._fabs(v), self._fabs(x)), b.sub(h, k(1)), h)
            else:  # toward +inf: up for a positive value, down for a negative one; from a zero, the tiniest
                up = mode == "rp"
                grow = b.xor(b.icmp_unsigned("!=", b.and_(h, k(0x8000)), k(0)), ir.Constant(I1, 1 if up else 0))
                zero = b.icmp_unsigned("==", b.and_(h, k(0x7FFF)), k(0))
                step = b.select(zero, k(0x0001 if up else 0x8001), b.select(grow, b.add(h, k(1)), b.sub(h, k(1))))
                h = b.select(b.fcmp_ordered("<" if up else ">", v, x), step, h)
        if bf:
            return h
        pay = b.add(k(0x7C00), b.trunc(b.and_(b.lshr(bits, ir.Constant(I64, 42)), ir.Constant(I64, 0x3FF)), I32))
        pay = b.select(b.icmp_unsigned("==", pay, k(0x7C00)), k(0x7C01), pay)
        sign = b.trunc(b.and_(b.lshr(bits, ir.Constant(I64, 48)), ir.Constant(I64, 0x8000)), I32)
        return b.select(self._isnan(x), b.or_(sign, pay), h)

    def _roundeven(self, x):
        return self.b.call(self.i_round["roundeven", 32], [x])

    def _f2bf(self, x, nan_numpy: bool = False):
        """f32 -> bf16 bits (i32) as ops_cvt.f32_to_bf16; NaN -> 0x7fff, or for cvt (bits >> 16) | 0x40"""
        b, k = self.b, self._k
        bits = b.bitcast(x, I32)
        r = b.lshr(b.add(b.add(bits, k(0x7FFF)), b.and_(b.lshr(bits, k(16)), k(1))), k(16))
        nan = b.or_(b.lshr(bits, k(16)), k(0x40)) if nan_numpy else k(0x7FFF)
        return b.select(b.icmp_unsigned(">", b.and_(bits, k(0x7FFFFFFF)), k(0x7F800000)), nan, r)

    def _d2f_odd(self, x):
        """f64 -> f32 rounded to odd (then one more rounding to a half format is correctly rounded; a helper)"""
        return self._pure(("d2f_odd",), F32, [F64], self._d2f_odd_inline, [x])

    def _d2f_odd_inline(self, x):
        b = self.b
        r = b.fptrunc(x, F32)
        rb = b.bitcast(r, I32)
        inexact = b.and_(b.fcmp_ordered("!=", b.fpext(r, F64), x), self._finite(x))
        even = b.icmp_unsigned("==", b.and_(rb, self._k(1)), self._k(0))
        toward_up = b.fcmp_ordered(">", x, b.fpext(r, F64))
        # one step toward x: the magnitude grows when x is farther from zero than r
        grow = b.icmp_unsigned("==", toward_up, b.icmp_signed(">=", rb, self._k(0)))
        step = b.select(grow, b.add(rb, self._k(1)), b.sub(rb, self._k(1)))
        return b.bitcast(b.select(b.and_(inexact, even), step, rb), F32)

    # -- arithmetic -----------------------------------------------------------------------------------------
    def _half(self, ins: Instr) -> None:
        base = ins.parts[0]
        typ = half_type(ins)
        m = {p for p in ins.parts[1:] if p != typ}
        if base == "setp":
            return self._half_setp(ins, typ)
        if m - {"rn", "ftz", "sat", "relu", "NaN"} or (base in ("neg", "abs") and m):
            raise JitUnsupported(ins.op)
        if "NaN" in m and base not in ("min", "max"):
            raise JitUnsupported(ins.op)
        b, k = self.b, self._k
        x2 = typ.endswith("x2")
        bf = typ.startswith("bf")
        rt = "b32" if x2 else "b16"
        n = {"neg": 1, "abs": 1, "fma": 3, "mad": 3}.get(base, 2)
        regs = [b.zext(self.read(a, rt), I32) if not x2 else self.read(a, rt) for a in ins.args[1 : 1 + n]]
        if base in ("neg", "abs"):
            mask = k(0x80008000 if x2 else 0x8000)
            r = b.xor(regs[0], mask) if base == "neg" else b.and_(regs[0], b.not_(mask))
            self.write(ins.args[0], r if x2 else b.trunc(r, I16), rt)
            return
        key = ("half", base, bf, tuple(sorted(m)))
        out = []
        for lane in range(2 if x2 else 1):
            hs = [b.and_(b.lshr(v, k(16 * lane)), k(0xFFFF)) for v in regs]
            out.append(self._pure(key, I32, [I32] * n, lambda *hs: self._half_lane(base, bf, m, hs), hs))
        v = out[0] if not x2 else b.or_(out[0], b.shl(out[1], k(16)))
        self.write(ins.args[0], v if x2 else b.trunc(v, I16), rt)

    def _half_atomic(self, ins: Instr) -> None:
        """atom/red.add(.noftz) on f16, bf16 and their x2 packs, global, shared or generic: each lane added as the
        add instruction adds it (ops_atom._half_add); applied in the JIT's thread order, as the 32-bit ones"""
        from gpushim.ptx.jit.irtypes import _SPACES

        p = ins.parts
        typ = half_type(ins)
        scopes = {"relaxed", "gpu", "sys", "cta", "acq_rel", "acquire", "release", "noftz"}
        if "add" not in p or set(p[1:]) - {typ, "add", "global", "shared", "shared::cta"} - scopes:
            raise JitUnsupported(ins.op)
        ret = p[0] == "atom"
        args = ins.args[1:] if ret else ins.args
        space = self._resolve(next((_SPACES[x] for x in p[1:] if x in _SPACES), None), args[0], ins)
        if space not in (None, "global", "shared"):
            raise JitUnsupported(f"{ins.op} on {space}")
        x2, bf = typ.endswith("x2"), typ.startswith("bf")
        size, rt = (4, "b32") if x2 else (2, "b16")
        _, a = self._address(args[0])
        ptr = self._ptr(space, a, size, size, f"{ins.op} (line {ins.line})", True)
        if self.mode == "check":
            return
        b, k = self.b, self._k
        q = b.bitcast(ptr, ir.IntType(8 * size).as_pointer())
        old = self._tag(b.load(q, align=size), space)
        v = self.read(args[1], rt)
        o32, v32 = (x if x2 else b.zext(x, I32) for x in (old, v))
        out = []
        for lane in range(2 if x2 else 1):
            hs = [b.and_(b.lshr(x, k(16 * lane)), k(0xFFFF)) for x in (o32, v32)]
            out.append(self._pure(("half", "add", bf, ()), I32, [I32, I32],
                                  lambda *hs: self._half_lane("add", bf, set(), hs), hs))  # fmt: skip
        new = b.or_(out[0], b.shl(out[1], k(16))) if x2 else b.trunc(out[0], I16)
        self._tag(b.store(new, q, align=size), space)
        if ret:
            self.write(ins.args[0], old, rt)

    def _half_lane(self, base: str, bf: bool, m: set[str], hs):
        """One lane of a half-precision operation: the operands' bits (i32, low 16) -> the result's (a helper,
        pure.py)"""
        b = self.b
        xs = [self._h2f(h, bf) for h in hs]
        if "ftz" in m:
            xs = [self._hftz(x, bf) for x in xs]
        if base in ("fma", "mad"):
            w = [b.fpext(x, F64) for x in xs]
            p = b.fmul(w[0], w[1])  # exact
            s, e = self._two_sum(p, w[2])
            r = b.select(self._finite(s), self._to_odd(s, self._no_nan_err(e)), s)
        elif base in ("min", "max"):
            r = self._half_minmax(xs[0], xs[1], base == "min", "NaN" in m)
        else:
            r = {"add": b.fadd, "sub": b.fsub, "mul": b.fmul}[base](xs[0], xs[1])
        if "sat" in m:
            r = self._sat(r)
        if "relu" in m:  # NaN stays; -0 stays (numpy's maximum(-0., 0.) is -0.)
            r = b.select(b.fcmp_ordered("<", r, ir.Constant(r.type, 0.0)), ir.Constant(r.type, 0.0), r)
        if "ftz" in m:
            r = self._hftz(r, bf)
        if r.type == F64:
            r = self._d2f_odd(r)
        return self._f2bf(r) if bf else self._f2h(r)

    def _hftz(self, x, bf: bool):
        """ops_half._ftz: |x| below the half format's least normal -> zero with x's sign"""
        b = self.b
        mn = 2.0**-126 if bf else 2.0**-14
        tiny = b.fcmp_ordered("<", self._fabs(x), ir.Constant(x.type, mn))
        it = I32 if x.type == F32 else I64
        sign = b.and_(b.bitcast(x, it), ir.Constant(it, 1 << (it.width - 1)))
        return b.select(tiny, b.bitcast(sign, x.type), x)

    def _half_minmax(self, x, y, is_min: bool, nan: bool):
        b = self.b
        xn, yn = b.fcmp_unordered("uno", x, x), b.fcmp_unordered("uno", y, y)
        r = b.select(b.fcmp_ordered("<" if is_min else ">", x, y), x, y)
        if nan:  # np.minimum / np.maximum: NaN when either is
            r = b.select(xn, x, b.select(yn, y, r))
        else:  # np.fmin / np.fmax: the other operand
            r = b.select(xn, y, b.select(yn, x, r))
        zero = ir.Constant(F32, 0.0)
        z = b.and_(b.fcmp_ordered("==", x, zero), b.fcmp_ordered("==", y, zero))
        xs, ys = (b.icmp_signed("<", b.bitcast(v, I32), self._k(0)) for v in (x, y))
        neg = b.or_(xs, ys) if is_min else b.and_(xs, ys)
        return b.select(z, b.select(neg, ir.Constant(F32, -0.0), zero), r)

    def _half_setp(self, ins: Instr, typ: str) -> None:
        parts = ins.parts
        boolop = next((p for p in parts[2:] if p in ("and", "or", "xor")), None)
        if set(parts[2:]) - {typ, boolop}:
            raise JitUnsupported(ins.op)
        b, k = self.b, self._k
        x2 = typ.endswith("x2")
        bf = typ.startswith("bf")
        rt = "b32" if x2 else "b16"
        va, vc = (b.zext(self.read(a, rt), I32) if not x2 else self.read(a, rt) for a in ins.args[1:3])
        res = []
        for lane in range(2 if x2 else 1):
            x, y = (self._h2f(b.and_(b.lshr(v, k(16 * lane)), k(0xFFFF)), bf) for v in (va, vc))
            res.append(self._compare(parts[1], "f32", x, y, False))
        pc = self.read(ins.args[3], "pred") if boolop else None
        comb = {"and": b.and_, "or": b.or_, "xor": b.xor}[boolop] if boolop else None
        out = [comb(r, pc) if comb else r for r in res]
        dst = ins.args[0]
        if isinstance(dst, PredPair):
            second = out[1] if x2 else (comb(b.not_(res[0]), pc) if comb else b.not_(res[0]))
            if dst.first is not None:
                self.write(dst.first, out[0], "pred")
            if dst.second is not None:
                self.write(dst.second, second, "pred")
        else:
            self.write(dst, out[0], "pred")

    # -- cvt between f32 and the half formats ---------------------------------------------------------------
    def _half_cvt(self, ins: Instr) -> bool:
        """cvt.rn.{f16,bf16}.f32, cvt.f32.{f16,bf16}, cvt.rn.{f16x2,bf16x2}.f32 (ops_cvt.py's results); False
        when the form is another one (the caller goes on)"""
        p = ins.parts
        types = [x for x in p[1:] if x in HALF_TYPES or x in ("f32", "f64") or x in _INTS]
        if len(types) != 2 or not any(t in HALF_TYPES for t in types):
            return False
        dtyp, atyp = types
        m = set(p[1:]) - set(types)
        b, k = self.b, self._k
        if dtyp in ("f16", "bf16") and atyp in ("f32", "f64") and m != {"rn"} or atyp == "f64" or atyp in _INTS:
            self._cvt_f16(ins, dtyp, atyp, m)
            return True
        if atyp == "f32" and dtyp in HALF_TYPES:
            if m != {"rn"}:
                raise JitUnsupported(ins.op)
            conv = self._f2bf if dtyp.startswith("bf") else self._f2h
            if dtyp.endswith("x2"):
                if len(ins.args) != 3:
                    raise JitUnsupported(ins.op)
                hi, lo = (conv(self.read(a, "f32"), True) for a in ins.args[1:3])
                self.write(ins.args[0], b.or_(b.shl(hi, k(16)), lo), "b32")
            else:
                self.write(ins.args[0], b.trunc(conv(self.read(ins.args[1], "f32"), True), I16), "b16")
            return True
        if dtyp == "f32" and atyp in ("f16", "bf16"):
            if m - {"ftz"}:
                raise JitUnsupported(ins.op)
            x = self._h2f(b.zext(self.read(ins.args[1], "b16"), I32), atyp == "bf16")
            x = self._canon(x)
            if "ftz" in m:
                x = self._ftz(x)
            self.write(ins.args[0], x, "f32")
            return True
        raise JitUnsupported(ins.op)
