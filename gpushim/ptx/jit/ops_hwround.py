"""Directed rounding (.rz / .rm / .rp) on the host FPU's own rounding mode (a mixin of codegen.Codegen): f64
mul/div/fma/rcp/sqrt and f32 sqrt, whose software forms need wider arithmetic than f64 (the interpreter's
fexact.py falls back to fractions for them). SSE arithmetic is IEEE 754: run in the mode, it gives the correctly
rounded result the interpreter computes exactly.

Each (operation, type, mode) is one `noinline` helper of the module: `llvm.set.rounding(mode)`, the operation as
a constrained intrinsic (`round.dynamic`, `fpexcept.strict`: LLVM keeps it between the two mode changes and
folds nothing), `llvm.set.rounding(nearest)`. Only constrained operations run inside it, so nothing else can be
scheduled into the window; the callers stay ordinary (round-to-nearest) code. The NaN a result carries is made
the interpreter's (x86's rule on numpy's operand order) in the caller, where LLVM may commute operands."""

from __future__ import annotations

from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import F32, F64, I32, I64

_MODE = {"rz": 0, "rn": 1, "rp": 2, "rm": 3}  # llvm.set.rounding's encoding
_QUIET = 0x0008000000000000
DEFAULT_NAN = 0xFFF8000000000000  # x86's NaN for an invalid operation


class HwRoundOps:
    def _hw(self, op: str, ft, mode: str, args):
        """op (fmul / fdiv / fma / sqrt) of args rounded in mode, by a call of the module's helper for it"""
        tname = "f32" if ft == F32 else "f64"
        name = f"hwround.{op}.{tname}.{mode}"
        fn = self.m.globals.get(name)
        if fn is None:
            m, md = self.m, ir.MetaDataType()

            def declare(nm, ret, argt):
                f = m.globals.get(nm)
                return f if f is not None else ir.Function(m, ir.FunctionType(ret, argt), name=nm)

            setr = declare("llvm.set.rounding", ir.VoidType(), [I32])
            intr = declare(f"llvm.experimental.constrained.{op}.{tname}", ft, [ft] * len(args) + [md, md])
            fn = ir.Function(m, ir.FunctionType(ft, [ft] * len(args)), name=name)
            fn.linkage = "internal"
            fn.attributes.add("noinline")
            b = ir.IRBuilder(fn.append_basic_block("e"))
            b.call(setr, [ir.Constant(I32, _MODE[mode])])
            r = b.call(intr, [*fn.args, ir.MetaDataString(m, "round.dynamic"), ir.MetaDataString(m, "fpexcept.strict")])
            b.call(setr, [ir.Constant(I32, _MODE["rn"])])
            b.ret(r)
        return self.b.call(fn, list(args))

    def _isnan(self, v):
        return self.b.fcmp_unordered("uno", v, v)

    def _x86_nan(self, r, sources):
        """r (f64) with a NaN result made the one x86 SSE gives in numpy's operand order: the bits of the first
        (condition, bits) of sources whose condition holds, quieted; the default NaN when none holds. A select
        on the bits: LLVM may fold a float one (any NaN standing for another)."""
        b = self.b
        nan = ir.Constant(I64, DEFAULT_NAN)
        for cond, bits in reversed(sources):
            nan = b.select(cond, b.or_(bits, ir.Constant(I64, _QUIET)), nan)
        rb = b.bitcast(r, I64)
        isnan = b.icmp_unsigned(">", b.and_(rb, ir.Constant(I64, 2**63 - 1)), ir.Constant(I64, 0x7FF0000000000000))
        return b.bitcast(b.select(isnan, nan, rb), F64)

    def _nan_operands(self, *xs):
        return [(self._isnan(x), self.b.bitcast(x, I64)) for x in xs]

    def _hw_f64(self, kind: str, mode: str, args):
        """f64 mul / div / fma / rcp / sqrt in a directed mode as fexact.py computes it"""
        b = self.b
        if kind == "rcp":
            return self._x86_nan(self._hw("fdiv", F64, mode, [ir.Constant(F64, 1.0), *args]), self._nan_operands(*args))
        if kind in ("mul", "div", "sqrt"):
            op = {"mul": "fmul", "div": "fdiv", "sqrt": "sqrt"}[kind]
            return self._x86_nan(self._hw(op, F64, mode, args), self._nan_operands(*args))
        # fma: with a non-finite operand fexact.fma_f64 computes a*b + c (to nearest; c itself when only c is infinite)
        x, y, z = args
        inf, zero = ir.Constant(F64, float("inf")), ir.Constant(F64, 0.0)
        fin = [b.fcmp_ordered("<", self._fabs(v), inf) for v in args]
        finite = b.and_(b.and_(fin[0], fin[1]), fin[2])
        isinf = [b.fcmp_ordered("==", self._fabs(v), inf) for v in (x, y)]
        iszero = [b.fcmp_ordered("==", v, zero) for v in (x, y)]
        invalid = b.or_(b.and_(isinf[0], iszero[1]), b.and_(iszero[0], isinf[1]))  # inf * 0
        nx, ny, nz = self._nan_operands(x, y, z)
        plain = self._x86_nan(b.fadd(b.fmul(x, y), z), [nx, ny, (invalid, ir.Constant(I64, DEFAULT_NAN)), nz])
        # x*y is exact when fused: with x, y finite and z infinite the result is z (not inf - inf = NaN)
        zinf = b.and_(b.and_(fin[0], fin[1]), b.fcmp_ordered("==", self._fabs(z), inf))
        plain = b.select(zinf, z, plain)
        hw = self._hw("fma", F64, mode, args)
        return b.bitcast(b.select(finite, b.bitcast(hw, I64), b.bitcast(plain, I64)), F64)
