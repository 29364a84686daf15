"""Code generation of integer, bit, move and conversion instructions (a mixin of codegen.Codegen)."""

from __future__ import annotations

from gpushim.cuda_errors import Err
from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import (
    _SPACES,
    F32,
    F64,
    I1,
    I32,
    I64,
    JitUnsupported,
    _ftype,
    _itype,
    _ltype,
)
from gpushim.ptx.nodes import Imm, Instr, Reg, Vec
from gpushim.ptx.operands import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, WINDOW_SIZE
from gpushim.ptx.types import TYPES, type_size


class AluOps:
    def op_trap(self, ins: Instr) -> None:
        self._check(ir.Constant(I1, 1), Err.LAUNCH_FAILURE, f"trap executed by {{who}} (line {ins.line})", self.t,
                    mem=False)

    def op_bfe(self, ins: Instr) -> None:
        typ = _itype(ins)
        if typ not in ("u32", "s32", "u64", "s64") or len(ins.args) != 4 or set(ins.parts[1:]) - {typ}:
            raise JitUnsupported(ins.op)
        bits = 8 * type_size(typ)
        signed = typ[0] == "s"
        b = self.b

        def k(v):
            return ir.Constant(I64, v)

        a = self._conv_bits(self.read(ins.args[1], typ), I64, signed)
        pos, ln = (b.and_(b.zext(self.read(x, "u32"), I64), k(0xFF)) for x in ins.args[2:4])
        p = b.select(b.icmp_signed("<", pos, k(63)), pos, k(63))
        if signed:  # an arithmetic shift of the sign-extended value: bits past the msb read as the sign
            t = b.ashr(a, p)
        else:
            t = b.select(b.icmp_signed(">=", pos, k(64)), k(0), b.lshr(a, p))
        lm = b.select(b.icmp_signed("<", ln, k(63)), ln, k(63))
        lmask = b.select(b.icmp_signed(">=", ln, k(64)), k(2**64 - 1), b.sub(b.shl(k(1), lm), k(1)))
        r = b.and_(t, lmask)
        if signed:
            sh = b.sub(b.select(b.icmp_signed(">", lm, k(1)), lm, k(1)), k(1))
            sb = b.and_(b.lshr(r, sh), k(1))
            ext = b.and_(
                b.and_(b.icmp_signed(">", ln, k(0)), b.icmp_signed("<", ln, k(bits))), b.icmp_unsigned("==", sb, k(1))
            )
            r = b.select(ext, b.or_(r, b.not_(lmask)), r)
            r = b.select(b.icmp_unsigned("==", ln, k(0)), k(0), r)
        self.write(ins.args[0], self._conv_bits(r, ir.IntType(bits), False), typ)

    def op_sad(self, ins: Instr) -> None:
        typ, (a, c, d) = self._ints(ins, 3)
        b = self.b
        lt = (b.icmp_signed if typ[0] == "s" else b.icmp_unsigned)("<", a, c)
        self.write(ins.args[0], b.add(d, b.select(lt, b.sub(c, a), b.sub(a, c))), typ)

    def op_slct(self, ins: Instr) -> None:
        parts = ins.parts
        dtyp, ctyp = parts[-2], parts[-1]
        if dtyp not in TYPES or ctyp not in ("s32", "f32") or set(parts[1:-2]) - {"ftz"}:
            raise JitUnsupported(ins.op)
        a, c = self.read(ins.args[1], dtyp), self.read(ins.args[2], dtyp)
        d = self.read(ins.args[3], ctyp)
        b = self.b
        if ctyp == "f32":
            if "ftz" in parts:
                d = self._ftz(d)
            ge = b.fcmp_ordered(">=", d, ir.Constant(F32, 0.0))  # -0 selects a, NaN selects b
        else:
            ge = b.icmp_signed(">=", d, ir.Constant(I32, 0))
        self.write(ins.args[0], b.select(ge, a, c), dtyp)

    def op_lop3(self, ins: Instr) -> None:
        typ = _itype(ins)
        if len(ins.args) != 5 or not isinstance(ins.args[4], Imm) or set(ins.parts[1:]) - {typ}:
            raise JitUnsupported(ins.op)
        a, c, d = (self.read(x, typ) for x in ins.args[1:4])
        lut = int(ins.args[4].value) & 0xFF
        b = self.b
        r = ir.Constant(a.type, 0)
        for i in range(8):  # the minterms of the truth table: a is bit 2 of the index, b bit 1, c bit 0
            if lut >> i & 1:
                t = b.and_(b.and_(a if i & 4 else b.not_(a), c if i & 2 else b.not_(c)), d if i & 1 else b.not_(d))
                r = b.or_(r, t)
        self.write(ins.args[0], r, typ)

    def op_bfi(self, ins: Instr) -> None:
        typ = _itype(ins)
        if typ not in ("b32", "b64") or len(ins.args) != 5:
            raise JitUnsupported(ins.op)
        bits = 8 * type_size(typ)
        b = self.b
        a, c = (self._conv_bits(self.read(x, typ), I64, False) for x in ins.args[1:3])
        pos, ln = (b.and_(b.zext(self.read(x, "u32"), I64), ir.Constant(I64, 0xFF)) for x in ins.args[3:5])
        room = b.sub(ir.Constant(I64, bits), pos)
        room = b.select(b.icmp_signed("<", room, ir.Constant(I64, 0)), ir.Constant(I64, 0), room)
        ln = b.select(b.icmp_signed("<", ln, room), ln, room)
        ones = ir.Constant(I64, 2**64 - 1)
        lmask = b.select(
            b.icmp_signed(">=", ln, ir.Constant(I64, 64)),
            ones,
            b.sub(b.shl(ir.Constant(I64, 1), ln), ir.Constant(I64, 1)),
        )
        p = b.select(b.icmp_signed("<", pos, ir.Constant(I64, 63)), pos, ir.Constant(I64, 63))
        m = b.select(b.icmp_signed(">=", pos, ir.Constant(I64, bits)), ir.Constant(I64, 0), b.shl(lmask, p))
        r = b.or_(b.and_(c, b.not_(m)), b.and_(b.shl(a, p), m))
        self.write(ins.args[0], self._conv_bits(r, ir.IntType(bits), False), typ)

    # moves and conversions
    def op_mov(self, ins: Instr) -> None:
        typ = _itype(ins)
        d, s = ins.args[0], ins.args[1]
        b = self.b
        if isinstance(s, Vec):  # pack
            n = len(s.items)
            w = 8 * type_size(typ) // n
            it = ir.IntType(w)
            acc = ir.Constant(ir.IntType(8 * type_size(typ)), 0)
            for j, item in enumerate(s.items):
                v = b.zext(self.read(item, f"b{w}"), acc.type) if w < acc.type.width else self.read(item, f"b{w}")
                acc = b.or_(acc, b.shl(v, ir.Constant(acc.type, j * w))) if j else v
            del it
            self.write(d, acc, f"b{8 * type_size(typ)}")
            return
        if isinstance(d, Vec):  # unpack
            n = len(d.items)
            w = 8 * type_size(typ) // n
            v = self.read(s, f"b{8 * type_size(typ)}")
            for j, item in enumerate(d.items):
                if isinstance(item, Reg) and item.name != "_":
                    self.write(item, b.trunc(b.lshr(v, ir.Constant(v.type, j * w)), ir.IntType(w)), f"b{w}")
            return
        if typ in ("f16", "bf16"):
            typ = "b16"
        self.write(d, self.read(s, typ), typ)

    def op_cvta(self, ins: Instr) -> None:
        parts = ins.parts
        to = "to" in parts
        space = next((_SPACES[p] for p in parts[1:] if p in _SPACES), None)
        typ = _itype(ins)
        a = self.read(ins.args[1], "u64") if typ == "u64" else self.b.zext(self.read(ins.args[1], "u32"), I64)
        w = {"global": 0, "shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "param": PARAM_WINDOW}.get(space or "")
        if w is None:
            raise JitUnsupported(ins.op)
        if w:
            a = self.b.sub(a, ir.Constant(I64, w)) if to else self.b.add(a, ir.Constant(I64, w))
        self.write(ins.args[0], a if typ == "u64" else self.b.trunc(a, I32), typ)

    def op_isspacep(self, ins: Instr) -> None:
        """isspacep.space p, a: a generic address in the space's window (global: outside every window), as
        ops_mem.compile_isspacep"""
        from gpushim.ptx.ops_mem import _WINDOW_OF, SPACE_NAMES

        space = SPACE_NAMES.get(ins.parts[1], ins.parts[1]) if len(ins.parts) == 2 else None
        if space not in ("global", "shared", "local", "param"):
            raise JitUnsupported(ins.op)
        b = self.b
        a = self.read(ins.args[1], "u64")
        if space == "global":
            lo, hi, inside = SHARED_WINDOW, PARAM_WINDOW + WINDOW_SIZE, False
        else:
            lo, hi, inside = _WINDOW_OF[space], _WINDOW_OF[space] + WINDOW_SIZE, True
        t = b.and_(b.icmp_unsigned(">=", a, ir.Constant(I64, lo)), b.icmp_unsigned("<", a, ir.Constant(I64, hi)))
        self.write(ins.args[0], t if inside else b.not_(t), "pred")

    def op_cvt(self, ins: Instr) -> None:
        if ins.parts[-2:] == ["tf32", "f32"]:
            self._cvt_tf32(ins)  # (ops_mma.py)
            return
        b = self.b
        types = [p for p in ins.parts[1:] if p in TYPES]
        if len(types) != 2:
            raise JitUnsupported(ins.op)
        dtyp, atyp = types
        m = set(ins.parts[1:]) - set(types)
        if m - {"rn", "rzi", "rni", "rmi", "rpi", "ftz", "sat"} or len(ins.args) != 2:
            raise JitUnsupported(ins.op)
        dfl, afl = dtyp in ("f32", "f64"), atyp in ("f32", "f64")
        if dtyp in ("f16", "bf16") or atyp in ("f16", "bf16"):
            raise JitUnsupported(ins.op)
        a = self.read(ins.args[1], atyp)
        irnd = next((x for x in m if x in ("rzi", "rni", "rmi", "rpi")), None)
        rmap = {"rzi": "trunc", "rni": "roundeven", "rmi": "floor", "rpi": "ceil"}
        if not dfl and not afl:
            if "sat" in m:  # clamped to d's range within a's (ops_cvt.py), then converted
                a = self._clamp_int(a, atyp, dtyp)
            r = self._conv_bits(a, _ltype(dtyp), atyp[0] == "s")
        elif afl and not dfl:
            if "sat" in m:
                pass  # float -> int saturates anyway
            x = self._ftz(a) if "ftz" in m and atyp == "f32" else a
            if atyp == "f32":
                x = b.fpext(x, F64)
            x = b.call(self.i_round[rmap[irnd or "rzi"], 64], [x])
            r = b.call(self.i_fptosat[dtyp[0] if dtyp[0] == "s" else "u", 8 * type_size(dtyp), 64], [x])
        elif not afl and dfl:
            if m - {"rn", "sat"}:
                raise JitUnsupported(ins.op)
            ft = _ftype(dtyp)
            r = b.sitofp(a, ft) if atyp[0] == "s" else b.uitofp(a, ft)
            if "sat" in m:
                r = self._sat(r)
        else:
            if "ftz" in m and atyp == "f32":
                a = self._ftz(a)
            if m & {"rz", "rm", "rp"}:
                raise JitUnsupported(ins.op)
            x = b.fpext(a, F64) if atyp == "f32" else a
            if irnd:
                x = b.call(self.i_round[rmap[irnd], 64], [x])
            if dtyp == "f64":
                r = x
            else:
                r = self._canon(b.fptrunc(x, F32))
                if "ftz" in m:
                    r = self._ftz(r)
            if "sat" in m:
                r = self._sat(r)
        self.write(ins.args[0], r, dtyp)

    def _clamp_int(self, a, atyp: str, dtyp: str):
        from gpushim.ptx.ops_cvt import _int_bounds

        (lo, hi), (alo, ahi) = _int_bounds(dtyp), _int_bounds(atyp)
        lo, hi = max(lo, alo), min(hi, ahi)
        b = self.b
        cmp = b.icmp_signed if atyp[0] == "s" else b.icmp_unsigned
        wrap = (1 << a.type.width) - 1
        lo_c, hi_c = ir.Constant(a.type, lo & wrap), ir.Constant(a.type, hi & wrap)
        a = b.select(cmp("<", a, lo_c), lo_c, a)
        return b.select(cmp(">", a, hi_c), hi_c, a)

    # integer arithmetic
    def _ints(self, ins: Instr, n: int, typ: str | None = None):
        typ = typ or _itype(ins)
        if typ in ("f32", "f64", "f16", "bf16", "f16x2", "bf16x2", "pred"):
            raise JitUnsupported(ins.op)
        return typ, [self.read(a, typ) for a in ins.args[1 : 1 + n]]

    def _fmods(self, ins: Instr, allowed: set[str]) -> set[str]:
        m = {p for p in ins.parts[1:] if p not in TYPES}
        if m - allowed:
            raise JitUnsupported(ins.op)
        return m

    def op_add(self, ins: Instr, sub: bool = False) -> None:
        typ = _itype(ins)
        if typ in ("f32", "f64"):
            return self._farith(ins, "sub" if sub else "add")
        mods = set(ins.parts[1:]) - {typ}
        if mods == {"sat"} and typ == "s32":  # clamped to the s32 range (PTX ISA, add/sub: .sat only for .s32)
            typ, (a, c) = self._ints(ins, 2)
            f = self._intrinsic("llvm.ssub.sat.i32" if sub else "llvm.sadd.sat.i32", I32, [I32, I32])
            self.write(ins.args[0], self.b.call(f, [a, c]), typ)
            return
        if mods:
            raise JitUnsupported(ins.op)
        typ, (a, c) = self._ints(ins, 2)
        self.write(ins.args[0], self.b.sub(a, c) if sub else self.b.add(a, c), typ)

    def op_mul24(self, ins: Instr, mad: bool = False) -> None:
        """The low 24 bits of each operand (sign-extended for .s32) multiplied into 48 bits; .lo its low 32
        bits, .hi bits 16..47; mad24 adds c modulo 2^32 (ops_int.py's compile_mul24)."""
        typ = _itype(ins)
        mods = set(ins.parts[1:]) - {typ}
        if typ not in ("u32", "s32") or mods - {"lo", "hi"} or len(mods) > 1:
            raise JitUnsupported(ins.op)
        b = self.b
        typ, vals = self._ints(ins, 3 if mad else 2)
        i24 = ir.IntType(24)
        ext = b.sext if typ == "s32" else b.zext
        x, y = (ext(b.trunc(v, i24), I64) for v in vals[:2])
        p = b.mul(x, y)
        r = b.trunc(b.ashr(p, ir.Constant(I64, 16)) if "hi" in mods else p, I32)
        if mad:
            r = b.add(r, vals[2])
        self.write(ins.args[0], r, typ)

    def op_mad24(self, ins: Instr) -> None:
        self.op_mul24(ins, mad=True)

    _PRMT = {
        "f4e": [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]],
        "b4e": [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]],
        "rc8": [[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]],
        "ecl": [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]],
        "ecr": [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]],
        "rc16": [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]],
    }

    def op_prmt(self, ins: Instr) -> None:
        """Byte permute of {b, a} (ops_bits.py's compile_prmt): by the selector nibbles of c (bit 3: replicate
        the byte's sign), or in a mode by the table row c & 3."""
        mods = set(ins.parts[1:]) - {"b32"}
        mode = next(iter(mods)) if mods else ""
        if len(mods) > 1 or (mode and mode not in self._PRMT):
            raise JitUnsupported(ins.op)
        b = self.b
        a, hi, c = (self.read(x, "b32") for x in ins.args[1:4])
        x = b.or_(b.zext(a, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))

        def byte(idx):  # byte idx (i64) of x, as i32
            return b.trunc(b.and_(b.lshr(x, b.shl(idx, ir.Constant(I64, 3))), ir.Constant(I64, 0xFF)), I32)

        out = ir.Constant(I32, 0)
        c64 = b.zext(c, I64)
        for i in range(4):
            if not mode:
                sel = b.and_(b.lshr(c64, ir.Constant(I64, 4 * i)), ir.Constant(I64, 0xF))
                v = byte(b.and_(sel, ir.Constant(I64, 7)))
                neg = b.icmp_unsigned("!=", b.and_(v, ir.Constant(I32, 0x80)), ir.Constant(I32, 0))
                sign = b.icmp_unsigned("!=", b.and_(sel, ir.Constant(I64, 8)), ir.Constant(I64, 0))
                v = b.select(sign, b.select(neg, ir.Constant(I32, 0xFF), ir.Constant(I32, 0)), v)
            else:
                row = b.and_(c64, ir.Constant(I64, 3))
                idx = ir.Constant(I64, self._PRMT[mode][3][i])
                for r in (2, 1, 0):
                    hit = b.icmp_unsigned("==", row, ir.Constant(I64, r))
                    idx = b.select(hit, ir.Constant(I64, self._PRMT[mode][r][i]), idx)
                v = byte(idx)
            out = b.or_(out, b.shl(v, ir.Constant(I32, 8 * i)))
        self.write(ins.args[0], out, "b32")

    def _intrinsic(self, name: str, ret, args):
        """An LLVM intrinsic, declared once per module."""
        f = self.m.globals.get(name)
        if f is None:
            f = ir.Function(self.m, ir.FunctionType(ret, args), name=name)
        return f

    def op_bfind(self, ins: Instr) -> None:
        """Position of the most significant non-sign bit (0xffffffff when none), or with .shiftamt the left
        shift that brings it to the top (ops_bits.py)."""
        typ = _itype(ins)
        mods = set(ins.parts[1:]) - {typ}
        if mods - {"shiftamt"} or typ not in ("u32", "s32", "u64", "s64"):
            raise JitUnsupported(ins.op)
        b = self.b
        a = self.read(ins.args[1], typ)
        w = a.type.width
        x = a
        if typ[0] == "s":
            x = b.select(b.icmp_signed("<", a, ir.Constant(a.type, 0)), b.not_(a), a)
        lz = b.call(self.i_ctlz[w], [x, ir.Constant(I1, 0)])
        r = lz if "shiftamt" in mods else b.sub(ir.Constant(a.type, w - 1), lz)
        r = b.trunc(r, I32) if w == 64 else r
        none = b.icmp_unsigned("==", x, ir.Constant(a.type, 0))
        self.write(ins.args[0], b.select(none, ir.Constant(I32, 0xFFFFFFFF), r), "u32")

    def op_sub(self, ins: Instr) -> None:
        self.op_add(ins, sub=True)

    def _mul_parts(self, ins: Instr, a, c, typ: str, mode: str):
        b = self.b
        w = a.type.width
        signed = typ[0] == "s"
        if mode == "lo":
            return b.mul(a, c), typ
        wide = ir.IntType(2 * w)
        ext = b.sext if signed else b.zext
        p = b.mul(ext(a, wide), ext(c, wide))
        if mode == "wide":
            return p, f"{typ[0]}{2 * w}"
        return b.trunc(b.lshr(p, ir.Constant(wide, w)), a.type), typ

    def op_mul(self, ins: Instr) -> None:
        typ = _itype(ins)
        if typ in ("f32", "f64"):
            return self._farith(ins, "mul")
        mode = next((p for p in ins.parts[1:] if p in ("lo", "hi", "wide")), "lo")
        if set(ins.parts[1:]) - {typ, mode}:
            raise JitUnsupported(ins.op)
        typ, (a, c) = self._ints(ins, 2)
        r, rt = self._mul_parts(ins, a, c, typ, mode)
        self.write(ins.args[0], r, rt)

    def op_mad(self, ins: Instr) -> None:
        typ = _itype(ins)
        if typ in ("f32", "f64"):
            return self.op_fma(ins)
        mode = next((p for p in ins.parts[1:] if p in ("lo", "hi", "wide")), "lo")
        if set(ins.parts[1:]) - {typ, mode}:
            raise JitUnsupported(ins.op)
        typ, (a, c) = self._ints(ins, 2)
        r, rt = self._mul_parts(ins, a, c, typ, mode)
        d = self.read(ins.args[3], rt)
        self.write(ins.args[0], self.b.add(r, d), rt)

    def _divrem(self, ins: Instr, rem: bool) -> None:
        typ = _itype(ins)
        if typ in ("f32", "f64"):
            if rem:
                raise JitUnsupported(ins.op)
            return self._farith(ins, "div")
        typ, (a, c) = self._ints(ins, 2)
        b = self.b
        t = a.type
        zero, one, m1 = ir.Constant(t, 0), ir.Constant(t, 1), ir.Constant(t, (1 << t.width) - 1)
        z = b.icmp_unsigned("==", c, zero)
        if typ[0] == "s":
            neg1 = b.icmp_unsigned("==", c, m1)
            safe = b.select(b.or_(z, neg1), one, c)
            if rem:
                r = b.select(neg1, zero, b.srem(a, safe))
            else:
                r = b.select(neg1, b.sub(zero, a), b.sdiv(a, safe))
        else:
            safe = b.select(z, one, c)
            r = b.urem(a, safe) if rem else b.udiv(a, safe)
        self.write(ins.args[0], b.select(z, m1, r), typ)

    def op_div(self, ins: Instr) -> None:
        self._divrem(ins, False)

    def op_rem(self, ins: Instr) -> None:
        self._divrem(ins, True)

    def _minmax(self, ins: Instr, is_min: bool) -> None:
        typ = _itype(ins)
        if typ in ("f32", "f64"):
            return self._fminmax(ins, is_min)
        if set(ins.parts[1:]) - {typ}:
            raise JitUnsupported(ins.op)
        typ, (a, c) = self._ints(ins, 2)
        b = self.b
        cmp = b.icmp_signed if typ[0] == "s" else b.icmp_unsigned
        lt = cmp("<", a, c)
        self.write(ins.args[0], b.select(lt, a, c) if is_min else b.select(lt, c, a), typ)

    def op_min(self, ins: Instr) -> None:
        self._minmax(ins, True)

    def op_max(self, ins: Instr) -> None:
        self._minmax(ins, False)

    def op_abs(self, ins: Instr) -> None:
        typ = _itype(ins)
        if typ in ("f32", "f64"):
            return self._fabsneg(ins, True)
        typ, (a,) = self._ints(ins, 1)
        b = self.b
        neg = b.icmp_signed("<", a, ir.Constant(a.type, 0))
        self.write(ins.args[0], b.select(neg, b.sub(ir.Constant(a.type, 0), a), a), typ)

    def op_neg(self, ins: Instr) -> None:
        typ = _itype(ins)
        if typ in ("f32", "f64"):
            return self._fabsneg(ins, False)
        typ, (a,) = self._ints(ins, 1)
        self.write(ins.args[0], self.b.sub(ir.Constant(a.type, 0), a), typ)

    def _logic(self, ins: Instr, fn) -> None:
        typ = _itype(ins)
        if typ in ("f32", "f64"):
            raise JitUnsupported(ins.op)
        n = len(ins.args) - 1
        vals = [self.read(a, typ) for a in ins.args[1:]]
        self.write(ins.args[0], fn(*vals) if n > 1 else fn(vals[0]), typ)

    def op_and(self, ins: Instr) -> None:
        self._logic(ins, self.b.and_)

    def op_or(self, ins: Instr) -> None:
        self._logic(ins, self.b.or_)

    def op_xor(self, ins: Instr) -> None:
        self._logic(ins, self.b.xor)

    def op_not(self, ins: Instr) -> None:
        self._logic(ins, self.b.not_)

    def op_cnot(self, ins: Instr) -> None:
        b = self.b
        self._logic(ins, lambda a: b.zext(b.icmp_unsigned("==", a, ir.Constant(a.type, 0)), a.type))

    def _shift(self, ins: Instr, left: bool) -> None:
        typ = _itype(ins)
        if set(ins.parts[1:]) - {typ}:
            raise JitUnsupported(ins.op)
        a = self.read(ins.args[1], typ)
        n = self.read(ins.args[2], "u32")
        b = self.b
        w = a.type.width
        if isinstance(n, ir.Constant) and isinstance(n.constant, int):  # the usual case: fold the clamp here
            k = n.constant & 0xFFFFFFFF
            if k >= w:
                r = b.ashr(a, ir.Constant(a.type, w - 1)) if typ[0] == "s" and not left else ir.Constant(a.type, 0)
            else:
                kk = ir.Constant(a.type, k)
                r = b.shl(a, kk) if left else b.ashr(a, kk) if typ[0] == "s" else b.lshr(a, kk)
            self.write(ins.args[0], r, typ)
            return
        big = b.icmp_unsigned(">=", n, ir.Constant(I32, w))
        nn = self._conv_bits(b.select(big, ir.Constant(I32, w - 1), n), a.type, False)
        if left:
            r = b.select(big, ir.Constant(a.type, 0), b.shl(a, nn))
        elif typ[0] == "s":
            r = b.ashr(a, nn)
        else:
            r = b.select(big, ir.Constant(a.type, 0), b.lshr(a, nn))
        self.write(ins.args[0], r, typ)

    def op_shl(self, ins: Instr) -> None:
        self._shift(ins, True)

    def op_shr(self, ins: Instr) -> None:
        self._shift(ins, False)

    def _bitcount(self, ins: Instr, tab, extra=()) -> None:
        typ = _itype(ins)
        a = self.read(ins.args[1], typ)
        if a.type.width not in tab:
            raise JitUnsupported(ins.op)
        r = self.b.call(tab[a.type.width], [a, *extra])
        self.write(ins.args[0], self._conv_bits(r, I32, False), "u32")

    def op_popc(self, ins: Instr) -> None:
        self._bitcount(ins, self.i_ctpop)

    def op_clz(self, ins: Instr) -> None:
        self._bitcount(ins, self.i_ctlz, (ir.Constant(I1, 0),))

    def op_brev(self, ins: Instr) -> None:
        typ = _itype(ins)
        a = self.read(ins.args[1], typ)
        if a.type.width not in self.i_brev:
            raise JitUnsupported(ins.op)
        self.write(ins.args[0], self.b.call(self.i_brev[a.type.width], [a]), typ)
