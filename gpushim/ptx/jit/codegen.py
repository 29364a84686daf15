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

from gpushim.cuda_errors import Err
from gpushim.ptx.jit import layout as L
from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import (
    _NOPS,
    ERR_RET,
    F32,
    F64,
    I1,
    I8,
    I32,
    I64,
    P8,
    P64,
    JitUnsupported,
    _ltype,
)
from gpushim.ptx.jit.launchgen import LaunchOps
from gpushim.ptx.jit.liveness import cycles_without_barrier, referenced
from gpushim.ptx.jit.namedbar import NamedBarOps, bar_form
from gpushim.ptx.jit.ops_alu import AluOps
from gpushim.ptx.jit.ops_async import AsyncCopyOps
from gpushim.ptx.jit.ops_float import FloatOps
from gpushim.ptx.jit.ops_half import HALF_OPS, HalfOps, half_type
from gpushim.ptx.jit.ops_hwround import HwRoundOps
from gpushim.ptx.jit.ops_intx import IntExtraOps
from gpushim.ptx.jit.ops_mbarrier import MbarrierOps, is_mbar_wait
from gpushim.ptx.jit.ops_mem import MemOps
from gpushim.ptx.jit.ops_round import DIRECTED, DirectedOps
from gpushim.ptx.jit.ops_sys import SysOps
from gpushim.ptx.jit.ops_timer import TimerOps
from gpushim.ptx.jit.ops_video import PACKED_INT_TYPES, VIDEO_OPS, VideoOps
from gpushim.ptx.jit.ops_warp import WarpOps, is_bar_red, is_collective
from gpushim.ptx.jit.pure import PureHelpers
from gpushim.ptx.jit.remat import Remat, dominators
from gpushim.ptx.jit.stops import StopOps
from gpushim.ptx.jit.taint import why_unchecked
from gpushim.ptx.jit.wmma_track import WmmaTrack, is_wmma_ldst, ldst_inline
from gpushim.ptx.link import Program
from gpushim.ptx.nodes import Addr, Imm, Instr, Module, Neg, Reg, Sym
from gpushim.ptx.operands import TIMERS
from gpushim.ptx.types import storage_type

BLOCK_COST = 25  # a basic block's cost in IR instructions for LLVM's full code generator (Codegen.t1_cost)
_FIXED_SPECIALS = {"%nsmid": 132, "%gridid": 1, "%nwarpid": 64}  # the interpreter's values (state.py)


class Codegen(
    AluOps, FloatOps, HalfOps, DirectedOps, HwRoundOps, IntExtraOps, MemOps, WarpOps, SysOps, TimerOps, VideoOps,
    LaunchOps, PureHelpers, AsyncCopyOps, StopOps, NamedBarOps, MbarrierOps, WmmaTrack,
):
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
        self.host_calls = False  # printf, assert, malloc or free: the launch needs its host callback (ops_sys.py)

    # -- module ---------------------------------------------------------------------------------------------
    def _declare_intrinsics(self) -> None:
        m = self.m

        def fn(name, ret, args):
            return ir.Function(m, ir.FunctionType(ret, args), name=name)

        self.i_fma32 = fn("llvm.fma.f32", F32, [F32, F32, F32])
        self.i_fma64 = fn("llvm.fma.f64", F64, [F64, F64, F64])
        self.i_sqrt32 = fn("llvm.sqrt.f32", F32, [F32])
        self.i_sqrt64 = fn("llvm.sqrt.f64", F64, [F64])
        self.i_memset = fn("llvm.memset.p0i8.i64", ir.VoidType(), [P8, I8, I64, I1])
        self.i_memcpy = fn("llvm.memcpy.p0i8.p0i8.i64", ir.VoidType(), [P8, P8, I64, I1])
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
        """A launch constant, from the launch function's private copy of the context (loads from memory no
        kernel store can reach: LLVM hoists them out of the thread loops)."""
        return self._invariant(self.b.load(self.b.gep(self.kc, [ir.Constant(I32, slot)])))

    def _invariant(self, ld):
        """Mark a load of what does not change during a launch (context slots, parameters, symbol addresses):
        LLVM may then hoist it out of the thread loop although the kernel stores through other pointers."""
        ld.set_metadata("invariant.load", self.m.add_metadata([]))
        return ld

    # (coll_in, coll_out: the operand and the result slots of warp collectives, ops_warp.py)
    _SCOPES = ("global", "shared", "local", "kparam", "spill", "state", "coll_in", "coll_out")

    def _tag(self, instr, space: str | None):
        """Alias scopes: the device arena, one block's shared memory, the local frames, the parameters, the
        spill area and the thread states are distinct buffers, which LLVM cannot know (their addresses come
        from the context); told so, it may keep values in registers across stores and vectorise thread loops.
        Generic accesses (space None) stay untagged: they may alias anything."""
        if space is None or space not in self._SCOPES:
            return instr
        if not hasattr(self, "_scope_md"):
            m = self.m
            dom = m.add_metadata([ir.MetaDataString(m, "gpushim.ptx.jit")])
            scopes = {s: m.add_metadata([ir.MetaDataString(m, "gpushim." + s), dom]) for s in self._SCOPES}
            self._scope_md = {
                s: (m.add_metadata([scopes[s]]), m.add_metadata([scopes[o] for o in self._SCOPES if o != s]))
                for s in self._SCOPES
            }
        own, others = self._scope_md[space]
        instr.set_metadata("alias.scope", own)
        instr.set_metadata("noalias", others)
        return instr

    def _ctx_ptr(self, slot: int, ty=P8):
        return self.b.inttoptr(self._ctx(slot), ty)

    # -- thread function ------------------------------------------------------------------------------------
    def _thread_fn(self, mode: str = "exact", outlinable: bool = False) -> ir.Function:
        """One thread from a resume point. mode "exact": every access checked, a fault ends the launch;
        "check": no memory touched, every check ORed into a flag or, for global accesses, the range of
        addresses per instruction gathered (acache: [flag, (min, max, or) per global access]); barriers are
        no-ops; returns 0, or ERR_RET when the watchdog stopped it; "fast": no memory checks (the check pass
        found none failing). outlinable (exact mode): the count as a local copy, written back where the function
        returns without a fault (its exit, its stops: _count_out), so that outline() may keep it out of the thread
        loop."""
        self.mode = mode
        self.barriers = []
        self.bar_info: dict[int, tuple[int, int, bool]] = {}  # resume point -> barrier form (namedbar.py)
        self.ncache = 0
        self.acache_resets: list = []  # after each free (ops_sys.py)
        self.check_sites: list[int] = []  # check mode: bytes of each global access
        self._abort = None
        self._fault = None
        fty = ir.FunctionType(I32, [P64, I64, I32, I64, I64, I64, I64, I64, I64, I64, P64, P64, P64, P8])
        f = ir.Function(self.m, fty, name={"exact": "thread", "check": "thread_check", "fast": "thread_fast"}[mode])
        f.linkage = "internal"
        (self.ctx, self.t, self.resume, cx, cy, cz, self.blk, tx, ty, tz, self.acache, self.cnt, self.kc,
         self.kparam) = f.args
        self.ctaid = (cx, cy, cz)
        self.f = f
        self.entry = entry = f.append_basic_block("entry")
        self.b = b = ir.IRBuilder(entry)
        code = self.prog.code
        self.wmma_inline = ldst_inline(code)  # wmma.load/store in place, not stops (wmma_track.py)
        self.bar_idx = [i for i, ins in enumerate(code)
                        if ins.parts[0] in ("bar", "barrier") or is_mbar_wait(ins)
                        or (is_collective(ins) and not (self.wmma_inline and is_wmma_ldst(ins)))]
        # registers (zero at the start where some path may read one before writing it: the interpreter's value)
        self.regs: dict[str, tuple] = {}
        unset = self.read_first = self._liveness()[-1] & set(self.prog.regs)  # (not the special registers)
        used = referenced(self.prog)
        for name, t in self.prog.regs.items():
            if name not in used:
                continue
            if t == "pred":
                lt = I1
            else:
                sdt = storage_type(t)
                lt = ir.IntType(8 * sdt.itemsize)
            a = b.alloca(lt, name=name.replace("%", "r_"))
            if name in unset:
                b.store(ir.Constant(lt, 0), a)
            self.regs[name] = (a, lt)
        self._known: dict[str, ir.Value] = {}  # register -> its value, valid in block self._known_blk (_reg)
        self._known_blk = None
        self.pending = 0  # instructions counted since the count was last updated (updated per straight run)
        # constants of the launch
        self.arena = self._ctx_ptr(L.ARENA)
        self.base = self._ctx(L.BASE)
        self.param = self._ctx_ptr(L.PARAM)  # the parameter buffer (self.kparam: a private copy of its named part)
        self.psize = self._ctx(L.PSIZE)
        self.shsize = self._ctx(L.SHSIZE)
        self.losize = self._ctx(L.LOSIZE)
        self.shbuf = self._ctx_ptr(L.SHBUF)
        self.lobuf = b.gep(self._ctx_ptr(L.LOBUF), [b.mul(self.t, self._ctx(L.LOSTRIDE))])
        # registers live after some barrier get a slot each in the thread's spill area (the others none)
        self.outlinable = outlinable and mode == "exact"
        # inlined into @run's thread loop, where the count becomes a register (outlinable: a local copy, written
        # back at the exit and the stops, which becomes one either way)
        f.attributes.add("alwaysinline")
        if self.outlinable:
            self._cnt_out, self.cnt = self.cnt, b.alloca(I64, name="count")
            b.store(ir.Constant(I64, 0), self.cnt)
        if not hasattr(self, "remat"):
            self.remat = Remat(self.prog)
            if self.bar_idx and not self.remat.idom:  # collectives only (Remat looks for barriers)
                self.remat.idom = dominators(self.prog)
        self._plan_stops()  # what each stop saves and recomputes, the spill slots (stops.py)
        self.spill = self._ctx_ptr(L.SPILL, P64)  # (slot_addr: the layout)
        self.syms = self._ctx_ptr(L.SYMS, P64)
        bx, by, bz = (self._ctx(L.BLOCK + i) for i in range(3))
        self.ntid = (bx, by, bz)
        self.tpb = b.mul(b.mul(bx, by), bz)
        if self.bar_idx and self.thread_major:  # this thread's slots, addressed once
            self.spill_row = b.gep(self.spill, [b.mul(self.t, ir.Constant(I64, self.nspill))])
        self.nctaid = tuple(self._ctx(L.GRID + i) for i in range(3))
        self.tid = (tx, ty, tz)
        # the error exit
        self.fail_blk = f.append_basic_block("fail")
        self.exit_blk = f.append_basic_block("exit")
        body = f.append_basic_block("body")
        self.dispatch = self._bounds_block(b).switch(self.resume, body)  # (ops_mem.py: launch constants of checks)
        # code
        self.b = ir.IRBuilder(body)
        self._emit_code()
        self._fill_acache_resets()
        b = self.b = ir.IRBuilder(self.exit_blk)
        self._count_out()  # (a failed launch reports no count)
        b.ret(ir.Constant(I32, 0))
        b = self.b = ir.IRBuilder(self.fail_blk)  # a failed launch reports no count
        b.ret(ir.Constant(I32, ERR_RET))
        return f

    def _count_out(self) -> None:
        """Before a return without a fault: the local count (outlinable) added to the caller's."""
        if self.outlinable:
            b = self.b
            b.store(b.add(b.load(self._cnt_out), b.load(self.cnt)), self._cnt_out)

    def outline(self, stops: bool = True) -> bool:
        """Keep tier 1's thread function out of the launch's thread loops (a call per thread), when outlinable
        (and, in a kernel with stops, when `stops`: kernel.OUTLINE_STOPS_COST).
        For large kernels (compiled with the cheap code generator, kernel.t1_codegen): inlined into the thread
        loop nest, the whole kernel body sits in a loop, which costs LLVM about twice the optimisation and code
        generation time; a call per thread costs little beside the work of hundreds of instructions. The pure
        helpers (pure.py) stay out of line too. So does the launch function: inlined into @run after the thread
        function was inlined into it, LLVM's inliner copies the whole kernel twice (a third of the optimisation
        time of cubBlockOps). Returns whether the thread function is outlined."""
        self._pure_noinline()
        self.m.get_global("run_exact").attributes.remove("alwaysinline")
        if self.outlinable and (stops or not self.bar_idx):
            self.thread_exact.attributes.remove("alwaysinline")
            self.thread_exact.attributes.add("noinline")
            return True
        return False

    def ir_size(self, inlined: bool = True) -> int:
        """Instructions of the module (what LLVM's compile time grows with); inlined: with the pure helpers'
        calls counted as the bodies tier 1's pipeline inlines in their place (what the full generator gets)."""
        n = sum(len(blk.instructions) for fn in self.m.functions for blk in fn.blocks)
        return n - self._pure_size() + self.inlined_extra if inlined else n

    def t1_cost(self) -> int:
        """The full code generator's estimated cost of the module, in IR instructions (kernel.t1_codegen): its
        instructions (inlined) plus BLOCK_COST per basic block."""
        return self.ir_size() + BLOCK_COST * sum(len(fn.blocks) for fn in self.m.functions)

    def _cache_slot(self, j: int, b: ir.IRBuilder | None = None):
        """Slot j of the launch's allocation caches (ops_mem._global_ptr; ops_sys resets them after a free), as a
        pointer emitted with b (default self.b). (In memory: the checked path's helper updates them.)"""
        return (b or self.b).gep(self.acache, [ir.Constant(I64, j)])

    def _flush_count(self) -> None:
        """Add the instructions of the straight run behind us to the thread-instruction count (before every
        branch, label and barrier: one add per run instead of one per instruction)."""
        if self.pending:
            b = self.b
            b.store(b.add(b.load(self.cnt), ir.Constant(I64, self.pending)), self.cnt)
            self.pending = 0

    def _emit_code(self) -> None:
        code = self.prog.code
        starts: dict[int, ir.Block] = {}
        for _, idx in self.prog.labels.items():
            if idx not in starts:
                starts[idx] = self.f.append_basic_block(f"L{idx}")
        self.label_blk = {name: starts[idx] for name, idx in self.prog.labels.items()}
        self.label_idx = dict(self.prog.labels)
        # backward branches poll the watchdog, unless each cycle through them passes a barrier (then the
        # launch function polls between rounds; check mode, where barriers are no-ops, polls them all)
        back = [(i, self.label_idx[ins.args[0].name]) for i, ins in enumerate(code)
                if ins.parts[0] == "bra" and ins.args and isinstance(ins.args[0], Sym)
                and self.label_idx.get(ins.args[0].name, len(code)) <= i]  # fmt: skip
        self.poll_at = cycles_without_barrier(self.prog, back)
        for i, ins in enumerate(code):
            if i in starts:
                if not self.b.block.is_terminated:
                    self._flush_count()
                    self.b.branch(starts[i])
                self.b.position_at_end(starts[i])
            if self.b.block.is_terminated:  # unreachable code after a branch
                self.b.position_at_end(self.f.append_basic_block(f"dead{i}"))
            self.i = i
            self.ins = ins
            self._instr(ins)
        if len(code) in starts:
            if not self.b.block.is_terminated:
                self._flush_count()
                self.b.branch(starts[len(code)])
            self.b.position_at_end(starts[len(code)])
        if not self.b.block.is_terminated:
            self._flush_count()
            self.b.branch(self.exit_blk)

    # -- operands -------------------------------------------------------------------------------------------
    def _reg(self, name: str):
        """The value of a register: the value last stored or loaded in the current LLVM block, else a load (less
        IR for Python to build and print and for LLVM to parse and promote). Every store to a register's alloca
        in a block goes through write(), or happens in a block of its own (barrier resume points)."""
        if self._known_blk is not self.b.block:
            self._known = {}
            self._known_blk = self.b.block
        v = self._known.get(name)
        if v is None:
            v = self._known[name] = self.b.load(self.regs[name][0])
        return v

    def _conv_bits(self, v, to: ir.IntType, signed: bool):
        w, tw = v.type.width, to.width
        if w == tw:
            return v
        if isinstance(v, ir.Constant) and isinstance(v.constant, int):  # folded here: less IR
            x = v.constant & ((1 << w) - 1)
            if tw == 1:
                return ir.Constant(to, int(x != 0))
            if signed and w > 1 and x >> (w - 1):
                x -= 1 << w
            return ir.Constant(to, x & ((1 << tw) - 1))
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
                v = self._reg(op.name)
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
        v = self._conv_bits(bits, rt, typ[0] == "s")
        b.store(v, a)
        if self._known_blk is not b.block:
            self._known = {}
            self._known_blk = b.block
        self._known[op.name] = v

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
        if name.startswith("%lanemask_"):
            return self._lanemask(name)
        if name in TIMERS:
            return self._timer(name)  # ops_timer.py
        if name == "%smid":  # the interpreter's (state.py): the block's linear index modulo its 132 SMs
            (cx, cy, cz), (gx, gy, _) = self.ctaid, self.nctaid
            lin = b.add(b.mul(b.add(b.mul(cz, gy), cy), gx), cx)
            return b.trunc(b.urem(lin, ir.Constant(I64, 132)), I32)
        if name in _FIXED_SPECIALS:
            return ir.Constant(I32, _FIXED_SPECIALS[name])
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
        _, rt = self.regs[base.name]
        if rt.width not in (32, 64):
            raise JitUnsupported("narrow address register")
        v = self._reg(base.name)
        if op.offset & ((1 << rt.width) - 1):  # (no add of 0: less IR to compile)
            v = self.b.add(v, ir.Constant(rt, op.offset & ((1 << rt.width) - 1)))
        return None, self.b.zext(v, I64) if rt.width == 32 else v

    # -- faults ---------------------------------------------------------------------------------------------
    def _site(self, code: int, msg: str) -> int:
        self.sites.append((code, msg))
        return len(self.sites) - 1

    def _check(self, bad, code: int, msg: str, addr, bad2=None, code2: int = 0, msg2: str = "", mem=True) -> None:
        """Branch to a fault exit when bad (i1) holds, or bad2 (a second fault, reported when bad does not hold):
        one branch on the hot path for both. Check mode ORs the condition into a flag instead; fast mode
        leaves memory checks out."""
        b = self.b
        if self.mode == "check":
            cond = bad if bad2 is None else b.or_(bad, bad2)
            b.store(b.or_(b.load(self.acache), b.zext(cond, I64)), self.acache)
            return
        if self.mode == "fast" and mem:
            return
        site = self._site(code, msg)
        okb = self.f.append_basic_block()
        failb = self.f.append_basic_block()
        cond = bad if bad2 is None else b.or_(bad, bad2)
        b.cbranch(cond, failb, okb).set_weights([1, 1 << 20])  # faults are cold: lay out the good path straight
        b.position_at_end(failb)
        code_v, site_v = ir.Constant(I64, code), ir.Constant(I64, site)
        if bad2 is not None:
            code_v = b.select(bad, code_v, ir.Constant(I64, code2))
            site_v = b.select(bad, site_v, ir.Constant(I64, self._site(code2, msg2)))
        # one block of the function records every fault (fewer instructions to compile than a copy per check)
        if self._fault is None:
            cur = b.block
            blk = self.f.append_basic_block("fault")
            b.position_at_end(blk)
            phis = b.phi(I64), b.phi(I64), b.phi(I64)
            self._record_fault(b, self.ctx, *phis, self.t, self.blk)
            b.branch(self.fail_blk)
            self._fault = blk, phis
            b.position_at_end(cur)
        blk, phis = self._fault
        for phi, v in zip(phis, (code_v, site_v, addr), strict=True):
            phi.add_incoming(v, b.block)
        b.branch(blk)
        b.position_at_end(okb)

    # -- instructions ---------------------------------------------------------------------------------------
    def _instr(self, ins: Instr) -> None:
        self.pending += 1
        op = ins.parts[0]
        if op in ("bra", "ret", "exit"):
            self._control(ins)
            return
        if self.wmma_inline and is_wmma_ldst(ins):
            self._wmma_inline(ins)
            return
        if is_collective(ins):
            self._collective(ins)
            return
        if is_bar_red(ins):
            self._bar_red(ins)
            return
        if op in ("bar", "barrier"):
            if ins.guard is not None:
                raise JitUnsupported("predicated barrier")
            self._barrier(ins)
            return
        if ins.guard is not None:
            self._when(self._guard(ins), lambda: self._body(ins, op))
            return
        self._body(ins, op)

    def _guard(self, ins: Instr):
        """The instruction's guard predicate (@p / @!p) as an i1."""
        pred = self.read(Reg(ins.guard[0]), "pred")
        return self.b.not_(pred) if ins.guard[1] else pred

    def _when(self, cond, emit) -> None:
        """Code from emit() in a block that runs only where cond (i1) holds; continues after it."""
        b = self.b
        yes = self.f.append_basic_block()
        join = self.f.append_basic_block()
        b.cbranch(cond, yes, join)
        b.position_at_end(yes)
        emit()
        b.branch(join)
        b.position_at_end(join)

    def _control(self, ins: Instr) -> None:
        b = self.b
        op = ins.parts[0]
        if op == "bra":
            if len(ins.args) != 1 or not isinstance(ins.args[0], Sym) or ins.args[0].name not in self.label_blk:
                raise JitUnsupported(f"{ins.op} target")
            target = self.label_blk[ins.args[0].name]
            if self.label_idx[ins.args[0].name] <= self.i and (self.mode == "check" or self.i in self.poll_at):
                target = self._poll(target)
        else:
            target = self.exit_blk
        self._flush_count()
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
        if self._abort is None:
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
        form = bar_form(ins)  # (id, count, arrive-only); other than (0, -1, False): named (namedbar.py)
        if self.mode == "check":  # no memory: nothing to wait for
            return
        self.bar_info[self._stop()] = form

    def _body(self, ins: Instr, op: str) -> None:
        h = getattr(self, "op_" + op.replace("@", "at_"), None)
        if op in _NOPS:
            return
        if op in HALF_OPS and half_type(ins):  # half precision (ops_half.py)
            self._half(ins)
            return
        if op in ("atom", "red") and half_type(ins):
            self._half_atomic(ins)  # ops_half.py
            return
        if op == "cvt" and half_type(ins) and self._half_cvt(ins):
            return
        if op == "cvt" and DIRECTED & set(ins.parts) and ins.parts[-2] != "tf32":  # (tf32: op_cvt)
            self._cvt_directed(ins)  # ops_round.py
            return
        if op in ("addc", "subc", "madc") or (op in ("add", "sub", "mad") and "cc" in ins.parts):
            self._carry(ins)  # carry chains (ops_intx.py)
            return
        if op in VIDEO_OPS:
            self._video(ins)  # SIMD video instructions (ops_video.py)
            return
        if op in ("min", "max") and ins.parts[-1] in PACKED_INT_TYPES:
            self._packed_minmax(ins)  # ops_video.py
            return
        if h is None:
            raise JitUnsupported(ins.op)
        h(ins)


def generate(mod: Module, prog: Program, name: str, tier: int = 1) -> Codegen:
    """Tier 1: the exact code (every access checked; Codegen.outline() may keep it out of the thread loops).
    Tier 2, for kernels that qualify (taint.py): the check
    pass and the fast code (no memory checks, barrier regions as thread loops); for the others the exact code
    again (kernel.py optimises tier 2 further)."""
    g = Codegen(mod, prog, name)
    g._declare_intrinsics()
    g._declare_find_alloc()
    g.unchecked = why_unchecked(prog)
    g.thread_major = tier == 1  # the spill area's layout (Codegen.slot_addr)
    if tier == 1:
        g.helpers = {}  # pure expansions as helper functions (pure.py)
    if tier == 1 or g.unchecked is not None:
        g.thread_exact = exact = g._thread_fn("exact", outlinable=tier == 1)
        g._run_fn(g._launch_fn("run_exact", exact, g.ncache, bool(g.barriers), yieldable=tier == 1))
        return g
    check = g._check_fn(g._thread_fn("check"), g.check_sites)
    fast = g._thread_fn("fast")
    barriers = bool(g.barriers)
    g._run_fn(g._launch_fn("run_fast", fast, 0, barriers, len(g.barriers) + 1 if barriers else 0, vectorise=True),
              check)
    return g
