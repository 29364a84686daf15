"""Code generation of memory accesses with the interpreter's bounds and alignment checks (memspaces.py),
and of atomics (a mixin of codegen.Codegen)."""

from __future__ import annotations

from gpushim.cuda_errors import Err
from gpushim.ptx.jit import runtime
from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import (
    _SPACES,
    F32,
    F64,
    I1,
    I32,
    I64,
    P8,
    JitUnsupported,
    _itype,
    _ltype,
)
from gpushim.ptx.nodes import Instr, Sym, Vec
from gpushim.ptx.operands import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, WINDOW_SIZE
from gpushim.ptx.types import TYPES, type_size


class MemOps:
    # -- memory ---------------------------------------------------------------------------------------------
    def _space(self, ins: Instr):
        space, vec, typ = None, 1, None
        for p in ins.parts[1:]:
            if p in _SPACES:
                space = _SPACES[p]
            elif p in ("v2", "v4"):
                vec = int(p[1:])
            elif p in TYPES:
                typ = p
            elif p in ("shared::cluster", "v8"):
                raise JitUnsupported(ins.op)
        if typ is None:
            raise JitUnsupported(f"{ins.op}: no type")
        return space, vec, typ

    def _resolve(self, space, addr_op, ins: Instr):
        base = addr_op.base
        if isinstance(base, Sym):
            s = self._sym_space(base.name)
            if space is None:
                return s
            if space == "param":
                return s if s in ("kparam", "local") else "kparam"
            return space
        if space == "param":
            return "local" if ins.callee else "kparam"
        return space

    def _ptr(self, space, a, size: int, align: int, what: str, store: bool):
        """Host pointer (i8*) for `size`-byte elements at i64 address a in space (None: generic), after the
        bounds and alignment checks of memspaces.py."""
        if space is None:
            return self._generic_ptr(a, size, align, what, store)
        b = self.b
        if space == "global":
            return self._global_ptr(a, align, what)
        if space in ("shared", "local"):
            limit = self.shsize if space == "shared" else self.losize
            end = b.add(a, ir.Constant(I64, align))
            oob = b.or_(b.icmp_unsigned(">", end, limit), b.icmp_unsigned("<", end, a))
            msg = f"{what}: {space} access of {align} bytes out of bounds"
            if align > 1:
                mis = b.icmp_unsigned("!=", b.and_(a, ir.Constant(I64, align - 1)), ir.Constant(I64, 0))
                self._check(
                    oob, Err.ILLEGAL_ADDRESS, msg, a, mis, Err.MISALIGNED_ADDRESS, f"{what}: misaligned {space} access"
                )
            else:
                self._check(oob, Err.ILLEGAL_ADDRESS, msg, a)
            return b.gep(self.shbuf if space == "shared" else self.lobuf, [a])
        if space == "kparam":
            if store:
                raise JitUnsupported("store to kernel parameter space")
            if isinstance(a, ir.Constant) and a.constant % size == 0 and a.constant + align <= self.prog.param_bytes:
                # a named parameter: within the buffer, which the launch checks holds param_bytes at least
                return b.gep(self.kparam, [a])
            end = b.add(a, ir.Constant(I64, size))
            bad = b.or_(b.icmp_unsigned(">", end, self.psize), b.icmp_unsigned("<", end, a))
            bad = b.or_(bad, b.icmp_unsigned("!=", b.and_(a, ir.Constant(I64, size - 1)), ir.Constant(I64, 0)))
            self._check(bad, Err.ILLEGAL_ADDRESS, f"{what}: kernel parameter access out of bounds", a)
            return b.gep(self.param, [a])
        raise JitUnsupported(f"{space} space")

    def _global_ptr(self, a, align: int, what: str):
        b = self.b
        if self.mode == "fast":
            return b.gep(self.arena, [b.sub(a, self.base)])
        if self.mode == "check":  # the range and the alignment of this instruction's addresses, over all threads
            k = len(self.check_sites)
            self.check_sites.append(align)
            pmin, pmax, por = (b.gep(self.acache, [ir.Constant(I64, 1 + 3 * k + j)]) for j in range(3))
            lo, hi = b.load(pmin), b.load(pmax)
            b.store(b.select(b.icmp_unsigned("<", a, lo), a, lo), pmin)
            b.store(b.select(b.icmp_unsigned(">", a, hi), a, hi), pmax)
            b.store(b.or_(b.load(por), a), por)
            return ir.Constant(P8, None)
        end = b.add(a, ir.Constant(I64, align))
        k = self.ncache
        self.ncache += 1
        plo, phi_ = self._cache_slot(2 * k), self._cache_slot(2 * k + 1)
        hit = b.and_(b.icmp_unsigned(">=", a, b.load(plo)), b.icmp_unsigned("<=", end, b.load(phi_)))
        hit = b.and_(hit, b.icmp_unsigned(">=", end, a))
        mis = b.icmp_unsigned("!=", b.and_(a, ir.Constant(I64, align - 1)), ir.Constant(I64, 0)) if align > 1 else None
        slow = self.f.append_basic_block()
        fast = self.f.append_basic_block()
        # hot path: the allocation this instruction hit last, aligned; anything else takes the checked path
        b.cbranch(hit if mis is None else b.and_(hit, b.not_(mis)), fast, slow).set_weights([1 << 10, 1])
        b.position_at_end(slow)
        found = b.call(self.find_alloc, [self.ctx, a, end])
        ok = b.extract_value(found, 0)
        b.store(b.extract_value(found, 1), plo)
        b.store(b.extract_value(found, 2), phi_)
        msg = f"{what}: {align} bytes out of bounds"
        if mis is None:
            self._check(b.not_(ok), Err.ILLEGAL_ADDRESS, msg, a)
        else:
            self._check(b.not_(ok), Err.ILLEGAL_ADDRESS, msg, a, mis, Err.MISALIGNED_ADDRESS,
                        f"{what}: misaligned {align}-byte access")  # fmt: skip
        b.branch(fast)
        b.position_at_end(fast)
        return b.gep(self.arena, [b.sub(a, self.base)])

    def _generic_ptr(self, a, size, align, what, store):
        b = self.b
        windows = [("shared", SHARED_WINDOW), ("local", LOCAL_WINDOW), ("kparam", PARAM_WINDOW)]
        done = self.f.append_basic_block()
        results = []
        for name, w in windows:
            inside = b.icmp_unsigned("<", b.sub(a, ir.Constant(I64, w)), ir.Constant(I64, WINDOW_SIZE))
            yes = self.f.append_basic_block()
            no = self.f.append_basic_block()
            b.cbranch(inside, yes, no)
            b.position_at_end(yes)
            off = b.sub(a, ir.Constant(I64, w))
            if name == "kparam" and store:
                self._check(ir.Constant(I1, 1), Err.ILLEGAL_ADDRESS, f"{what}: store to kernel parameter space", a)
                p = ir.Constant(P8, None)
            else:
                p = self._ptr(name, off, size, align, what, store)
            results.append((p, b.block))
            b.branch(done)
            b.position_at_end(no)
        p = self._global_ptr(a, align, what)
        results.append((p, b.block))
        b.branch(done)
        b.position_at_end(done)
        phi = b.phi(P8)
        for p, blk in results:
            phi.add_incoming(p, blk)
        return phi

    def _declare_find_alloc(self) -> None:
        """{i1 ok, i64 lo, i64 hi} @gpushim_find_alloc(ctx, a, end): the allocation lookup, compiled once per
        process (runtime.py) and called by every module's code."""
        self.find_alloc = runtime.find_alloc(self.m, define=False)

    # memory
    def op_ld(self, ins: Instr) -> None:
        if set(ins.parts[1:]) & {"volatile", "relaxed", "acquire", "mmio"} and "shared" in ins.parts:
            raise JitUnsupported(f"{ins.op} (warp-synchronous shared memory code)")
        space, vec, typ = self._space(ins)
        dst, addr_op = ins.args[0], ins.args[1]
        space = self._resolve(space, addr_op, ins)
        _, a = self._address(addr_op)
        size = type_size(typ)
        what = f"{ins.op} (line {ins.line})"
        p = self._ptr(space, a, size, size * vec, what, False)
        items = dst.items if isinstance(dst, Vec) else (dst,)
        if len(items) != vec:
            raise JitUnsupported(ins.op)
        named = space == "kparam" and isinstance(a, ir.Constant) and a.constant + size * vec <= self.prog.param_bytes
        if self.mode == "check" and not named:
            return  # no memory read: the value feeds no address or branch (taint.py); named parameters do
        b = self.b
        it = ir.IntType(8 * size)
        for j, d in enumerate(items):
            q = b.bitcast(b.gep(p, [ir.Constant(I64, j * size)]) if j else p, it.as_pointer())
            v = self._tag(b.load(q, align=size), space)
            if space == "kparam":
                self._invariant(v)
            # the bits as loaded (a float register holds its bits: no bitcast there and back)
            self.write(d, v, f"b{8 * size}" if typ in ("f16", "bf16", "f32", "f64") else typ)

    op_ldu = op_ld

    def op_st(self, ins: Instr) -> None:
        if set(ins.parts[1:]) & {"volatile", "relaxed", "release", "mmio"} and "shared" in ins.parts:
            raise JitUnsupported(f"{ins.op} (warp-synchronous shared memory code)")
        space, vec, typ = self._space(ins)
        addr_op, src = ins.args[0], ins.args[1]
        space = self._resolve(space, addr_op, ins)
        if space == "kparam":
            raise JitUnsupported("store to a kernel parameter")
        _, a = self._address(addr_op)
        size = type_size(typ)
        what = f"{ins.op} (line {ins.line})"
        items = src.items if isinstance(src, Vec) else (src,)
        if len(items) != vec:
            raise JitUnsupported(ins.op)
        rtyp = typ if typ not in ("f16", "bf16", "f32", "f64") else f"b{8 * size}"
        vals = [self.read(s, rtyp) for s in items]
        p = self._ptr(space, a, size, size * vec, what, True)
        if self.mode == "check":
            return
        b = self.b
        it = ir.IntType(8 * size)
        for j, v in enumerate(vals):
            q = b.bitcast(b.gep(p, [ir.Constant(I64, j * size)]) if j else p, it.as_pointer())
            self._tag(b.store(v, q, align=size), space)

    def op_atom(self, ins: Instr) -> None:
        self._atomic(ins, ret=True)

    def op_red(self, ins: Instr) -> None:
        self._atomic(ins, ret=False)

    def _atomic(self, ins: Instr, ret: bool) -> None:
        parts = ins.parts
        space = next((_SPACES[p] for p in parts[1:] if p in _SPACES), None)
        typ = _itype(ins)
        ops = {"add", "min", "max", "exch", "cas", "and", "or", "xor", "inc", "dec"}
        aop = next((p for p in parts[1:] if p in ops), None)
        rest = set(parts[1:]) - {typ, aop, "global", "shared", "shared::cta", "relaxed", "gpu", "sys", "cta",
                                 "acq_rel", "acquire", "release", "noftz"}  # fmt: skip
        if aop is None or rest or typ not in ("u32", "s32", "u64", "s64", "b32", "b64", "f32", "f64"):
            raise JitUnsupported(ins.op)
        if typ[0] == "f" and aop not in ("add", "exch"):
            raise JitUnsupported(ins.op)
        args = ins.args[1:] if ret else ins.args
        addr_op = args[0]
        space = self._resolve(space, addr_op, ins)
        if space not in (None, "global", "shared"):
            raise JitUnsupported(f"{ins.op} on {space}")
        _, a = self._address(addr_op)
        size = type_size(typ)
        what = f"{ins.op} (line {ins.line})"
        if space is None and typ == "f32" and aop == "add":
            raise JitUnsupported(f"{ins.op} (generic f32 add: its flush-to-zero depends on the space)")
        p = self._ptr(space, a, size, size, what, True)
        if self.mode == "check":
            return
        b = self.b
        lt = _ltype(typ)
        it = ir.IntType(8 * size)
        q = b.bitcast(p, it.as_pointer())
        old_bits = self._tag(b.load(q, align=size), space)
        old = b.bitcast(old_bits, lt) if lt in (F32, F64) else old_bits
        v = self.read(args[1], typ)
        signed = typ[0] == "s"
        if aop == "add":
            if lt == F32:
                if space == "global":  # global f32 atomics flush subnormals (PTX ISA, atom)
                    new = self._ftz(b.fadd(self._ftz(old), self._ftz(v)))
                else:
                    new = b.fadd(old, v)
                new = self._canon(new)
            elif lt == F64:
                new = b.fadd(old, v)
            else:
                new = b.add(old, v)
        elif aop == "exch":
            new = v
        elif aop == "cas":
            c = self.read(args[2], typ)
            new = b.select(b.icmp_unsigned("==", old, v), c, old)
        elif aop in ("min", "max"):
            cmp = b.icmp_signed if signed else b.icmp_unsigned
            lt_ = cmp("<", v, old)
            new = b.select(lt_, v, old) if aop == "min" else b.select(lt_, old, v)
        elif aop in ("and", "or", "xor"):
            new = {"and": b.and_, "or": b.or_, "xor": b.xor}[aop](old, v)
        elif aop == "inc":
            if typ != "u32":
                raise JitUnsupported(ins.op)
            new = b.select(b.icmp_unsigned(">=", old, v), ir.Constant(I32, 0), b.add(old, ir.Constant(I32, 1)))
        else:  # dec
            if typ != "u32":
                raise JitUnsupported(ins.op)
            wrap = b.or_(b.icmp_unsigned("==", old, ir.Constant(I32, 0)), b.icmp_unsigned(">", old, v))
            new = b.select(wrap, v, b.sub(old, ir.Constant(I32, 1)))
        nb = b.bitcast(new, it) if lt in (F32, F64) else new
        self._tag(b.store(nb, q, align=size), space)
        if ret:
            self.write(ins.args[0], old, typ)
