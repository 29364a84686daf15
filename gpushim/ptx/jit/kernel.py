"""A compiled kernel: native code from codegen.py, its launch driver and the compile cache."""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import threading
import time
import weakref

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
_dead = weakref.ref(np.zeros(0))  # a weak reference to nothing
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
    polls it on backward branches and between blocks). Registering a launch is a dict insertion (atomic under
    the GIL, no lock: this is on every launch's path)."""

    def __init__(self) -> None:
        self._active: dict[int, tuple[float, np.ndarray]] = {}
        self._tokens = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()

    def watch(self, ctx: np.ndarray, deadline: float) -> int:
        token = next(self._tokens)
        self._active[token] = (deadline, ctx)
        if self._thread is None:
            with self._start:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name="ptx-jit-watchdog", daemon=True)
                    self._thread.start()
        return token

    def done(self, token: int) -> None:
        self._active.pop(token, None)

    def _loop(self) -> None:
        while True:  # checks four times a second: deadlines are met within 0.25 s
            now = time.monotonic()
            for deadline, ctx in list(self._active.values()):
                if now >= deadline:
                    ctx[L.ABORT] = 1
            time.sleep(0.25)


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
            self.nregs, self.unchecked = meta["nregs"], meta["unchecked"]
            ref = llvm.parse_assembly("")
            self.engine = llvm.create_mcjit_compiler(ref, tm)
            self.engine.set_object_cache(getbuffer_func=lambda _m: obj)
            self.from_disk = True
        else:
            g = generate(mod, prog, name)
            self.sites = g.sites
            self.globals = g.globals_used
            self.nregs = g.nspill  # spill slots per thread
            self.unchecked = g.unchecked  # why the launch has no check-then-run fast path (None: it has)
            ref = llvm.parse_assembly(str(g.m))
            ref.verify()
            pto = llvm.create_pipeline_tuning_options(speed_level=2)
            pb = llvm.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(ref, pb)
            self.engine = llvm.create_mcjit_compiler(ref, tm)
            meta = {"sites": self.sites, "globals": self.globals, "nregs": self.nregs, "unchecked": self.unchecked}
            if key:
                self.engine.set_object_cache(notify_func=lambda _m, buf: diskcache.store(key, meta, bytes(buf)))
            self.from_disk = False
        self.engine.finalize_object()
        addr = self.engine.get_function_address("run")
        if not addr:
            raise RuntimeError("compiled kernel has no entry point")
        self._run = _RUN(addr)
        self.compile_s = time.perf_counter() - t0

    def _workspace(self, plan, shared_bytes: int) -> dict:
        """Buffers and the context of a launch, reused by later launches of the same configuration (a pool:
        concurrent launches of one kernel each take their own). What depends only on the configuration is set
        here once; launch() sets what changes from launch to launch."""
        geo = plan.geo
        key = (geo.grid, geo.block, plan.shared_total, shared_bytes)
        pool = self._pools.get(key)
        if pool:
            try:
                return pool.pop()
            except IndexError:  # another thread took it
                pass
        if len(self._pools) > 64:  # many configurations: forget the idle workspaces of the others
            self._pools.clear()
        tpb = geo.tpb
        prog = plan.kern.prog
        lo_stride = align_up(max(prog.frame_bytes, 1), 16)
        ws = {
            "key": key,
            "ctx": np.zeros(L.SLOTS, np.int64),
            "shbuf": np.zeros(max(plan.shared_total, 1) + 16, np.uint8),
            "lobuf": np.zeros(tpb * lo_stride if prog.frame_bytes else 16, np.uint8),
            "spill": np.zeros(tpb * self.nregs, np.int64),
            "state": np.zeros(tpb, np.int32),
            "arena": _dead,  # the arena, allocations and symbols the context holds now
            "allocs": None,
            "syms": None,
        }
        ctx = ws["ctx"]
        for slot, name in ((L.SHBUF, "shbuf"), (L.LOBUF, "lobuf"), (L.SPILL, "spill"), (L.STATE, "state")):
            ctx[slot] = _addr(ws[name])
        ctx[L.LOSTRIDE] = lo_stride
        ctx[L.SHSIZE] = plan.shared_total
        ctx[L.GRID : L.GRID + 3] = geo.grid
        ctx[L.BLOCK : L.BLOCK + 3] = geo.block
        ctx[L.DYNSH] = shared_bytes
        ctx[L.LOSIZE] = prog.frame_bytes
        ctx[L.BEGIN] = 0
        ctx[L.END] = plan.nblocks
        ws["ctx_addr"] = _addr(ctx)
        return ws

    def launch(self, plan, shared_bytes: int, memory, symbols, pbuf: np.ndarray, psize: int, watchdog_s: float) -> int:
        """Run every block of a launch; the thread-instructions executed. Raises CudaError as the interpreter."""
        ws = self._workspace(plan, shared_bytes)
        try:
            ctx = ws["ctx"]
            arena = memory.arena
            if ws["arena"]() is not arena:  # a weak reference: the workspace must not keep the arena mapped
                ctx[L.ARENA] = _addr(arena)
                ctx[L.BASE] = memory.base
                ws["arena"] = weakref.ref(arena)
            allocs = memory.allocations()
            if allocs != ws["allocs"]:  # identical Allocation objects compare by identity: cheap when unchanged
                tab = np.array(sorted((a.addr, a.addr + a.size) for a in allocs) or [(0, 0)], np.int64)
                ws["tab"] = tab
                ws["allocs"] = allocs
                ctx[L.ALLOCS] = _addr(tab)
                ctx[L.NALLOCS] = len(allocs)
            if self.globals:
                syms = [symbols[g] for g in self.globals]
                if syms != ws["syms"]:
                    ws["symtab"] = tab = np.array(syms, np.int64)
                    ws["syms"] = syms
                    ctx[L.SYMS] = _addr(tab)
            ctx[L.PARAM] = _addr(pbuf)
            ctx[L.PSIZE] = psize
            ctx[L.ERR] = 0
            ctx[L.ABORT] = 0
            token = _watchdog.watch(ctx, time.monotonic() + watchdog_s)
            try:
                rc = self._run(ws["ctx_addr"])
            finally:
                _watchdog.done(token)
            if rc:
                geo = plan.geo
                raise self._error(ctx, geo.grid, geo.block, watchdog_s)
            return int(ctx[L.COUNT])
        finally:
            self._pools.setdefault(ws["key"], []).append(ws)

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
    hit = _cache.get(key)  # the common case, without the lock
    if hit is not None:
        return hit if isinstance(hit, JitKernel) else None
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
