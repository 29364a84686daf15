"""The engine's public face: load a PTX module, describe its kernels and globals, launch kernels."""

from __future__ import annotations

import hashlib
import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx import devrt
from gpushim.ptx.compiler import Kernel, compile_kernel
from gpushim.ptx.errors import PtxError, PtxUnsupported
from gpushim.ptx.jit import engine as jit_engine
from gpushim.ptx.jit.pending import Handoff, Pending
from gpushim.ptx.jit.pending import background as jit_background
from gpushim.ptx.link import align_up, function_address, link_kernel
from gpushim.ptx.nodes import Imm, Module, Sym, VarDecl
from gpushim.ptx.operands import GRID_WORKSPACE, PARAM_WINDOW, SHARED_WINDOW, WINDOW_SIZE
from gpushim.ptx.parser import parse
from gpushim.ptx.regcount import register_estimate
from gpushim.ptx.scheduler import run_batch
from gpushim.ptx.state import Batch, Geometry, State
from gpushim.ptx.types import type_size

BATCH_THREADS = 1 << 15  # threads per batch of whole blocks
MAX_LOCAL_BATCH_BYTES = 128 << 20
MAX_BLOCK_THREADS = 1024
MAX_BLOCK_DIM = (1024, 1024, 64)
MAX_GRID_DIM = (2**31 - 1, 65535, 65535)
MAX_SHARED_BYTES = 232448  # 227 KiB, the opt-in maximum per block of sm_80/sm_90
MAX_PLANS = 64  # cached launch configurations per module
CO_RESIDENT_THREADS = 132 * 2048  # threads resident at once on the emulated device (SMs x threads per SM)
BACKGROUND_COMPILE_THREADS = 1 << 15  # launches of at most this many threads do not wait for a kernel's code
HANDOFF_BATCH_THREADS = 4096  # threads per batch while the kernel compiles in the background (jit/pending.py)
CACHED_BATCH_THREADS = 4096  # launches of at most this many threads keep their batch constants in the plan
_BLOCK_SPECIALS = frozenset({"%ctaid.x", "%ctaid.y", "%ctaid.z", "%smid"})


@dataclass(frozen=True)
class ParamInfo:
    offset: int
    size: int
    align: int


@dataclass(frozen=True)
class KernelInfo:
    name: str
    params: list[ParamInfo]
    param_bytes: int
    static_shared_bytes: int
    local_bytes: int
    registers: int = 32  # numRegs (gpushim/ptx/regcount.py); a kernel the engine cannot run keeps 32


@dataclass(frozen=True)
class GlobalVar:
    name: str
    space: str  # global | const
    size: int
    align: int
    init: bytes
    # (byte offset in the variable, target symbol, addend): address initialisers, patched at the first launch
    relocs: tuple = field(default=())


_UNSEEN = object()


@dataclass(slots=True)
class _Plan:
    """What every launch of one kernel with one configuration (grid, block, dynamic shared memory, parameter
    buffer size) shares; the configuration passed every check of PtxModule._plan."""

    kern: Kernel
    geo: Geometry
    k: int  # blocks per batch
    nblocks: int
    shared_total: int
    batch: Batch | None  # the constants of the only batch, for single-batch launches
    param_pad: bytes  # zeros after the parameters, up to the parameter buffer's size
    used_globals: tuple[str, ...]
    specials: tuple[str, ...]  # per-block special registers the kernel reads (made with each batch)
    grid_sync: bool = False  # reads the grid workspace (%envreg1/2): one batch, a workspace per launch


@dataclass
class LaunchStats:
    thread_instructions: int
    wall_s: float
    blocks: int


def _init_bytes(v: VarDecl) -> tuple[bytes, tuple]:
    size = v.size
    buf = bytearray(size)
    relocs = []
    if not v.init:
        return bytes(buf), ()
    es = type_size(v.type)
    for i, item in enumerate(v.init):
        off = i * es
        if off + es > size:
            raise PtxError(f"line {v.line}: too many initialisers for {v.name}")
        if isinstance(item, Sym):
            relocs.append((off, item.name, item.offset))
            continue
        assert isinstance(item, Imm)
        t = v.type
        if t == "f32" or (item.kind == "float" and es == 4 and t[0] == "f"):
            b = struct.pack("<f", item.value) if item.kind == "float" else int(item.value).to_bytes(4, "little")
        elif t == "f64":
            b = struct.pack("<d", item.value) if item.kind == "float" else int(item.value).to_bytes(8, "little")
        else:
            val = int(item.value) if item.kind != "float" else int(item.value)
            b = (val & ((1 << (8 * es)) - 1)).to_bytes(es, "little")
        buf[off : off + es] = b
    return bytes(buf), tuple(relocs)


class PtxModule:
    def __init__(self, mod: Module, name: str = "", strict: bool = True) -> None:
        self.name = name
        self._mod = mod
        self.ptx_version = mod.version
        self.target = mod.target
        self.watchdog_s = float(os.environ.get("GPUSHIM_PTX_WATCHDOG_S", "120"))
        self.globals: dict[str, GlobalVar] = {}
        for v in mod.variables:
            if v.space in ("global", "const") and not v.extern:
                init, relocs = _init_bytes(v)
                self.globals[v.name] = GlobalVar(v.name, v.space, v.size, v.align, init, relocs)
        self._has_relocs = any(g.relocs for g in self.globals.values())
        self.source_hash = ""  # set by load_module: the key of compiled kernels in the JIT's cache
        self.engine = jit_engine()
        self.kernels: dict[str, KernelInfo] = {}
        self._compiled: dict[str, Kernel] = {}
        self._relocated: set = set()
        self._geometries: dict = {}  # launch geometry -> thread-index arrays, reused by repeated launches
        self._plans: dict[tuple, _Plan] = {}  # (kernel, grid, block, shared bytes, parameter bytes) -> _Plan
        self._jit: dict[str, Any] = {}  # kernel -> the last jit_kernel() answer (a JitKernel or None)
        # kernel -> why it cannot run (only with strict=False; strict modules raise instead)
        self.unsupported: dict[str, str] = {}
        self.devrt_kernels: set[str] = set()  # kernels that launch kernels
        # kernels whose first instruction is an unconditional ret/exit: every thread ends at once, touching
        # nothing, so a launch (once its configuration passed the checks) only counts one instruction a thread
        self.trivial: set[str] = set()
        for fn in mod.functions.values():
            if fn.kind != "entry" or not fn.defined:
                continue
            try:
                try:
                    prog = link_kernel(mod, fn.name)
                    kern = compile_kernel(mod, prog)
                except (PtxError, PtxUnsupported):
                    raise
                except Exception as e:  # a construct the compiler does not know: the kernel cannot run
                    raise PtxUnsupported(f"{type(e).__name__}: {e}", fn.name) from e
            except PtxUnsupported as e:
                if strict:
                    raise
                self.unsupported[fn.name] = str(e)
                self.kernels[fn.name] = _declared_info(fn)
                continue
            self._compiled[fn.name] = kern
            if prog.code and prog.code[0].guard is None and prog.code[0].op.split(".")[0] in ("ret", "exit"):
                self.trivial.add(fn.name)
            if devrt.uses_devrt(prog):
                self.devrt_kernels.add(fn.name)
            self.kernels[fn.name] = KernelInfo(
                fn.name,
                [ParamInfo(o, s, a) for o, s, a in prog.param_layout],
                prog.param_bytes,
                prog.static_shared,
                prog.frame_bytes,
                register_estimate(prog, (fn.launch_bounds.get("maxnreg") or (None,))[0]),
            )

    # -- launch ---------------------------------------------------------------------------------------------
    def launch(self, kernel: str, grid, block, shared_bytes: int, params: bytes, memory, symbols: dict[str, int],
               output: Callable[[bytes], None]) -> LaunchStats:
        if kernel in self.devrt_kernels:  # launches kernels: it and what it launches (gpushim/ptx/devrt.py)
            return devrt.launch_tree(self, kernel, grid, block, shared_bytes, params, memory, symbols, output)
        return self._launch_grid(kernel, grid, block, shared_bytes, params, memory, symbols, output)

    def _launch_grid(
        self,
        kernel: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared_bytes: int,
        params: bytes,
        memory,
        symbols: dict[str, int],
        output: Callable[[bytes], None],
    ) -> LaunchStats:
        t0 = time.perf_counter()
        try:
            plan = self._plans.get((kernel, grid, block, shared_bytes, len(params)))
        except TypeError:  # unhashable grid or block (lists): no cached plan
            plan = None
        if plan is None:
            plan = self._plan(kernel, grid, block, shared_bytes, params)
        lo, hi = memory.base, memory.base + memory.capacity
        if lo < PARAM_WINDOW + WINDOW_SIZE and hi > SHARED_WINDOW:
            raise CudaError(Err.INVALID_VALUE, "device memory overlaps the emulator's shared/local windows")
        for g in plan.used_globals:
            if g not in symbols:
                raise CudaError(Err.INVALID_VALUE, f"module global {g} has no device address")
        if self._has_relocs:
            self.apply_relocations(memory, symbols)
        if kernel in self.trivial:  # nothing runs: neither engine needs to start
            return LaunchStats(plan.nblocks * plan.geo.tpb, time.perf_counter() - t0, plan.nblocks)
        psize = len(params)
        jk = None
        if self.engine != "interp" and self.source_hash and not plan.grid_sync:
            jk = self._jit.get(kernel, _UNSEEN)
            if jk is _UNSEEN:
                # small launches start on the interpreter while the kernel compiles in the background; larger
                # ones wait for the code (interpreting them costs more than the compile: bench/README.md)
                background = self.engine == "auto" and plan.nblocks * plan.geo.tpb <= BACKGROUND_COMPILE_THREADS
                jk = self.jit_kernel(kernel, wait=not (background and jit_background()))
                if isinstance(jk, Pending):  # compiling in the background: the interpreter starts the launch
                    pbuf = np.frombuffer(bytearray(params) + plan.param_pad, np.uint8)
                    count = self._interpret_until_compiled(jk, plan, kernel, shared_bytes, memory, symbols, pbuf,
                                                           psize, output)  # fmt: skip
                    return LaunchStats(count, time.perf_counter() - t0, plan.nblocks)
            if jk is not None and self.engine != "diff":  # the JIT copies the bytes: no numpy buffer to build
                count = jk.launch(plan, shared_bytes, memory, symbols, bytes(params) + plan.param_pad, psize,
                                  self.watchdog_s, output)
                return LaunchStats(count, time.perf_counter() - t0, plan.nblocks)
        pbuf = bytearray(params)
        pbuf.extend(plan.param_pad)
        pbuf = np.frombuffer(pbuf, np.uint8)
        if jk is not None:  # the "diff" engine: both run, memory compared
            from gpushim.ptx.jit.diff import launch_both

            count = launch_both(
                jk,
                lambda out: self._interpret(plan, kernel, shared_bytes, memory, symbols, pbuf, psize, out),
                lambda out: jk.launch(plan, shared_bytes, memory, symbols, pbuf, psize, self.watchdog_s, out),
                kernel,
                memory,
                output,
            )
            return LaunchStats(count, time.perf_counter() - t0, plan.nblocks)
        if not plan.grid_sync:
            count = self._interpret(plan, kernel, shared_bytes, memory, symbols, pbuf, psize, output)
            return LaunchStats(count, time.perf_counter() - t0, plan.nblocks)
        # Cooperative groups' grid sync (on the interpreter) counts arrivals in a zeroed workspace whose address
        # the kernel reads from %envreg1/%envreg2; every block of the grid runs in one batch, so all meet there.
        ws = memory.alloc(16, kind="grid_sync")
        try:
            memory.fill(ws, 0, 16)
            syms = {**symbols, GRID_WORKSPACE: ws}
            count = self._interpret(plan, kernel, shared_bytes, memory, syms, pbuf, psize, output)
        finally:
            memory.free(ws)
        return LaunchStats(count, time.perf_counter() - t0, plan.nblocks)

    def _plan(self, kernel: str, grid, block, shared_bytes: int, params: bytes) -> _Plan:
        """Check a launch configuration and work out what every launch with it shares (cached: repeated
        launches of a kernel with the same configuration skip the checks and the setup)."""
        kern = self._compiled.get(kernel)
        if kern is None:
            if kernel in self.unsupported:
                raise CudaError(Err.NOT_SUPPORTED, self.unsupported[kernel])
            raise CudaError(Err.INVALID_VALUE, f"no kernel {kernel!r} in module {self.name!r}")
        info = self.kernels[kernel]
        key = (kernel, grid, block, shared_bytes, len(params))
        grid = tuple(int(x) for x in grid)
        block = tuple(int(x) for x in block)
        _check_config(grid, block, shared_bytes, info)
        _check_bounds(self._mod.functions[kernel].launch_bounds, block, kernel)
        if not (
            info.param_bytes <= len(params) <= align_up(info.param_bytes, 8)
            or (info.param_bytes == 0 and len(params) <= 8)
        ):
            raise CudaError(
                Err.INVALID_VALUE, f"kernel {kernel} takes {info.param_bytes} bytes of parameters, got {len(params)}"
            )
        shared_bytes = int(shared_bytes)
        prog = kern.prog
        shared_total = (
            prog.dynamic_offset + shared_bytes if (prog.dynamic_shared or shared_bytes) else prog.static_shared
        )
        tpb = block[0] * block[1] * block[2]
        nblocks = grid[0] * grid[1] * grid[2]
        k = max(1, min(nblocks, BATCH_THREADS // tpb))
        lo_stride = align_up(max(prog.frame_bytes, 1), 16)
        if prog.frame_bytes:
            k = max(1, min(k, MAX_LOCAL_BATCH_BYTES // (tpb * lo_stride)))
        grid_sync = bool(getattr(kern.ctx, "grid_sync", False))
        if grid_sync:
            # a grid that syncs runs as one batch: as many threads as the device holds at once, at most
            if nblocks * tpb > CO_RESIDENT_THREADS:
                raise CudaError(Err.COOPERATIVE_LAUNCH_TOO_LARGE, f"kernel {kernel} syncs its grid of "
                                f"{nblocks * tpb} threads; at most {CO_RESIDENT_THREADS} run at once")
            k = nblocks
        gkey = (grid, block, k, shared_total, prog.frame_bytes)
        geo = self._geometries.get(gkey)
        if geo is None:
            if len(self._geometries) > 32:
                self._geometries.clear()
                self._plans.clear()  # plans hold geometries: drop them too, which bounds what stays cached
            geo = self._geometries[gkey] = Geometry(grid, block, k, shared_total, prog.frame_bytes)
        # a small launch of one batch reuses its batch's constants (special registers) from launch to launch
        eager = tuple(sorted(kern.ctx.specials_used & _BLOCK_SPECIALS))
        small = nblocks <= k and nblocks * tpb <= CACHED_BATCH_THREADS
        batch = Batch(geo, 0, nblocks, shared_total, shared_bytes, eager) if small else None
        plan = _Plan(
            kern,
            geo,
            k,
            nblocks,
            shared_total,
            batch,
            bytes(align_up(len(params), 16) + 16 - len(params)),
            tuple(sorted(prog.used_globals)),
            eager,
            grid_sync,
        )
        if len(self._plans) >= MAX_PLANS:
            self._plans.clear()
        try:
            self._plans[key] = plan
        except TypeError:  # unhashable grid or block
            pass
        return plan

    def _interpret(self, plan, kernel, shared_bytes, memory, symbols, pbuf, psize, output) -> int:
        deadline = time.monotonic() + self.watchdog_s
        return _run_ignoring_fp(plan, kernel, shared_bytes, memory, symbols, pbuf, psize, output, deadline)

    def jit_kernel(self, kernel: str, wait: bool = True):
        """The kernel compiled to native code (gpushim.ptx.jit), or None when it runs on the interpreter; with
        wait=False a jit.pending.Pending while it compiles in the background."""
        from gpushim.ptx.jit.kernel import get_kernel

        jk = get_kernel(self._mod, self._compiled[kernel].prog, self.source_hash, f"{self.name}:{kernel}", wait)
        if not isinstance(jk, Pending):
            self._jit[kernel] = jk  # what launches use from now on (asking get_kernel costs a launch ~1 µs)
        return jk

    def _interpret_until_compiled(self, pending: Pending, plan, kernel, shared_bytes, memory, symbols, pbuf, psize,
                                  output) -> int:  # fmt: skip
        """The interpreter runs the launch batch after batch until the kernel's compile is done; the compiled
        code runs the blocks left (blocks are independent: the JIT runs no grid sync)."""
        deadline = time.monotonic() + self.watchdog_s
        try:
            return _run_ignoring_fp(plan, kernel, shared_bytes, memory, symbols, pbuf, psize, output, deadline,
                                    pending.ready)  # fmt: skip
        except Handoff as h:
            jk = self.jit_kernel(kernel)  # compiled: at once
            left = max(deadline - time.monotonic(), 1e-3)
            return h.count + jk.launch(plan, shared_bytes, memory, symbols, pbuf, psize, left, output, h.block)

    def apply_relocations(self, memory, symbols: dict[str, int]) -> None:
        """Write the address initialisers (GlobalVar.relocs) of the module's variables placed at `symbols`.
        launch() does it before the first launch; a backend may call it right after placing the variables so
        that reading a pointer table (cudaMemcpyFromSymbol) before any launch already sees the addresses."""
        if not self._has_relocs:
            return
        # once per memory and placement of the variables (a device reset places them anew)
        key = (id(memory), tuple(sorted((n, a) for n, a in symbols.items() if n in self.globals)))
        if key in self._relocated:
            return
        for g in self.globals.values():
            if g.relocs and g.name not in symbols:
                continue
            for off, target, addend in g.relocs:
                if target in self._mod.functions:
                    value = function_address(self._mod, target) + addend
                    memory.write(symbols[g.name] + off, value.to_bytes(8, "little"))
                    continue
                if target not in symbols:
                    raise CudaError(Err.INVALID_VALUE, f"initialiser of {g.name} refers to unknown symbol {target}")
                memory.write(symbols[g.name] + off, int(symbols[target] + addend).to_bytes(8, "little"))
        self._relocated.add(key)


def _run(plan: _Plan, kernel: str, shared_bytes: int, memory, symbols, pbuf, psize: int, output, deadline,
         handoff=None) -> int:  # fmt: skip
    """Run every batch of a launch; the thread-instructions executed. handoff(): asked between batches, True
    raises jit.pending.Handoff (the compiled code runs the rest)."""
    kern = plan.kern
    count = 0
    nblocks, k = plan.nblocks, plan.k
    cached = plan.batch
    if handoff is not None and k * plan.geo.tpb > HANDOFF_BATCH_THREADS:
        k = max(1, HANDOFF_BATCH_THREADS // plan.geo.tpb)  # smaller batches: the compiled code takes over sooner
        cached = None
    for b0 in range(0, nblocks, k):
        if b0 and handoff is not None and handoff():
            raise Handoff(count, b0)
        batch = cached or Batch(plan.geo, b0, min(k, nblocks - b0), plan.shared_total, shared_bytes, plan.specials)
        st = State(kern, batch, memory, symbols, pbuf, psize, output)
        try:
            run_batch(kern, st, deadline)
        except CudaError:
            raise
        except Exception as e:  # an engine bug must not take the server down: fail the launch
            raise CudaError(
                Err.LAUNCH_FAILURE,
                f"internal error of the PTX engine in kernel {kernel}: {type(e).__name__}: {e}",
            ) from e
        count += st.count
    return count


if int(np.__version__.split(".")[0]) >= 2:
    # numpy 2's errstate decorator keeps its context token per call (reentrant, thread-safe), at half the cost
    # of entering a new errstate per launch
    _run_ignoring_fp = np.errstate(all="ignore")(_run)
else:

    def _run_ignoring_fp(*args):
        with np.errstate(all="ignore"):
            return _run(*args)


def _check_config(grid, block, shared_bytes: int, info: KernelInfo) -> None:
    if len(grid) != 3 or len(block) != 3:
        raise CudaError(Err.INVALID_CONFIGURATION, "grid and block need three dimensions")
    if any(d < 1 for d in grid) or any(d < 1 for d in block):
        raise CudaError(Err.INVALID_CONFIGURATION, f"grid {grid} / block {block} has an empty dimension")
    if (
        any(d > m for d, m in zip(block, MAX_BLOCK_DIM, strict=True))
        or block[0] * block[1] * block[2] > MAX_BLOCK_THREADS
    ):
        raise CudaError(Err.INVALID_CONFIGURATION, f"block {block} is too large")
    if any(d > m for d, m in zip(grid, MAX_GRID_DIM, strict=True)):
        raise CudaError(Err.INVALID_CONFIGURATION, f"grid {grid} is too large")
    if shared_bytes < 0 or info.static_shared_bytes + shared_bytes > MAX_SHARED_BYTES:
        raise CudaError(
            Err.INVALID_CONFIGURATION,
            f"{info.static_shared_bytes} bytes of static and {shared_bytes} "
            f"bytes of dynamic shared memory exceed {MAX_SHARED_BYTES}",
        )


def _check_bounds(bounds: dict, block, kernel: str) -> None:
    """.maxntid (__launch_bounds__) and .reqntid: a launch over them fails like on the GPU ("too many resources
    requested for launch")."""
    threads = block[0] * block[1] * block[2]
    mx = bounds.get("maxntid")
    if mx and threads > int(np.prod(mx)):
        raise CudaError(
            Err.LAUNCH_OUT_OF_RESOURCES,
            f"kernel {kernel} allows at most {int(np.prod(mx))} threads per block (.maxntid), launched with {threads}",
        )
    rq = bounds.get("reqntid")
    if rq and tuple(rq) + (1,) * (3 - len(rq)) != tuple(block):
        raise CudaError(
            Err.LAUNCH_OUT_OF_RESOURCES, f"kernel {kernel} requires blocks of {rq} (.reqntid), launched with {block}"
        )


def _declared_info(fn) -> KernelInfo:
    params, off = [], 0
    for p in fn.params:
        off = align_up(off, p.align)
        params.append(ParamInfo(off, p.size, p.align))
        off += p.size
    return KernelInfo(fn.name, params, off, 0, 0)


def load_module(ptx_text: str, name: str = "", *, strict: bool = True) -> PtxModule:
    """Parse, link and compile every kernel of a PTX module. Raises PtxError on malformed PTX and
    PtxUnsupported (naming instruction, kernel and line) for PTX the engine cannot execute.

    With strict=False a kernel the engine cannot execute does not fail the module: it is listed in
    `mod.unsupported` (kernel -> message) and launching it raises CudaError(NOT_SUPPORTED) with that message."""
    try:
        tree = parse(ptx_text)
    except PtxError:
        raise
    except Exception as e:  # a parser bug or very unusual PTX: report it as malformed, never crash the caller
        raise PtxError(f"cannot parse PTX module {name!r}: {type(e).__name__}: {e}") from e
    mod = PtxModule(tree, name, strict)
    mod.source_hash = hashlib.sha256(ptx_text.encode()).hexdigest()[:24]
    return mod
