"""Compile-time operand resolution: readers and writers for registers, immediates, special registers and
symbol addresses. Every reader is `f(st, idx) -> value` and every writer `f(st, idx, value)`, where `st` is the
launch state (state.State) and `idx` the sorted thread indices of the running group, or None for all threads.
"""

from __future__ import annotations

import numpy as np

from gpushim.ptx.errors import PtxError, PtxUnsupported
from gpushim.ptx.link import Program
from gpushim.ptx.nodes import Addr, Imm, Instr, Module, Neg, Reg, Sym, VarDecl
from gpushim.ptx.types import BOOL, U, np_type, storage_type
from gpushim.ptx.values import const, conv, ndarray, partial_write

SPECIALS = {
    "%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z", "%ctaid.x", "%ctaid.y", "%ctaid.z",
    "%nctaid.x", "%nctaid.y", "%nctaid.z", "%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid", "%gridid",
    "%lanemask_eq", "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt", "%dynamic_smem_size",
    "%total_smem_size", "%aggr_smem_size", "%warpsize",
}  # fmt: skip
TIMERS = {"%clock", "%clock64", "%clock_hi", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi"}
_ZERO_SPECIALS = {f"%pm{i}" for i in range(8)} | {f"%pm{i}_64" for i in range(8)} | {f"%envreg{i}" for i in range(32)}

GRID_WORKSPACE = "%grid_workspace"  # key of the cooperative-groups grid workspace's address in a launch's symbols

# Generic-address windows of the per-block shared and per-thread local spaces and of the kernel parameters.
SHARED_WINDOW = 0x1000_0000_0000
LOCAL_WINDOW = 0x1100_0000_0000
PARAM_WINDOW = 0x1200_0000_0000
WINDOW_SIZE = 0x0100_0000_0000


class Ctx:
    """Everything instruction compilers need to resolve names of one linked kernel."""

    def __init__(self, mod: Module, prog: Program) -> None:
        self.mod = mod
        self.prog = prog
        self.kernel = prog.kernel
        self.globals: dict[str, VarDecl] = {v.name: v for v in mod.variables if v.space in ("global", "const")}
        self.reg_index: dict[str, int] = {}
        self.reg_dtype: list[np.dtype] = []
        for name, t in prog.regs.items():
            self.add_reg(name, storage_type(t))
        self.ins: Instr | None = None
        self.specials_used: set[str] = set()  # special registers the kernel reads

    def add_reg(self, name: str, dt: np.dtype) -> int:
        k = len(self.reg_dtype)
        self.reg_index[name] = k
        self.reg_dtype.append(dt)
        return k

    def hidden_reg(self, name: str, dt: np.dtype) -> int:
        k = self.reg_index.get(name)
        return self.add_reg(name, dt) if k is None else k

    def fail(self, what: str) -> PtxUnsupported:
        return PtxUnsupported(what, self.kernel, self.ins.line if self.ins else 0)

    def error(self, what: str) -> PtxError:
        line = self.ins.line if self.ins else 0
        return PtxError(f"line {line}: {what} (kernel {self.kernel})")

    # -- readers ----------------------------------------------------------------------------------------
    def reader(self, op, typ: str):
        dt = np_type(typ)
        if isinstance(op, Reg):
            k = self.reg_index.get(op.name)
            if k is not None:
                return _reg_reader(k, dt, self.reg_dtype[k])
            return self.special_reader(op.name, dt)
        if isinstance(op, Imm):
            c = imm_value(op, typ)
            return lambda st, idx: c
        if isinstance(op, Neg):
            r = self.reader(op.inner, "pred")
            return lambda st, idx: ~r(st, idx)
        if isinstance(op, Sym) and op.name == "WARP_SZ":  # the PTX predefined constant
            c = const(32, dt)
            return lambda st, idx: c
        if isinstance(op, Sym):
            r = self.symbol_address(op.name, op.offset)
            if dt.itemsize != 8:
                return lambda st, idx: conv(r(st, idx), dt)
            return r if dt is U[8] else (lambda st, idx: r(st, idx).view(dt))
        raise self.error(f"unexpected operand {op}")

    def special_reader(self, name: str, dt: np.dtype):
        if name in SPECIALS:
            self.specials_used.add(name)

            def rd(st, idx, name=name):
                v = st.sp[name]
                if idx is not None and v.__class__ is ndarray:
                    v = v.take(idx, mode="clip")
                return v if v.dtype is dt else conv(v, dt)

            return rd
        if name in TIMERS:
            return lambda st, idx: conv(st.timer(name), dt)
        if name in ("%envreg1", "%envreg2"):
            # cooperative groups' grid workspace (high, low 32 bits): launches of kernels reading it get one
            self.grid_sync = True
            shift = 32 if name == "%envreg1" else 0
            return lambda st, idx: conv(np.uint32((st.sym.src.get(GRID_WORKSPACE, 0) >> shift) & 0xFFFFFFFF), dt)
        if name in _ZERO_SPECIALS:
            z = const(0, dt)
            return lambda st, idx: z
        raise self.fail(f"special register {name}") if name.startswith("%") else self.error(f"unknown name {name}")

    def symbol_address(self, name: str, off: int):
        """Reader of the address of a named variable in its own state space (u64)."""
        p = self.prog
        if name in self.globals:
            o = np.uint64(off)
            return lambda st, idx: st.sym[name] + o
        if name in p.shared:
            c = np.uint64(p.shared[name] + off)
            return lambda st, idx: c
        if name in p.dynamic_shared:
            c = np.uint64(p.dynamic_offset + off)
            return lambda st, idx: c
        if name in p.frame:
            c = np.uint64(p.frame[name] + off)
            return lambda st, idx: c
        if name in p.kparams:
            c = np.uint64(p.kparams[name][0] + off)
            return lambda st, idx: c
        if name in self.mod.functions:
            from gpushim.ptx.link import function_address

            c = np.uint64(function_address(self.mod, name) + off)
            return lambda st, idx: c
        raise self.error(f"undefined symbol {name}")

    def symbol_space(self, name: str) -> str:
        p = self.prog
        if name in self.globals:
            return self.globals[name].space
        if name in p.shared or name in p.dynamic_shared:
            return "shared"
        if name in p.frame:
            return "local"
        if name in p.kparams:
            return "kparam"
        raise self.error(f"undefined symbol {name}")

    # -- writers ----------------------------------------------------------------------------------------
    def writer(self, op):
        if isinstance(op, Reg):
            if op.name == "_":
                return lambda st, idx, v: None
            k = self.reg_index.get(op.name)
            if k is None:
                raise self.error(f"write to undeclared register {op.name}")
            return _reg_writer(k, self.reg_dtype[k])
        raise self.error(f"cannot write to {op}")

    def reg_bits(self, op) -> int:
        if isinstance(op, Reg) and op.name in self.reg_index:
            return self.reg_dtype[self.reg_index[op.name]].itemsize * 8
        return 0

    def address(self, op: Addr):
        """(space of a symbol base or None, reader of the address value as u64 or u32)."""
        if not isinstance(op, Addr):
            raise self.error(f"expected an address, found {op}")
        base = op.base
        off = op.offset
        if base is None:
            c = np.uint64(off & (2**64 - 1))
            return None, lambda st, idx: c
        if isinstance(base, Sym):
            return self.symbol_space(base.name), self.symbol_address(base.name, base.offset + off)
        k = self.reg_index.get(base.name)
        if k is None:
            raise self.error(f"address register {base.name} is not declared")
        dt = self.reg_dtype[k]
        if dt.itemsize not in (4, 8):
            raise self.error(f"address register {base.name} is not 32 or 64 bits wide")
        udt = U[dt.itemsize]
        rd = _reg_reader(k, udt, dt)
        if off == 0:
            return None, rd
        o = const(off, udt)
        return None, lambda st, idx: rd(st, idx) + o


def imm_value(op: Imm, typ: str):
    dt = np_type(typ)
    if op.kind == "f32bits":
        f = np.array(op.value, np.uint32).view(np.float32)[()]
        if dt.kind == "f":
            return dt.type(f)
        return const(op.value, dt)
    if op.kind == "f64bits":
        f = np.array(op.value, np.uint64).view(np.float64)[()]
        if dt.kind == "f":
            return dt.type(f)
        return const(op.value, dt)
    if op.kind == "float":
        if dt.kind == "f":
            return dt.type(op.value)
        if typ == "f16":
            return np.float16(op.value).view(np.uint16)
        return const(int(op.value), dt)
    if dt is BOOL:
        return np.bool_(op.value != 0)
    if dt.kind == "f":
        return dt.type(op.value)
    return const(op.value, dt)


def _reg_reader(k: int, dt: np.dtype, sdt: np.dtype | None = None):
    if sdt is not None and sdt is not dt and sdt.itemsize == dt.itemsize and "b" not in (sdt.kind, dt.kind):
        # the register always holds its storage dtype sdt (the writers convert): a same-width view

        def rdv(st, idx):
            v = st.regs[k]
            if idx is not None and v.__class__ is ndarray:
                v = v.take(idx, mode="clip")
            return v.view(dt) if v.dtype is sdt else conv(v, dt)

        return rdv

    def rd(st, idx):
        v = st.regs[k]
        if idx is not None and v.__class__ is ndarray:
            v = v.take(idx, mode="clip")
        return v if v.dtype is dt else conv(v, dt)

    return rd


def _reg_writer(k: int, sdt: np.dtype):
    def wr(st, idx, v):
        try:
            vd = v.dtype
        except AttributeError:  # a Python scalar
            v = np.asarray(v)
            vd = v.dtype
        if vd is not sdt:
            v = conv(v, sdt)
        if v.__class__ is ndarray and v.ndim == 0:
            v = v[()]
        if idx is None:
            st.regs[k] = v
        else:
            partial_write(st.regs, k, idx, v, sdt, st.n)

    return wr
