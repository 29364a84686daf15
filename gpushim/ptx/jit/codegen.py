"""PTX (a linked kernel, link.Program) -> LLVM IR for the compiling engine.

Each thread runs as scalar code; `@thread(ctx, t, resume, ctaid.x/y/z, block)` runs thread t of a block from a
resume point until it exits (returns 0), reaches a barrier (returns the barrier's resume point; registers saved
in the spill area) or faults (returns -2, the fault described in the context). `@run(ctx)` loops over the blocks
[BEGIN, END) and, per block, runs the threads round after round until all exited: a barrier region of a block
at a time, as CuPBoP/COX do. Registers are allocas (promoted to SSA by LLVM). Anything outside the supported
subset raises JitUnsupported and the kernel runs on the interpreter.
"""

from __future__ import annotations

import struct

from llvmlite import ir

from gpushim.cuda_errors import Err
from gpushim.ptx.jit import layout as L
from gpushim.ptx.jit.liveness import live_after
from gpushim.ptx.link import Program
from gpushim.ptx.nodes import Addr, Imm, Instr, Module, Neg, PredPair, Reg, Sym, Vec
from gpushim.ptx.operands import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, WINDOW_SIZE
from gpushim.ptx.types import TYPES, storage_type, type_size


class JitUnsupported(Exception):
    pass


I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
P8 = I8.as_pointer()
P64 = I64.as_pointer()
_SPACES = {"global": "global", "shared": "shared", "shared::cta": "shared", "local": "local", "const": "global",
           "param": "param", "param::entry": "param", "param::func": "param"}  # fmt: skip
_CMP_I = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "lo": "<", "ls": "<=",
          "hi": ">", "hs": ">="}  # fmt: skip
_CMP_F = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_NOPS = {"membar", "fence", "prefetch", "prefetchu", "nanosleep", "pmevent", "discard"}
ERR_RET = -2


def _ftype(t: str):
    if t == "f32":
        return F32
    if t == "f64":
        return F64
    raise JitUnsupported(f".{t} arithmetic")


def _ltype(t: str):
    if t == "pred":
        return I1
    if t in ("f32", "f64"):
        return _ftype(t)
    if t not in TYPES or t in ("f16", "bf16", "f16x2", "bf16x2", "tf32", "e4m3x2", "e5m2x2", "b128", "u128", "s128"):
        raise JitUnsupported(f".{t} values")
    return ir.IntType(8 * type_size(t))


def _itype(ins: Instr) -> str:
    ts = [p for p in ins.parts[1:] if p in TYPES]
    if not ts:
        raise JitUnsupported(f"{ins.op}: no type")
    return ts[-1]


class Codegen:
    def __init__(self, mod: Module, prog: Program, name: str) -> None:
        self.mod = mod
        self.prog = prog
        self.globals_used = sorted(prog.used_globals)
        self.gindex = {g: i for i, g in enumerate(self.globals_used)}
        self.gvars = {v.name: v for v in mod.variables if v.space in ("global", "const")}
        self.sites: list[tuple[int, str]] = []  # (CUDA error, message prefix)
        self.m = ir.Module(name=name)
        self.m.triple = ""
        self.barriers: list[ir.Block] = []  # resume blocks, by resume point - 1
        self.ncache = 0  # global access sites

    # -- module ---------------------------------------------------------------------------------------------
    def build(self) -> str:
        self._declare_intrinsics()
        self._thread_fn()
        self._run_fn()
        return str(self.m)

    def _declare_intrinsics(self) -> None:
        m = self.m

        def fn(name, ret, args):
            return ir.Function(m, ir.FunctionType(ret, args), name=name)

        self.i_fma32 = fn("llvm.fma.f32", F32, [F32, F32, F32])
        self.i_fma64 = fn("llvm.fma.f64", F64, [F64, F64, F64])
        self.i_sqrt32 = fn("llvm.sqrt.f32", F32, [F32])
        self.i_sqrt64 = fn("llvm.sqrt.f64", F64, [F64])
        self.i_memset = fn("llvm.memset.p0i8.i64", ir.VoidType(), [P8, I8, I64, I1])
        self.i_ctpop = {b: fn(f"llvm.ctpop.i{b}", ir.IntType(b), [ir.IntType(b)]) for b in (32, 64)}
        self.i_ctlz = {b: fn(f"llvm.ctlz.i{b}", ir.IntType(b), [ir.IntType(b), I1]) for b in (32, 64)}
        self.i_brev = {b: fn(f"llvm.bitreverse.i{b}", ir.IntType(b), [ir.IntType(b)]) for b in (32, 64)}
        self.i_round = {}
        for nm in ("roundeven", "floor", "ceil", "trunc"):
            self.i_round[nm, 32] = fn(f"llvm.{nm}.f32", F32, [F32])
            self.i_round[nm, 64] = fn(f"llvm.{nm}.f64", F64, [F64])
        self.i_fptosat = {}
        for s in ("s", "u"):
            for b in (8, 16, 32, 64):
                for fb, ft in ((32, F32), (64, F64)):
                    self.i_fptosat[s, b, fb] = fn(f"llvm.fpto{s}i.sat.i{b}.f{fb}", ir.IntType(b), [ft])

    def _ctx(self, slot: int):
        return self._invariant(self.b.load(self.b.gep(self.ctx, [ir.Constant(I32, slot)])))

    def _invariant(self, ld):
        """Mark a load of what does not change during a launch (context slots, parameters, symbol addresses):
        LLVM may then hoist it out of the thread loop although the kernel stores through other pointers."""
        ld.set_metadata("invariant.load", self.m.add_metadata([]))
        return ld

    def _ctx_ptr(self, slot: int, ty=P8):
        return self.b.inttoptr(self._ctx(slot), ty)

    # -- thread function ------------------------------------------------------------------------------------
    def _thread_fn(self) -> None:
        fty = ir.FunctionType(I32, [P64, I64, I32, I64, I64, I64, I64, I64, I64, I64])
        f = ir.Function(self.m, fty, name="thread")
        f.linkage = "internal"
        self.ctx, self.t, resume, cx, cy, cz, self.blk, tx, ty, tz = f.args
        self.ctaid = (cx, cy, cz)
        self.f = f
        entry = f.append_basic_block("entry")
        self.b = b = ir.IRBuilder(entry)
        # registers
        self.regs: dict[str, tuple] = {}
        for name, t in self.prog.regs.items():
            if t == "pred":
                lt = I1
            else:
                sdt = storage_type(t)
                lt = ir.IntType(8 * sdt.itemsize)
            a = b.alloca(lt, name=name.replace("%", "r_"))
            b.store(ir.Constant(lt, 0), a)
            self.regs[name] = (a, lt)
        self.count = b.alloca(I64, name="count")
        b.store(ir.Constant(I64, 0), self.count)
        # per global access site, the allocation [lo, hi) it hit last (kept from thread to thread)
        self.acache = self._ctx_ptr(L.CACHE, P64)
        # constants of the launch
        self.arena = self._ctx_ptr(L.ARENA)
        self.base = self._ctx(L.BASE)
        self.param = self._ctx_ptr(L.PARAM)
        self.psize = self._ctx(L.PSIZE)
        self.shsize = self._ctx(L.SHSIZE)
        self.losize = self._ctx(L.LOSIZE)
        self.shbuf = self._ctx_ptr(L.SHBUF)
        self.lobuf = b.gep(self._ctx_ptr(L.LOBUF), [b.mul(self.t, self._ctx(L.LOSTRIDE))])
        self.spill = b.gep(self._ctx_ptr(L.SPILL, P64), [b.mul(self.t, ir.Constant(I64, max(len(self.regs), 1)))])
        self.syms = self._ctx_ptr(L.SYMS, P64)
        bx, by, bz = (self._ctx(L.BLOCK + i) for i in range(3))
        self.ntid = (bx, by, bz)
        self.nctaid = tuple(self._ctx(L.GRID + i) for i in range(3))
        self.tid = (tx, ty, tz)
        # the error exit
        self.fail_blk = f.append_basic_block("fail")
        self.exit_blk = f.append_basic_block("exit")
        body = f.append_basic_block("body")
        self.dispatch = b.switch(resume, body)
        # code
        self.b = ir.IRBuilder(body)
        self._emit_code()
        b = self.b = ir.IRBuilder(self.exit_blk)
        self._flush_count()
        b.ret(ir.Constant(I32, 0))
        b = self.b = ir.IRBuilder(self.fail_blk)
        self._flush_count()
        b.ret(ir.Constant(I32, ERR_RET))

    def _flush_count(self) -> None:
        b = self.b
        p = b.gep(self.ctx, [ir.Constant(I32, L.COUNT)])
        b.store(b.add(b.load(p), b.load(self.count)), p)

    def _emit_code(self) -> None:
        code = self.prog.code
        bars = [i for i, ins in enumerate(code) if ins.parts[0] in ("bar", "barrier")]
        self.live = live_after(self.prog, bars) if bars else {}
        starts: dict[int, ir.Block] = {}
        for _, idx in self.prog.labels.items():
            if idx not in starts:
                starts[idx] = self.f.append_basic_block(f"L{idx}")
        self.label_blk = {name: starts[idx] for name, idx in self.prog.labels.items()}
        self.label_idx = dict(self.prog.labels)
        for i, ins in enumerate(code):
            if i in starts:
                if not self.b.block.is_terminated:
                    self.b.branch(starts[i])
                self.b.position_at_end(starts[i])
            if self.b.block.is_terminated:  # unreachable code after a branch
                self.b.position_at_end(self.f.append_basic_block(f"dead{i}"))
            self.i = i
            self.ins = ins
            self._instr(ins)
        if len(code) in starts:
            if not self.b.block.is_terminated:
                self.b.branch(starts[len(code)])
            self.b.position_at_end(starts[len(code)])
        if not self.b.block.is_terminated:
            self.b.branch(self.exit_blk)

    # -- operands -------------------------------------------------------------------------------------------
    def _conv_bits(self, v, to: ir.IntType, signed: bool):
        w, tw = v.type.width, to.width
        if w == tw:
            return v
        if tw == 1:
            return self.b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        if w > tw:
            return self.b.trunc(v, to)
        return self.b.sext(v, to) if signed and w > 1 else self.b.zext(v, to)

    def read(self, op, typ: str):
        b = self.b
        lt = _ltype(typ)
        if isinstance(op, Neg):
            return b.not_(self.read(op.inner, "pred"))
        if isinstance(op, Reg):
            if op.name in self.regs:
                v = b.load(self.regs[op.name][0])
            else:
                v = self._special(op.name)
            return self._from_bits(v, typ, lt)
        if isinstance(op, Imm):
            return self._imm(op, typ, lt)
        if isinstance(op, Sym):
            if op.name == "WARP_SZ":
                return self._from_bits(ir.Constant(I32, 32), typ, lt)
            return self._from_bits(self._sym_addr(op.name, op.offset), typ, lt)
        raise JitUnsupported(f"operand {op}")

    def _from_bits(self, v, typ: str, lt):
        b = self.b
        if typ == "pred":
            return v if v.type.width == 1 else b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        if isinstance(lt, ir.IntType):
            return self._conv_bits(v, lt, False)
        it = ir.IntType(32 if lt == F32 else 64)
        return b.bitcast(self._conv_bits(v, it, False), lt)

    def _imm(self, op: Imm, typ: str, lt):
        if typ == "pred":
            return ir.Constant(I1, int(op.value != 0))
        if op.kind in ("f32bits", "f64bits"):
            bits = int(op.value)
            if isinstance(lt, ir.IntType):
                return ir.Constant(lt, bits & ((1 << lt.width) - 1))
            if op.kind == "f32bits":
                f = struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
            else:
                f = struct.unpack("<d", struct.pack("<Q", bits & (2**64 - 1)))[0]
            return self._fconst(f, lt)
        if op.kind == "float":
            if isinstance(lt, ir.IntType):
                return ir.Constant(lt, int(op.value) & ((1 << lt.width) - 1))
            return self._fconst(float(op.value), lt)
        if isinstance(lt, ir.IntType):
            return ir.Constant(lt, int(op.value) & ((1 << lt.width) - 1))
        return self._fconst(float(op.value), lt)

    def _fconst(self, f: float, lt):
        if lt == F32:  # round to f32 (also: the value must be exactly representable for LLVM)
            bits = struct.unpack("<I", struct.pack("<f", f))[0]
            return self.b.bitcast(ir.Constant(I32, bits), F32)
        bits = struct.unpack("<Q", struct.pack("<d", f))[0]
        return self.b.bitcast(ir.Constant(I64, bits), F64)

    def write(self, op, v, typ: str) -> None:
        if isinstance(op, Reg) and op.name == "_":
            return
        if not isinstance(op, Reg) or op.name not in self.regs:
            raise JitUnsupported(f"write to {op}")
        a, rt = self.regs[op.name]
        b = self.b
        if typ == "pred" or v.type == I1:
            bits = v
        elif v.type in (F32, F64):
            bits = b.bitcast(v, ir.IntType(32 if v.type == F32 else 64))
        else:
            bits = v
        b.store(self._conv_bits(bits, rt, typ[0] == "s"), a)

    def _special(self, name: str):
        b = self.b
        axes = {"x": 0, "y": 1, "z": 2}
        base, _, ax = name.partition(".")
        if base in ("%tid", "%ntid", "%ctaid", "%nctaid") and ax in axes:
            src = {"%tid": self.tid, "%ntid": self.ntid, "%ctaid": self.ctaid, "%nctaid": self.nctaid}[base]
            return b.trunc(src[axes[ax]], I32)
        if name == "%laneid":
            return b.trunc(b.urem(self.t, ir.Constant(I64, 32)), I32)
        if name == "%warpid":
            return b.trunc(b.udiv(self.t, ir.Constant(I64, 32)), I32)
        if name == "%warpsize":
            return ir.Constant(I32, 32)
        if name == "%dynamic_smem_size":
            return b.trunc(self._ctx(L.DYNSH), I32)
        raise JitUnsupported(f"special register {name}")

    def _sym_addr(self, name: str, off: int):
        p = self.prog
        if name in self.gvars:
            if name not in self.gindex:
                raise JitUnsupported(f"global {name}")
            a = self._invariant(self.b.load(self.b.gep(self.syms, [ir.Constant(I32, self.gindex[name])])))
            return self.b.add(a, ir.Constant(I64, off))
        for tab in (p.shared, p.frame):
            if name in tab:
                return ir.Constant(I64, tab[name] + off)
        if name in p.dynamic_shared:
            return ir.Constant(I64, p.dynamic_offset + off)
        if name in p.kparams:
            return ir.Constant(I64, p.kparams[name][0] + off)
        raise JitUnsupported(f"address of {name}")

    def _sym_space(self, name: str) -> str:
        p = self.prog
        if name in self.gvars:
            return "global"
        if name in p.shared or name in p.dynamic_shared:
            return "shared"
        if name in p.frame:
            return "local"
        if name in p.kparams:
            return "kparam"
        raise JitUnsupported(f"symbol {name}")

    def _address(self, op: Addr):
        """(explicit space of a symbol base or None, i64 address)"""
        if not isinstance(op, Addr):
            raise JitUnsupported(f"address {op}")
        base = op.base
        if base is None:
            return None, ir.Constant(I64, op.offset & (2**64 - 1))
        if isinstance(base, Sym):
            return self._sym_space(base.name), self._sym_addr(base.name, base.offset + op.offset)
        if base.name not in self.regs:
            raise JitUnsupported(f"address register {base.name}")
        a, rt = self.regs[base.name]
        if rt.width not in (32, 64):
            raise JitUnsupported("narrow address register")
        v = self.b.add(self.b.load(a), ir.Constant(rt, op.offset & ((1 << rt.width) - 1)))
        return None, self.b.zext(v, I64) if rt.width == 32 else v

    # -- faults ---------------------------------------------------------------------------------------------
    def _site(self, code: int, msg: str) -> int:
        self.sites.append((code, msg))
        return len(self.sites) - 1

    def _check(self, bad, code: int, msg: str, addr) -> None:
        """Branch to a fault exit when bad (i1) holds."""
        b = self.b
        site = self._site(code, msg)
        okb = self.f.append_basic_block()
        failb = self.f.append_basic_block()
        b.cbranch(bad, failb, okb).set_weights([1, 1 << 20])  # faults are cold: lay out the good path straight
        b.position_at_end(failb)
        for slot, v in (
            (L.ERR, ir.Constant(I64, code)),
            (L.ERR_THREAD, self.t),
            (L.ERR_BLOCK, self.blk),
            (L.ERR_ADDR, addr),
            (L.ERR_SITE, ir.Constant(I64, site)),
        ):
            b.store(v, b.gep(self.ctx, [ir.Constant(I32, slot)]))
        b.branch(self.fail_blk)
        b.position_at_end(okb)

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
            self._check(
                b.or_(b.icmp_unsigned(">", end, limit), b.icmp_unsigned("<", end, a)),
                Err.ILLEGAL_ADDRESS,
                f"{what}: {space} access of {align} bytes out of bounds",
                a,
            )
            if align > 1:
                self._check(
                    b.icmp_unsigned("!=", b.and_(a, ir.Constant(I64, align - 1)), ir.Constant(I64, 0)),
                    Err.MISALIGNED_ADDRESS,
                    f"{what}: misaligned {space} access",
                    a,
                )
            return b.gep(self.shbuf if space == "shared" else self.lobuf, [a])
        if space == "kparam":
            if store:
                raise JitUnsupported("store to kernel parameter space")
            if isinstance(a, ir.Constant) and a.constant % size == 0 and a.constant + align <= self.prog.param_bytes:
                # a named parameter: within the buffer, which the launch checks holds param_bytes at least
                return b.gep(self.param, [a])
            end = b.add(a, ir.Constant(I64, size))
            bad = b.or_(b.icmp_unsigned(">", end, self.psize), b.icmp_unsigned("<", end, a))
            bad = b.or_(bad, b.icmp_unsigned("!=", b.and_(a, ir.Constant(I64, size - 1)), ir.Constant(I64, 0)))
            self._check(bad, Err.ILLEGAL_ADDRESS, f"{what}: kernel parameter access out of bounds", a)
            return b.gep(self.param, [a])
        raise JitUnsupported(f"{space} space")

    def _global_ptr(self, a, align: int, what: str):
        b = self.b
        end = b.add(a, ir.Constant(I64, align))
        k = self.ncache
        self.ncache += 1
        plo = b.gep(self.acache, [ir.Constant(I64, 2 * k)])
        phi_ = b.gep(self.acache, [ir.Constant(I64, 2 * k + 1)])
        hit = b.and_(b.icmp_unsigned(">=", a, b.load(plo)), b.icmp_unsigned("<=", end, b.load(phi_)))
        hit = b.and_(hit, b.icmp_unsigned(">=", end, a))
        slow = self.f.append_basic_block()
        fast = self.f.append_basic_block()
        b.cbranch(hit, fast, slow).set_weights([1 << 10, 1])
        b.position_at_end(slow)
        ok = b.call(self.find_alloc, [self.ctx, a, end, plo, phi_])
        self._check(b.not_(ok), Err.ILLEGAL_ADDRESS, f"{what}: {align} bytes out of bounds", a)
        b.branch(fast)
        b.position_at_end(fast)
        if align > 1:
            self._check(
                b.icmp_unsigned("!=", b.and_(a, ir.Constant(I64, align - 1)), ir.Constant(I64, 0)),
                Err.MISALIGNED_ADDRESS,
                f"{what}: misaligned {align}-byte access",
                a,
            )
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
        """i1 @find_alloc(ctx, a, end, lo*, hi*): binary search of the allocation holding [a, end)."""
        fty = ir.FunctionType(I1, [P64, I64, I64, P64, P64])
        f = ir.Function(self.m, fty, name="find_alloc")
        f.linkage = "internal"
        ctx, a, end, plo, phi_ = f.args
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
        b.ret(ir.Constant(I1, 0))
        b.position_at_end(found)
        k = b.sub(lo, ir.Constant(I64, 1))
        s = b.load(b.gep(tab, [b.shl(k, ir.Constant(I64, 1))]))
        e = b.load(b.gep(tab, [b.add(b.shl(k, ir.Constant(I64, 1)), ir.Constant(I64, 1))]))
        ok = b.and_(b.icmp_unsigned("<=", end, e), b.icmp_unsigned(">=", end, a))
        b.store(s, plo)
        b.store(e, phi_)
        b.ret(ok)
        self.find_alloc = f

    # -- instructions ---------------------------------------------------------------------------------------
    def _instr(self, ins: Instr) -> None:
        b = self.b
        b.store(b.add(b.load(self.count), ir.Constant(I64, 1)), self.count)
        op = ins.parts[0]
        if op in ("bra", "ret", "exit"):
            self._control(ins)
            return
        if op in ("bar", "barrier"):
            if ins.guard is not None:
                raise JitUnsupported("predicated barrier")
            self._barrier(ins)
            return
        if ins.guard is not None:
            pred = self.read(Reg(ins.guard[0]), "pred")
            if ins.guard[1]:
                pred = b.not_(pred)
            yes = self.f.append_basic_block()
            join = self.f.append_basic_block()
            b.cbranch(pred, yes, join)
            b.position_at_end(yes)
            self._body(ins, op)
            b.branch(join)
            b.position_at_end(join)
            return
        self._body(ins, op)

    def _control(self, ins: Instr) -> None:
        b = self.b
        op = ins.parts[0]
        if op == "bra":
            if len(ins.args) != 1 or not isinstance(ins.args[0], Sym) or ins.args[0].name not in self.label_blk:
                raise JitUnsupported(f"{ins.op} target")
            target = self.label_blk[ins.args[0].name]
            if self.label_idx[ins.args[0].name] <= self.i:
                target = self._poll(target)
        else:
            target = self.exit_blk
        if ins.guard is None:
            b.branch(target)
            return
        pred = self.read(Reg(ins.guard[0]), "pred")
        if ins.guard[1]:
            pred = b.not_(pred)
        nxt = self.f.append_basic_block()
        b.cbranch(pred, target, nxt)
        b.position_at_end(nxt)

    def _poll(self, target: ir.Block) -> ir.Block:
        """A block on a backward edge that checks the watchdog's abort flag before going on to target."""
        cur = self.b.block
        blk = self.f.append_basic_block()
        b = self.b
        b.position_at_end(blk)
        flag = b.load_atomic(b.gep(self.ctx, [ir.Constant(I32, L.ABORT)]), "monotonic", 8)
        b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(I64, 0)), self.abort_blk(), target)
        b.position_at_end(cur)
        return blk

    def abort_blk(self) -> ir.Block:
        if not hasattr(self, "_abort"):
            cur = self.b.block
            self._abort = blk = self.f.append_basic_block("abort")
            b = self.b
            b.position_at_end(blk)
            site = self._site(Err.LAUNCH_TIMEOUT, "watchdog")
            b.store(ir.Constant(I64, Err.LAUNCH_TIMEOUT), b.gep(self.ctx, [ir.Constant(I32, L.ERR)]))
            b.store(ir.Constant(I64, site), b.gep(self.ctx, [ir.Constant(I32, L.ERR_SITE)]))
            b.store(self.t, b.gep(self.ctx, [ir.Constant(I32, L.ERR_THREAD)]))
            b.store(self.blk, b.gep(self.ctx, [ir.Constant(I32, L.ERR_BLOCK)]))
            b.branch(self.fail_blk)
            b.position_at_end(cur)
        return self._abort

    def _barrier(self, ins: Instr) -> None:
        parts = ins.parts
        if not ({"sync"} <= set(parts[1:]) or parts[1:] == ["aligned", "sync"]) or "red" in parts:
            raise JitUnsupported(ins.op)
        if len(ins.args) != 1 or not isinstance(ins.args[0], Imm) or int(ins.args[0].value) != 0:
            raise JitUnsupported(f"{ins.op} with a barrier id or thread count")
        b = self.b
        k = len(self.barriers) + 1
        # save the registers live after the barrier, return the resume point; resuming restores them and
        # continues after the barrier
        live = [(j, self.regs[r]) for j, r in enumerate(self.regs) if r in self.live[self.i]]
        for j, (a, _) in live:
            b.store(self._conv_bits(b.load(a), I64, False), b.gep(self.spill, [ir.Constant(I64, j)]))
        self._flush_count()
        b.store(ir.Constant(I64, 0), self.count)
        b.ret(ir.Constant(I32, k))
        blk = self.f.append_basic_block(f"resume{k}")
        self.barriers.append(blk)
        self.dispatch.add_case(ir.Constant(I32, k), blk)
        b.position_at_end(blk)
        for j, (a, rt) in live:
            v = b.load(b.gep(self.spill, [ir.Constant(I64, j)]))
            b.store(b.trunc(v, rt) if rt.width < 64 else v, a)

    def _body(self, ins: Instr, op: str) -> None:
        h = getattr(self, "op_" + op.replace("@", "at_"), None)
        if op in _NOPS:
            return
        if h is None:
            raise JitUnsupported(ins.op)
        h(ins)

    def op_trap(self, ins: Instr) -> None:
        self._check(ir.Constant(I1, 1), Err.LAUNCH_FAILURE, f"trap executed by {{who}} (line {ins.line})", self.t)

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

    def op_cvt(self, ins: Instr) -> None:
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
            if "sat" in m:
                raise JitUnsupported(ins.op)
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
        if set(ins.parts[1:]) - {typ}:
            raise JitUnsupported(ins.op)
        typ, (a, c) = self._ints(ins, 2)
        self.write(ins.args[0], self.b.sub(a, c) if sub else self.b.add(a, c), typ)

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

    # floating point
    def _canon(self, r):
        if r.type != F32:
            return r
        b = self.b
        nan = b.bitcast(ir.Constant(I32, 0x7FFFFFFF), F32)
        return b.select(b.fcmp_unordered("uno", r, r), nan, r)

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
        m = self._fmods(ins, allowed)
        args = [self.read(a, typ) for a in ins.args[1:3]]
        b = self.b
        f = {"add": b.fadd, "sub": b.fsub, "mul": b.fmul, "div": b.fdiv}[kind]
        del ft
        self._fwrap(ins, typ, m, args, f)

    def op_fma(self, ins: Instr) -> None:
        typ = _itype(ins)
        _ftype(typ)
        m = self._fmods(ins, {"rn", "ftz", "sat"})
        args = [self.read(a, typ) for a in ins.args[1:4]]
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
        m = self._fmods(ins, {"rn", "approx", "ftz"})
        i = self.i_sqrt32 if typ == "f32" else self.i_sqrt64
        self._fwrap(ins, typ, m, [self.read(ins.args[1], typ)], lambda a: self.b.call(i, [a]))

    def op_rcp(self, ins: Instr) -> None:
        typ = _itype(ins)
        ft = _ftype(typ)
        m = self._fmods(ins, {"rn", "approx", "ftz"})
        b = self.b
        if "approx" in m and typ == "f32":
            f = lambda a: b.fptrunc(b.fdiv(ir.Constant(F64, 1.0), b.fpext(a, F64)), F32)  # noqa: E731
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
        b = self.b
        it = ir.IntType(8 * size)
        for j, d in enumerate(items):
            q = b.bitcast(b.gep(p, [ir.Constant(I64, j * size)]), it.as_pointer())
            v = b.load(q, align=size)
            if space == "kparam":
                self._invariant(v)
            if typ in ("f32", "f64"):
                v = b.bitcast(v, _ftype(typ))
            self.write(d, v, typ if typ not in ("f16", "bf16") else "b16")

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
        b = self.b
        it = ir.IntType(8 * size)
        for j, v in enumerate(vals):
            q = b.bitcast(b.gep(p, [ir.Constant(I64, j * size)]), it.as_pointer())
            b.store(v, q, align=size)

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
        b = self.b
        lt = _ltype(typ)
        it = ir.IntType(8 * size)
        q = b.bitcast(p, it.as_pointer())
        old_bits = b.load(q, align=size)
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
        b.store(nb, q, align=size)
        if ret:
            self.write(ins.args[0], old, typ)

    # -- the block driver -----------------------------------------------------------------------------------
    def _run_fn(self) -> None:
        f = ir.Function(self.m, ir.FunctionType(I32, [P64]), name="run")
        (ctx,) = f.args
        b = ir.IRBuilder(f.append_basic_block("e"))

        def slot(k):
            return self._invariant(b.load(b.gep(ctx, [ir.Constant(I32, k)])))

        gx, gy = slot(L.GRID), slot(L.GRID + 1)
        bx, by, bz = slot(L.BLOCK), slot(L.BLOCK + 1), slot(L.BLOCK + 2)
        tpb = b.mul(b.mul(bx, by), bz)
        shbuf = b.inttoptr(slot(L.SHBUF), P8)
        lobuf = b.inttoptr(slot(L.LOBUF), P8)
        state = b.inttoptr(slot(L.STATE), I32.as_pointer())
        shsize = slot(L.SHSIZE)
        lobytes = b.mul(tpb, slot(L.LOSTRIDE))
        begin, end = slot(L.BEGIN), slot(L.END)
        entry = b.block
        blk_loop = f.append_basic_block("blocks")
        blk_body = f.append_basic_block("block")
        done = f.append_basic_block("done")
        failed = f.append_basic_block("failed")
        b.branch(blk_loop)
        b.position_at_end(blk_loop)
        bi = b.phi(I64)
        bi.add_incoming(begin, entry)
        b.cbranch(b.icmp_unsigned("<", bi, end), blk_body, done)
        b.position_at_end(blk_body)
        cx = b.urem(bi, gx)
        cy = b.urem(b.udiv(bi, gx), gy)
        cz = b.udiv(bi, b.mul(gx, gy))
        false = ir.Constant(I1, 0)
        b.call(self.i_memset, [shbuf, ir.Constant(I8, 0), shsize, false])
        b.call(self.i_memset, [lobuf, ir.Constant(I8, 0), lobytes, false])
        b.call(self.i_memset, [b.bitcast(state, P8), ir.Constant(I8, 0), b.mul(tpb, ir.Constant(I64, 4)), false])
        rnd = f.append_basic_block("round")
        thr = f.append_basic_block("thr")
        run_t = f.append_basic_block("run_t")
        nxt_t = f.append_basic_block("next_t")
        rnd_end = f.append_basic_block("round_end")
        blk_next = f.append_basic_block("block_next")
        pre = b.block
        b.branch(rnd)
        b.position_at_end(rnd)
        b.branch(thr)
        b.position_at_end(thr)
        t = b.phi(I64)
        live = b.phi(I1)
        tx, ty, tz = b.phi(I64), b.phi(I64), b.phi(I64)
        for v in (t, tx, ty, tz):
            v.add_incoming(ir.Constant(I64, 0), rnd)
        live.add_incoming(false, rnd)
        sp = b.gep(state, [t])
        s = b.load(sp)
        b.cbranch(b.icmp_signed("<", s, ir.Constant(I32, 0)), nxt_t, run_t)
        b.position_at_end(run_t)
        r = b.call(self.f, [ctx, t, s, cx, cy, cz, bi, tx, ty, tz])
        ok_t = f.append_basic_block("ok_t")
        b.cbranch(b.icmp_signed("==", r, ir.Constant(I32, ERR_RET)), failed, ok_t)
        b.position_at_end(ok_t)
        exited = b.icmp_signed("==", r, ir.Constant(I32, 0))
        b.store(b.select(exited, ir.Constant(I32, -1), r), sp)
        live2 = b.or_(live, b.not_(exited))
        b.branch(nxt_t)
        b.position_at_end(nxt_t)
        lv = b.phi(I1)
        lv.add_incoming(live, thr)
        lv.add_incoming(live2, ok_t)
        t2 = b.add(t, ir.Constant(I64, 1))
        t.add_incoming(t2, nxt_t)
        one = ir.Constant(I64, 1)
        zero = ir.Constant(I64, 0)
        tx1 = b.add(tx, one)
        wx = b.icmp_unsigned("==", tx1, bx)
        ty1 = b.select(wx, b.add(ty, one), ty)
        wy = b.icmp_unsigned("==", ty1, by)
        tx.add_incoming(b.select(wx, zero, tx1), nxt_t)
        ty.add_incoming(b.select(wy, zero, ty1), nxt_t)
        tz.add_incoming(b.select(wy, b.add(tz, one), tz), nxt_t)
        live.add_incoming(lv, nxt_t)
        b.cbranch(b.icmp_unsigned("<", t2, tpb), thr, rnd_end)
        b.position_at_end(rnd_end)
        b.cbranch(lv, rnd, blk_next)
        b.position_at_end(blk_next)
        # the watchdog, once per block
        flag = b.load_atomic(b.gep(ctx, [ir.Constant(I32, L.ABORT)]), "monotonic", 8)
        stop = f.append_basic_block("stop")
        bi2 = b.add(bi, ir.Constant(I64, 1))
        cont = f.append_basic_block("cont")
        b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(I64, 0)), stop, cont)
        b.position_at_end(cont)
        bi.add_incoming(bi2, cont)
        b.branch(blk_loop)
        b.position_at_end(stop)
        b.store(ir.Constant(I64, Err.LAUNCH_TIMEOUT), b.gep(ctx, [ir.Constant(I32, L.ERR)]))
        b.store(
            ir.Constant(I64, self._site(Err.LAUNCH_TIMEOUT, "watchdog")), b.gep(ctx, [ir.Constant(I32, L.ERR_SITE)])
        )
        b.store(bi, b.gep(ctx, [ir.Constant(I32, L.ERR_BLOCK)]))
        b.ret(ir.Constant(I32, 1))
        b.position_at_end(done)
        b.ret(ir.Constant(I32, 0))
        b.position_at_end(failed)
        b.ret(ir.Constant(I32, 1))
        del pre


def generate(mod: Module, prog: Program, name: str) -> Codegen:
    g = Codegen(mod, prog, name)
    g._declare_intrinsics()
    g._declare_find_alloc()
    g._thread_fn()
    g._run_fn()
    return g
