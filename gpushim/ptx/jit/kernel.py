"""A compiled kernel: native code from codegen.py, its launch driver and the compile cache."""

from __future__ import annotations

import ctypes
import hashlib
import threading
import time

import numpy as np
from llvmlite import binding as llvm

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx.jit import diskcache, log
from gpushim.ptx.jit import layout as L
from gpushim.ptx.jit.codegen import JitUnsupported, generate
from gpushim.ptx.link import Program, align_up
from gpushim.ptx.nodes import Module

_lock = threading.Lock()
_initialised = False
_cache: dict[tuple[str, str], JitKernel | str] = {}  # (PTX hash, kernel) -> compiled kernel or why not
_CACHE_MAX = 512
_RUN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)


def _addr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]  # cheaper than a.ctypes.data


def _tm():
    """A target machine for the host CPU: a new one per kernel, since an MCJIT engine owns (and frees) its own."""
    global _initialised
    if not _initialised:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _initialised = True
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3
    )


class _Watchdog:
    """One thread for all launches: sets the abort flag of launches past their deadline (the compiled code
    polls it on backward branches and between blocks). Idle while no launch runs."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._active: dict[int, tuple[float, np.ndarray]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None

    def watch(self, ctx: np.ndarray, deadline: float) -> int:
        with self._cv:
            self._next += 1
            self._active[self._next] = (deadline, ctx)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="ptx-jit-watchdog", daemon=True)
                self._thread.start()
            return self._next  # no notify: waking the thread at every launch would cost more than the launch

    def done(self, token: int) -> None:
        with self._cv:
            self._active.pop(token, None)

    def _loop(self) -> None:
        with self._cv:
            while True:  # checks four times a second: deadlines are met within 0.25 s
                now = time.monotonic()
                for deadline, ctx in self._active.values():
                    if now >= deadline:
                        ctx[L.ABORT] = 1
                self._cv.wait(0.25)


_watchdog = _Watchdog()


class JitKernel:
    def __init__(self, mod: Module, prog: Program, name: str, key: str = "") -> None:
        t0 = time.perf_counter()
        self.kernel = prog.kernel
        self._pools: dict[tuple, list[dict]] = {}
        tm = _tm()
        cached = diskcache.load(key) if key else None
        if cached is not None:  # native code from an earlier process: no IR generation, no optimisation
            meta, obj = cached
            self.sites = [tuple(x) for x in meta["sites"]]
            self.globals = meta["globals"]
            self.nregs, self.ncache = meta["nregs"], meta["ncache"]
            ref = llvm.parse_assembly("")
            self.engine = llvm.create_mcjit_compiler(ref, tm)
            self.engine.set_object_cache(getbuffer_func=lambda _m: obj)
            self.from_disk = True
        else:
            g = generate(mod, prog, name)
            self.sites = g.sites
            self.globals = g.globals_used
            self.nregs = max(len(g.regs), 1)
            self.ncache = g.ncache
            ref = llvm.parse_assembly(str(g.m))
            ref.verify()
            pto = llvm.create_pipeline_tuning_options(speed_level=2)
            pb = llvm.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(ref, pb)
            self.engine = llvm.create_mcjit_compiler(ref, tm)
            meta = {"sites": self.sites, "globals": self.globals, "nregs": self.nregs, "ncache": self.ncache}
            if key:
                self.engine.set_object_cache(notify_func=lambda _m, buf: diskcache.store(key, meta, bytes(buf)))
            self.from_disk = False
        self.engine.finalize_object()
        addr = self.engine.get_function_address("run")
        if not addr:
            raise RuntimeError("compiled kernel has no entry point")
        self._run = _RUN(addr)
        self.compile_s = time.perf_counter() - t0

    def _workspace(self, plan, tpb: int, lo_stride: int) -> dict:
        """Buffers of a launch, reused by later launches of the same shape (a pool: concurrent launches of one
        kernel each take their own)."""
        key = (tpb, lo_stride, plan.shared_total)
        pool = self._pools.setdefault(key, [])
        try:
            return pool.pop()
        except IndexError:
            pass
        ws = {
            "key": key,
            "ctx": np.zeros(L.SLOTS, np.int64),
            "shbuf": np.zeros(max(plan.shared_total, 1) + 16, np.uint8),
            "lobuf": np.zeros(tpb * lo_stride, np.uint8),
            "spill": np.zeros(tpb * self.nregs, np.int64),
            "state": np.zeros(tpb, np.int32),
            "cache": np.zeros(2 * max(self.ncache, 1), np.int64),
        }
        ctx = ws["ctx"]
        for slot, name in ((L.SHBUF, "shbuf"), (L.LOBUF, "lobuf"), (L.SPILL, "spill"), (L.STATE, "state"),
                           (L.CACHE, "cache")):  # fmt: skip
            ctx[slot] = _addr(ws[name])
        ctx[L.LOSTRIDE] = lo_stride
        ctx[L.SHSIZE] = plan.shared_total
        ws["ctx_addr"] = _addr(ctx)
        return ws

    def launch(self, plan, shared_bytes: int, memory, symbols, pbuf: np.ndarray, psize: int, watchdog_s: float) -> int:
        """Run every block of a launch; the thread-instructions executed. Raises CudaError as the interpreter."""
        geo = plan.geo
        grid, block = geo.grid, geo.block
        tpb = geo.tpb
        prog = plan.kern.prog
        ws = self._workspace(plan, tpb, align_up(max(prog.frame_bytes, 1), 16))
        try:
            ctx = ws["ctx"]
            allocs = memory.allocations()
            tab = np.array(sorted((a.addr, a.addr + a.size) for a in allocs) or [(0, 0)], np.int64)
            syms = np.array([symbols[g] for g in self.globals] or [0], np.int64)
            ctx[L.ARENA] = _addr(memory.arena)
            ctx[L.BASE] = memory.base
            ctx[L.ALLOCS] = _addr(tab)
            ctx[L.NALLOCS] = len(allocs)
            ctx[L.PARAM] = _addr(pbuf)
            ctx[L.PSIZE] = psize
            ctx[L.SYMS] = _addr(syms)
            ctx[L.GRID : L.GRID + 3] = grid
            ctx[L.BLOCK : L.BLOCK + 3] = block
            ctx[L.DYNSH] = shared_bytes
            ctx[L.LOSIZE] = prog.frame_bytes
            ctx[L.BEGIN] = 0
            ctx[L.END] = plan.nblocks
            ctx[L.ERR] = ctx[L.COUNT] = ctx[L.ABORT] = 0
            cache = ws["cache"]
            cache[0::2] = 1  # empty ranges: the first access of each site searches (allocations may have changed)
            cache[1::2] = 0
            token = _watchdog.watch(ctx, time.monotonic() + watchdog_s)
            try:
                rc = self._run(ws["ctx_addr"])
            finally:
                _watchdog.done(token)
            if rc:
                raise self._error(ctx, grid, block, watchdog_s)
            return int(ctx[L.COUNT])
        finally:
            self._pools[ws["key"]].append(ws)

    def _error(self, ctx, grid, block, watchdog_s: float) -> CudaError:
        code = int(ctx[L.ERR])
        site = int(ctx[L.ERR_SITE])
        _, msg = self.sites[site]
        b, t = int(ctx[L.ERR_BLOCK]), int(ctx[L.ERR_THREAD])
        bc = (b % grid[0], b // grid[0] % grid[1], b // (grid[0] * grid[1]))
        tc = (t % block[0], t // block[0] % block[1], t // (block[0] * block[1]))
        who = f"block ({bc[0]},{bc[1]},{bc[2]}) thread ({tc[0]},{tc[1]},{tc[2]}) of kernel {self.kernel}"
        if code == Err.LAUNCH_TIMEOUT:
            return CudaError(code, f"kernel {self.kernel} ran past the watchdog deadline ({watchdog_s:g} s)")
        addr = int(ctx[L.ERR_ADDR]) & (2**64 - 1)
        if msg.startswith("trap"):
            return CudaError(code, msg.replace("{who}", who))
        return CudaError(code, f"{msg} at {addr:#x} by {who}")


def get_kernel(mod: Module, prog: Program, source_hash: str, name: str) -> JitKernel | None:
    """The compiled kernel, or None when the JIT does not support it (logged once per PTX and kernel)."""
    key = (source_hash, prog.kernel)
    with _lock:
        hit = _cache.get(key)
        if hit is None:
            try:
                hit = JitKernel(mod, prog, name, diskcache.key(source_hash, prog.kernel))
                log.debug("compiled %s in %.1f ms", prog.kernel, hit.compile_s * 1e3)
            except JitUnsupported as e:
                hit = f"{e}"
                log.info("PTX kernel %s runs on the interpreter: the JIT does not support %s", prog.kernel, e)
            except Exception as e:  # a JIT bug: the interpreter still runs the kernel
                hit = f"internal error of the JIT: {type(e).__name__}: {e}"
                log.warning("PTX kernel %s runs on the interpreter: %s", prog.kernel, hit)
            if len(_cache) >= _CACHE_MAX:
                _cache.clear()
            _cache[key] = hit
    return hit if isinstance(hit, JitKernel) else None


def fallback_reason(source_hash: str, kernel: str) -> str | None:
    hit = _cache.get((source_hash, kernel))
    return hit if isinstance(hit, str) else None


def ptx_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


__all__ = ["JitKernel", "get_kernel", "ptx_hash", "fallback_reason", "CudaError", "Err"]
