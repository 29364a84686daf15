"""Code generation of memory accesses with the interpreter's bounds and alignment checks (memspaces.py),
and of atomics (a mixin of codegen.Codegen)."""

from __future__ import annotations

from gpushim.cuda_errors import Err
from gpushim.ptx.jit import layout as L
from gpushim.ptx.jit import rtlib
from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import (
    _SPACES,
    F32,
    F64,
    I1,
    I32,
    I64,
    P8,
    P64,
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

    def _ptr(self, space, a, size: int, align: int, what: str, store: bool, base=None):
        """Host pointer (i8*) for `size`-byte elements at i64 address a in space (None: generic), after the
        bounds and alignment checks of memspaces.py. base: the address operand's base register or symbol (global
        accesses of the same base and size share an allocation cache; None: one of its own)."""
        if space is None:
            return self._generic_ptr(a, size, align, what, store, base)
        b = self.b
        if space == "global":
            return self._global_ptr(a, align, what, base)
        if space in ("shared", "local"):
            buf = self.shbuf if space == "shared" else self.lobuf
            if self.mode != "fast":
                limit = self.shsize if space == "shared" else self.losize
                self._bounds_check(a, (space, limit), align, f"{what}: {space} access of {align} bytes out of bounds",
                                   Err.MISALIGNED_ADDRESS, f"{what}: misaligned {space} access")  # fmt: skip
            return b.gep(buf, [a])
        if space == "kparam":
            if store:
                raise JitUnsupported("store to kernel parameter space")
            if isinstance(a, ir.Constant) and a.constant % size == 0 and a.constant + align <= self.prog.param_bytes:
                # a named parameter: within the buffer, which the launch checks holds param_bytes at least
                return b.gep(self.kparam, [a])
            if self.mode != "fast":
                msg = f"{what}: kernel parameter access out of bounds"
                self._bounds_check(a, ("kparam", self.psize), size, msg, Err.ILLEGAL_ADDRESS, msg)  # (misaligned too)
            return b.gep(self.param, [a])
        raise JitUnsupported(f"{space} space")

    def _rot(self, x, align: int):
        """x rotated right by log2(align) bits: x / align when x is a multiple of align, else (its low bits on
        top) at least 2**64 / align, above any count of align-byte elements. So `_rot(x, align) <u n` holds
        exactly when x is a multiple of align below n * align: the bounds and the alignment in one compare."""
        if align == 1:
            return x
        name = "llvm.fshr.i64"
        try:
            fshr = self.m.get_global(name)
        except KeyError:
            fshr = ir.Function(self.m, ir.FunctionType(I64, [I64, I64, I64]), name=name)
        return self.b.call(fshr, [x, x, ir.Constant(I64, align.bit_length() - 1)])

    def _bounds_check(self, a, limit: tuple, align: int, msg: str, miscode: int, mismsg: str) -> None:
        """Fault unless [a, a + align) lies in [0, limit) and a is a multiple of align (a power of 2): out of
        bounds ILLEGAL_ADDRESS with msg, else miscode with mismsg. limit: (key, i64 value of the launch); its
        count of align-byte elements (limit >> log2(align)) is computed once, before the thread's dispatch."""
        key = (limit[0], align)
        n = self._bounds.get(key)
        if n is None:
            n = self._bounds[key] = self._bounds_b.lshr(limit[1], ir.Constant(I64, align.bit_length() - 1))
        b = self.b
        ok = b.icmp_unsigned("<", self._rot(a, align), n)
        if self.mode == "check":
            self._check(b.not_(ok), 0, "", a)  # ORed into the check pass's flag
            return
        site = self._site(Err.ILLEGAL_ADDRESS, msg)
        if align > 1:
            self._site(miscode, mismsg)  # (site + 1)
        # one fault exit per space and size in the function, the address and the site in its phis (LLVM folds
        # no call per site into one)
        if key not in self._bounds_fault:
            fb = ir.IRBuilder(self.f.append_basic_block("bounds_fault"))
            phis = fb.phi(I64), fb.phi(I64)
            c = ir.Constant
            fb.call(self._mem_miss_fn(), [self.ctx, self.t, self.blk, phis[0], c(I64, align), phis[1], c(P64, None),
                                          limit[1], c(I64, miscode)])  # fmt: skip
            fb.branch(self.fail_blk)
            self._bounds_fault[key] = fb.block, phis
        fail, phis = self._bounds_fault[key]
        phis[0].add_incoming(a, b.block)
        phis[1].add_incoming(ir.Constant(I64, site), b.block)
        okb = self.f.append_basic_block()
        b.cbranch(ok, okb, fail).set_weights([1 << 20, 1])  # faults are cold: lay out the good path straight
        b.position_at_end(okb)

    def _bounds_block(self, b: ir.IRBuilder) -> ir.IRBuilder:
        """Ends the thread function's entry (b) in a block of the launch constants of bounds checks, computed
        there at their first use (_bounds_check); returns a builder at its end, for the dispatch."""
        blk = self.f.append_basic_block("bounds")
        b.branch(blk)
        self._bounds: dict = {}
        self._caches: dict = {}  # (base, bytes) -> the slots of their allocation cache (_global_ptr)
        self._bounds_fault: dict = {}  # (space, bytes) -> (block, phis) of _bounds_check's fault exit
        self._bounds_b = ir.IRBuilder(blk)
        self._bounds_b.position_at_start(blk)
        return ir.IRBuilder(blk)

    def _record_fault(self, b: ir.IRBuilder, ctx, code, site, addr, t, blk) -> None:
        _record_fault(b, ctx, code, site, addr, t, blk)

    def _mem_miss_fn(self) -> ir.Function:
        """mem_miss (below): the runtime library's, or without the library a definition in the module."""

        def build(m: ir.Module, name: str) -> ir.Function:
            if m is self.m:  # (no library: find_alloc is the module's)
                return _mem_miss(m, name, self.find_alloc)
            fa = self.rt_chunk.define(("find_alloc",), _find_alloc)  # (a chunk is self-contained)
            return _mem_miss(m, name, m.get_global(fa))

        return rtlib.function(self, ("mem_miss",), "mem_miss", _MEM_MISS, build)

    def _global_ptr(self, a, align: int, what: str, base=None):
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
        # the allocation cache of this site (shared by the sites of the same base and size, which mostly hit the
        # same allocation: [%rd12], [%rd12+4], ...): the allocation last hit, as lo (aligned) and n, the count
        # of align-byte elements from lo within it (0: none); the hot path tests [a, a + align) within it and a
        # aligned in one compare, anything else takes the checked path (mem_miss), which refills it
        key = (getattr(base, "name", None), align)
        slots = self._caches.get(key) if key[0] is not None else None
        if slots is None:  # (its pointers computed once, before the dispatch)
            k = self.ncache
            self.ncache += 1
            slots = self._cache_slot(2 * k, self._bounds_b), self._cache_slot(2 * k + 1, self._bounds_b)
            if key[0] is not None:
                self._caches[key] = slots
        plo, pn = slots
        hit = b.icmp_unsigned("<", self._rot(b.sub(a, b.load(plo)), align), b.load(pn))
        slow = self.f.append_basic_block()
        fast = self.f.append_basic_block()
        b.cbranch(hit, fast, slow).set_weights([1 << 10, 1])
        b.position_at_end(slow)
        site = self._site(Err.ILLEGAL_ADDRESS, f"{what}: {align} bytes out of bounds")
        if align > 1:
            self._site(Err.MISALIGNED_ADDRESS, f"{what}: misaligned {align}-byte access")
        args = [a, ir.Constant(I64, align), ir.Constant(I64, site), plo, ir.Constant(I64, 0)]
        bad = b.call(self._mem_miss_fn(), [self.ctx, self.t, self.blk, *args, ir.Constant(I64, Err.MISALIGNED_ADDRESS)])
        b.cbranch(bad, self.fail_blk, fast).set_weights([1, 1 << 20])
        b.position_at_end(fast)
        return b.gep(self.arena, [b.sub(a, self.base)])

    def _generic_ptr(self, a, size, align, what, store, base=None):
        """A generic address: in one of the windows of shared, local or parameter memory (operands.py), or
        global; the window by one switch on (a - SHARED_WINDOW) / WINDOW_SIZE."""
        b = self.b
        windows = [("shared", SHARED_WINDOW), ("local", LOCAL_WINDOW), ("kparam", PARAM_WINDOW)]
        assert all(w == SHARED_WINDOW + i * WINDOW_SIZE for i, (_, w) in enumerate(windows))
        assert WINDOW_SIZE & (WINDOW_SIZE - 1) == 0
        done = self.f.append_basic_block()
        other = self.f.append_basic_block()
        which = b.lshr(b.sub(a, ir.Constant(I64, SHARED_WINDOW)), ir.Constant(I64, WINDOW_SIZE.bit_length() - 1))
        sw = b.switch(which, other)
        results = []
        for i, (name, w) in enumerate(windows):
            yes = self.f.append_basic_block()
            sw.add_case(ir.Constant(I64, i), yes)
            b.position_at_end(yes)
            off = b.sub(a, ir.Constant(I64, w))
            if name == "kparam" and store:
                self._check(ir.Constant(I1, 1), Err.ILLEGAL_ADDRESS, f"{what}: store to kernel parameter space", a)
                p = ir.Constant(P8, None)
            else:
                p = self._ptr(name, off, size, align, what, store)
            results.append((p, b.block))
            b.branch(done)
        b.position_at_end(other)
        p = self._global_ptr(a, align, what, base)
        results.append((p, b.block))
        b.branch(done)
        b.position_at_end(done)
        phi = b.phi(P8)
        for p, blk in results:
            phi.add_incoming(p, blk)
        return phi

    def _declare_find_alloc(self) -> None:
        """find_alloc (below): the runtime library's (rtlib.py; built into the kernel's chunk of it when the
        process lacks it), or without the library a definition in the module. Starts the module's list of library
        functions it calls (pure.py's rt_used)."""
        if not rtlib.enabled():
            self.find_alloc = _find_alloc(self.m, "find_alloc")
            self.find_alloc.linkage = "internal"
            return
        key = ("find_alloc",)
        self.rt_used = {}
        if rtlib.size(rtlib.name(key)) is None:
            self.rt_chunk = self.rt_chunk or rtlib.Chunk()
            self.rt_chunk.define(key, _find_alloc)
        f = self.find_alloc = ir.Function(self.m, _FIND_ALLOC, name=rtlib.name(key))
        f.attributes.add("readonly")  # (reads the context and the allocation table)
        f.attributes.add("nounwind")
        self.rt_used[f.name] = key

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
        p = self._ptr(space, a, size, size * vec, what, False, addr_op.base)
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
        p = self._ptr(space, a, size, size * vec, what, True, addr_op.base)
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
        p = self._ptr(space, a, size, size, what, True, addr_op.base)
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


_FIND_ALLOC = ir.FunctionType(ir.LiteralStructType([I1, I64, I64]), [P64, I64, I64])


def _find_alloc(m: ir.Module, name: str) -> ir.Function:
    """{i1 ok, i64 lo, i64 hi} @find_alloc(ctx, a, end): binary search of the allocation [lo, hi) holding [a, end)
    (values, not pointers: the callers' caches of [lo, hi) then stay in registers)."""
    rt = _FIND_ALLOC.return_type
    f = ir.Function(m, _FIND_ALLOC, name=name)
    f.attributes.add("noinline")
    ctx, a, end = f.args
    b = ir.IRBuilder(f.append_basic_block("e"))
    tab = b.inttoptr(b.load(b.gep(ctx, [ir.Constant(I32, L.ALLOCS)])), P64)
    n = b.load(b.gep(ctx, [ir.Constant(I32, L.NALLOCS)]))
    loop = f.append_basic_block("loop")
    body = f.append_basic_block("body")
    after = f.append_basic_block("after")
    entry = b.block
    b.branch(loop)
    b.position_at_end(loop)
    lo = b.phi(I64)
    hi = b.phi(I64)
    lo.add_incoming(ir.Constant(I64, 0), entry)
    hi.add_incoming(n, entry)
    b.cbranch(b.icmp_unsigned("<", lo, hi), body, after)
    b.position_at_end(body)
    mid = b.lshr(b.add(lo, hi), ir.Constant(I64, 1))
    start = b.load(b.gep(tab, [b.shl(mid, ir.Constant(I64, 1))]))
    le = b.icmp_unsigned("<=", start, a)
    nlo = b.select(le, b.add(mid, ir.Constant(I64, 1)), lo)
    nhi = b.select(le, hi, mid)
    lo.add_incoming(nlo, body)
    hi.add_incoming(nhi, body)
    b.branch(loop)
    b.position_at_end(after)
    # lo: the first allocation starting above a; lo - 1 is the candidate
    found = f.append_basic_block("cand")
    none = f.append_basic_block("none")
    b.cbranch(b.icmp_unsigned("==", lo, ir.Constant(I64, 0)), none, found)
    b.position_at_end(none)
    b.ret(ir.Constant(rt, [ir.Constant(I1, 0), ir.Constant(I64, 1), ir.Constant(I64, 0)]))
    b.position_at_end(found)
    k = b.sub(lo, ir.Constant(I64, 1))
    s = b.load(b.gep(tab, [b.shl(k, ir.Constant(I64, 1))]))
    e = b.load(b.gep(tab, [b.add(b.shl(k, ir.Constant(I64, 1)), ir.Constant(I64, 1))]))
    ok = b.and_(b.icmp_unsigned("<=", end, e), b.icmp_unsigned(">=", end, a))
    r = b.insert_value(ir.Constant(rt, ir.Undefined), ok, 0)
    r = b.insert_value(r, s, 1)
    b.ret(b.insert_value(r, e, 2))
    return f

_MEM_MISS = ir.FunctionType(I1, [P64, I64, I64, I64, I64, I64, P64, I64, I64])


def _record_fault(b: ir.IRBuilder, ctx, code, site, addr, t, blk) -> None:
    for slot, v in ((L.ERR, code), (L.ERR_SITE, site), (L.ERR_ADDR, addr), (L.ERR_THREAD, t), (L.ERR_BLOCK, blk)):
        b.store(v, b.gep(ctx, [ir.Constant(I32, slot)]))


def _mem_miss(m: ir.Module, name: str, find_alloc: ir.Function) -> ir.Function:
    """i1 @mem_miss(ctx, t, block, a, align, site, cache, limit, miscode): the checked path, out of line, of an
    access of align bytes at a that the hot path's compare did not pass. A global access (cache: its i64[2]
    allocation cache, _global_ptr): the allocation holding [a, a + align) (find_alloc) becomes the cache (lo: its
    start rounded up to align; n: how many align-byte elements from lo it holds, >= 1), returns 0. Otherwise the
    fault is recorded, returns 1: out of bounds (global: in no allocation; cache null: not within [0, limit))
    ILLEGAL_ADDRESS at site, else misaligned, code miscode at site + 1. (One helper for all, kernel-independent:
    in the runtime library; each function a module defines costs LLVM a few ms. The caches stay in memory: no
    copies per thread.)"""
    f = ir.Function(m, _MEM_MISS, name=name)
    f.attributes.add("noinline")
    ctx, t, blk, a, align, site, cache, limit, miscode = f.args
    b = ir.IRBuilder(f.append_basic_block("e"))
    end = b.add(a, align)
    mask = b.sub(align, ir.Constant(I64, 1))
    mis = b.icmp_unsigned("!=", b.and_(a, mask), ir.Constant(I64, 0))
    glob, win = f.append_basic_block("global"), f.append_basic_block("window")
    good, bad = f.append_basic_block("hit"), f.append_basic_block("fault")
    b.cbranch(b.icmp_unsigned("!=", cache, ir.Constant(P64, None)), glob, win)
    b.position_at_end(glob)
    found = b.call(find_alloc, [ctx, a, end])
    found_ok = b.extract_value(found, 0)
    b.cbranch(b.and_(found_ok, b.not_(mis)), good, bad)
    b.position_at_end(win)  # (the caller saw a fault: out of bounds or misaligned)
    inside = b.and_(b.icmp_unsigned("<=", end, limit), b.icmp_unsigned(">=", end, a))
    b.branch(bad)
    b.position_at_end(bad)
    ok = b.phi(I1)
    ok.add_incoming(found_ok, glob)
    ok.add_incoming(inside, win)
    oob = b.not_(ok)
    code = b.select(oob, ir.Constant(I64, Err.ILLEGAL_ADDRESS), miscode)
    _record_fault(b, ctx, code, b.select(oob, site, b.add(site, ir.Constant(I64, 1))), a, t, blk)
    b.ret(ir.Constant(I1, 1))
    b.position_at_end(good)
    lo = b.and_(b.add(b.extract_value(found, 1), mask), b.not_(mask))  # (allocations start far below 2**64)
    b.store(lo, cache)
    # (hi - lo) // align: hi >= a + align > lo
    b.store(b.udiv(b.sub(b.extract_value(found, 2), lo), align), b.gep(cache, [ir.Constant(I64, 1)]))
    b.ret(ir.Constant(I1, 0))
    return f
