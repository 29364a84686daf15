"""A compiled kernel: native code from codegen.py, its launch driver and the compile cache."""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable

import numpy as np
from llvmlite import binding as llvm

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx.jit import diskcache, log, rtlib
from gpushim.ptx.jit import layout as L
from gpushim.ptx.jit.codegen import JitUnsupported, generate
from gpushim.ptx.jit.hostcall import HostCalls
from gpushim.ptx.jit.pending import Pending
from gpushim.ptx.jit.tierup import tierup
from gpushim.ptx.link import Program, align_up
from gpushim.ptx.nodes import Module

_lock = threading.Lock()
_lock_init = threading.Lock()
_initialised = False
_cache: dict[tuple[str, str], JitKernel | str | Pending] = {}  # (PTX hash, kernel) -> compiled kernel or why not
_CACHE_MAX = 512
_dead = weakref.ref(np.zeros(0))  # a weak reference to nothing
_RUN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)


def _addr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]  # cheaper than a.ctypes.data


# tier 1 takes the cheap code generator for a kernel whose estimated cost for the full one (Codegen.t1_cost: IR
# instructions + codegen.BLOCK_COST per basic block) is at least CHEAP_COST. Fitted in round 6 on the 135 test kernels
# (bench/README.md): the full generator's LLVM time is ~1 + 0.021 ms per instruction + 0.43 ms per block, the cheap
# one's ~0.010 and 0.33: blocks (branchy code: collectives, checks, printf) cost both far more than straight-line
# instructions. With it 132 of the 133 test kernels of <= 1000 PTX lines the JIT then compiled met 100 ms
# (cubBlockOps too after cubfast's change), while the small bench kernels (vectorAdd, saxpy, reductions,
# transpose) keep the full generator's faster code. (Until round 6: IR instructions only, CHEAP_IR 3000 -> 2400.)
CHEAP_COST = 3000
# a kernel with stops (barriers, warp collectives) on the cheap generator gets its thread function outlined from
# this estimated cost on: called per thread and round, the call costs more run time than in a kernel without
# stops (smemLoop, shflSum, matmul at 3100-4010: tier 1 1.3-2x slower), and what it saves of the compile grows
# with the size (cubBlockOps at 10267: 124 -> 93 ms; bench/README.md, round 6 cubfast)
OUTLINE_STOPS_COST = 2 * CHEAP_COST


def t1_codegen(cost: int) -> str:
    """How tier 1 compiles a kernel of estimated cost `cost` (Codegen.t1_cost) ($GPUSHIM_PTX_JIT_T1): "full"
    (LLVM's optimising code generator) or "cheap" (its -O0 instruction selection with its optimising register
    allocator, and the thread function outlined: Codegen.outline; about half the LLVM time, code 1.2-4x slower;
    bench/README.md). The default "auto" takes the cheap one from CHEAP_COST on: such a compile dominates the
    kernel's first launches, and tier 2 replaces tier 1 once the kernel is hot. "full"/"cheap" force one; "O2" is
    "full" after LLVM's whole O2 IR pipeline."""
    mode = os.environ.get("GPUSHIM_PTX_JIT_T1", "auto").strip().lower()
    if mode == "auto":
        return "cheap" if cost >= CHEAP_COST else "full"
    return "cheap" if mode == "cheap" else "full"


def _init_llvm() -> None:
    global _initialised
    if not _initialised:
        with _lock_init:  # compiles run in several threads
            if not _initialised:
                llvm.initialize_native_target()
                llvm.initialize_native_asmprinter()
                # LLVM's command-line options are process-global and their parsing is not thread-safe: set once,
                # before any compile. This one only changes -O0 code generation (TargetPassConfig::
                # getOptimizeRegAlloc: unset, it means "above -O0"), which only tier 1's cheap compiles use:
                # the greedy register allocator instead of the fast one (whose spills made code 3-5x slower).
                llvm.set_option("gpushim", "-optimize-regalloc")
                _initialised = True


@functools.cache
def _host() -> tuple:
    """The host's target, CPU name and features string (asking LLVM for the features costs ~0.2 ms a call)."""
    _init_llvm()
    return llvm.Target.from_default_triple(), llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()


def _tm(tier: int = 2, cheap: bool = False):
    """A new target machine for the host CPU (an MCJIT engine owns, and frees, the one it is given).
    cheap: LLVM's -O0 code generation (fast instruction selection, no machine-level optimisation) with the
    optimising register allocator (_init_llvm)."""
    target, cpu, features = _host()
    return target.create_target_machine(cpu=cpu, features=features, opt=0 if cheap else 2)


_tms = threading.local()  # per compiling thread: its target machines (by "cheap") and their pass builders


def _thread_tm(cheap: bool) -> tuple:
    """This thread's target machine and pass builder for optimising and compiling to object code, kept: a
    target machine builds its subtarget (~1 ms) at its first use. (A pass builder's runs make their own
    analysis managers: nothing of one module stays for the next.)"""
    made = getattr(_tms, "made", None)
    if made is None:
        made = _tms.made = {}
    if cheap not in made:
        tm = _tm(2, cheap)
        made[cheap] = tm, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=2))
    return made[cheap]


def _optimise(ref, tier: int, pb) -> None:
    """Tier 1: a short pipeline (inlining, SROA, instcombine, CFG simplification: a few ms per kernel; a DCE
    pass after them changed the object code of 3 of 132 test kernels, not its size); tier 2: LLVM's O2 (loop
    invariants, vectorisation, unrolling: 10x the compile time). pb: the thread's pass builder (_thread_tm)."""
    if tier == 1 and os.environ.get("GPUSHIM_PTX_JIT_T1", "auto").strip().lower() != "o2":
        mpm = llvm.create_new_module_pass_manager()
        mpm.add_always_inliner_pass()
        mpm.add_sroa_pass()
        mpm.add_instruction_combine_pass()  # (without it, code 1.5-3x slower for 30 ms less on 1000 instructions)
        mpm.add_simplify_cfg_pass()
        mpm.run(ref, pb)
    else:
        pb.getModulePassManager().run(ref, pb)


def compile_object(ref, tier: int, cheap: bool) -> bytes:
    """The module optimised for its tier and compiled to object code by this thread's target machine (loaded
    by an MCJIT engine as the disk cache's objects are: _Code)."""
    tm, pb = _thread_tm(cheap)
    _optimise(ref, tier, pb)
    return tm.emit_object(ref)


class _Watchdog:
    """One thread for all launches: sets the abort flag of launches past their deadline (the compiled code
    polls it on backward branches and between blocks). A workspace registers its context once, with a cell
    holding the deadline of the launch it runs (0: none): a launch only writes that cell, at its start and end."""

    def __init__(self) -> None:
        self._watched: list[tuple[list[float], weakref.ref]] = []  # (deadline cell, the context it aborts)
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()

    def register(self, ctx: np.ndarray) -> list[float]:
        """The deadline cell of a workspace's context (kept while the context lives)."""
        cell = [0.0]
        with self._start:
            self._watched.append((cell, weakref.ref(ctx)))
        self.running()
        return cell

    def running(self) -> None:
        """Starts the thread unless it runs (at the first registration, and at a launch in a forked child: the
        fork handler starts no thread, since a child that only runs other code must not get one)."""
        if self._thread is None:
            with self._start:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name="ptx-jit-watchdog", daemon=True)
                    self._thread.start()

    def _loop(self) -> None:
        while True:  # checks four times a second: deadlines are met within 0.25 s
            now = time.monotonic()
            with self._start:
                watched = self._watched
                if any(ref() is None for _, ref in watched):  # workspaces that are gone
                    watched = self._watched = [w for w in watched if w[1]() is not None]
            for cell, ref in watched:
                deadline = cell[0]
                if deadline and now >= deadline:
                    ctx = ref()
                    if ctx is not None:
                        ctx[L.ABORT] = 1
                        if cell[0] != deadline:  # that launch ended meanwhile: the next one must not be aborted
                            ctx[L.ABORT] = 0
            time.sleep(0.25)


_watchdog = _Watchdog()


def _load(obj: bytes, context, tier: int):
    """An MCJIT engine holding the object code obj (an empty module whose object the cache supplies)."""
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly("", context=context), _tm(tier))
    engine.set_object_cache(getbuffer_func=lambda _m: obj)
    return engine


class _Code:
    """One compiled module: its entry point and the fault sites its context refers to. Each module lives in
    its own LLVM context, so a second tier can compile in another thread."""

    def __init__(self, mod: Module, prog: Program, name: str, tier: int, key: str) -> None:
        t0 = time.perf_counter()
        c0 = time.thread_time()
        self.codegen = "full"
        self.outlined = False  # tier 1's thread function called per thread (Codegen.outline)
        self.context = llvm.create_context()
        cached = diskcache.load(key) if key else None
        if cached is not None and not rtlib.ensure(cached[0].get("rtlib", {})):
            cached = None  # a chunk of the runtime library it calls is not on disk any more: compiled again
        if cached is not None:  # native code from an earlier process: no IR generation, no optimisation
            meta, obj = cached
            self.engine = _load(obj, self.context, tier)
            self.from_disk = True
            self.ir_cpu_s = 0.0
            self.codegen, self.outlined = meta.get("codegen", "full"), meta.get("outlined", False)
        else:
            g = generate(mod, prog, name, tier)
            if tier == 1:
                cost = g.t1_cost()
                self.codegen = t1_codegen(cost)
                if self.codegen == "cheap":
                    self.outlined = g.outline(stops=cost >= OUTLINE_STOPS_COST)
            meta = {"sites": g.sites, "globals": g.globals_used, "nregs": g.nspill, "unchecked": g.unchecked,
                    "host_calls": g.host_calls, "codegen": self.codegen, "outlined": self.outlined}  # fmt: skip
            text = str(g.m)
            self.ir_cpu_s = time.thread_time() - c0  # the Python half (IR construction and text)
            rtlib.load(g.rt_chunk)  # the library functions the process lacked (compiled or from the disk cache)
            meta["rtlib"] = rtlib.where(g.rt_used or ())
            ref = llvm.parse_assembly(text, context=self.context)
            ref.verify()
            obj = compile_object(ref, tier, self.codegen == "cheap")
            del ref
            if key:
                diskcache.store(key, meta, obj)
            self.engine = _load(obj, self.context, tier)
            self.from_disk = False
        self.meta = meta
        self.sites = [tuple(x) for x in meta["sites"]]
        self.engine.finalize_object()
        addr = self.engine.get_function_address("run")
        if not addr:
            raise RuntimeError("compiled kernel has no entry point")
        self.run = _RUN(addr)
        self.compile_s = time.perf_counter() - t0
        self.compile_cpu_s = time.thread_time() - c0
        self._built = True

    def __del__(self) -> None:
        # the engine owns a module of the context: it must go first (the other order crashes LLVM); a compile
        # that failed half-way may have left a module of the context elsewhere: its context is not freed
        if getattr(self, "_built", False):
            try:
                self.engine.close()
                self.context.close()
            except Exception:  # at interpreter shutdown llvmlite may be half torn down
                pass


class _Tier2Queue:
    """Tier-2 compiles, one at a time, in a background thread (LLVM releases the GIL while it works)."""

    def __init__(self) -> None:
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, jk: JitKernel) -> None:
        self._q.put(jk)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="ptx-jit-tier2", daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            self._q.get().tier2()


_tier2_queue = _Tier2Queue()
HOT_S = 0.02  # seconds of tier-1 execution after which a kernel gets its tier-2 code ($GPUSHIM_PTX_JIT_TIER2=hot)


def _tier2_policy() -> str:
    p = os.environ.get("GPUSHIM_PTX_JIT_TIER2", "hot").strip().lower()
    return p if p in ("hot", "now", "off") else "hot"


class JitKernel:
    """A kernel's native code. Tier 1 (compiled at the first launch, a short LLVM pipeline): every access
    checked. Tier 2 (LLVM's O2): for kernels taint.py admits, a check pass, then code without memory checks
    whose thread loops vectorise; for the others, tier 1's code better optimised;
    compiled in the background once the kernel has run HOT_S seconds on tier 1 ($GPUSHIM_PTX_JIT_TIER2=hot,
    the default), at the first launch (`now`) or never (`off`). Launches use tier 2 once it is there; when
    its check pass finds an access that may fail, tier 1 runs the launch and reports the fault."""

    def __init__(self, mod: Module, prog: Program, name: str, key: str = "") -> None:
        self.kernel = prog.kernel
        self._pools: dict[tuple, list[dict]] = {}
        self._src = (mod, prog, name, key)
        self.t1 = _Code(mod, prog, name, 1, key)
        self.compile_s = self.t1.compile_s
        self.from_disk = self.t1.from_disk
        meta = self.t1.meta
        self.globals = meta["globals"]
        self.nregs = meta["nregs"]  # spill slots per thread
        self.unchecked = meta["unchecked"]  # why tier 2 has no check pass and fast code (None: it has)
        self.host_calls = meta["host_calls"]  # printf, assert, malloc, free (hostcall.py)
        self.t2: _Code | None = None
        self.t2_state = "none"
        self.tier2_runs = self.tier2_declined = 0  # launches on tier 2; of those, run by tier 1 after the check
        self.tier2_switches = 0  # launches begun on tier 1 and finished on tier 2 (tierup.py)
        self.handoffs = 0  # launches begun on the interpreter while this kernel compiled (pending.py)
        self.undef_logged = False  # a shuffle read a lane that was not at it (logged once)
        self.reuse_checks = True  # False: every launch runs the check pass (bench/ptx_bench.py measures it)
        self._hot = 0.0
        self._t2_lock = threading.Lock()
        policy = _tier2_policy()
        if policy == "now" or (key and diskcache.load(self._key2()) is not None):
            self.tier2()
        elif policy == "off":
            self.t2_state = "off"

    def _key2(self) -> str:
        key = self._src[3]
        return key and hashlib.sha256(f"{key}:tier2".encode()).hexdigest()[:32]

    def tier2(self) -> _Code | None:
        """Compile tier 2 now (idempotent; also what the background queue calls)."""
        with self._t2_lock:
            if self.t2 is not None or self.t2_state.startswith("failed"):
                return self.t2
            mod, prog, name, _ = self._src
            try:
                code = _Code(mod, prog, name, 2, self._key2())
            except Exception as e:  # a JIT bug: tier 1 keeps running the kernel
                self.t2_state = f"failed: {type(e).__name__}: {e}"
                log.warning("PTX kernel %s: no tier-2 code: %s", self.kernel, self.t2_state)
                return None
            if code.meta["nregs"] != self.nregs:
                self.t2_state = "failed: spill layouts differ"
                return None
            log.debug("PTX kernel %s: tier 2 compiled in %.1f ms", self.kernel, code.compile_s * 1e3)
            self.t2 = code
            tierup.ready(self)  # running tier-1 launches go on in tier 2 from their next block
            self.t2_state = "ready"
            return code

    def _ran(self, seconds: float) -> None:
        self._hot += seconds
        if self._hot >= HOT_S:
            self.queue_tier2()

    def queue_tier2(self) -> None:
        """Compile tier 2 in the background (once)."""
        if self.t2_state == "none":
            self.t2_state = "queued"
            _tier2_queue.put(self)

    def _tier1_then_tier2(self, ws: dict) -> tuple[int, _Code]:
        """Run the launch on tier 1 while tier 2 is not there yet; when tier 2 becomes ready meanwhile (compiled
        in the background, queued once this kernel ran HOT_S on tier 1, this launch included: tierup.py), the
        blocks not yet run go to tier 2. (rc, the code whose sites describe a fault.)"""
        mv = ws["mv"]
        if ws["nblocks"] == 1:  # nothing to switch between: the cheap way (tier 2 queued after it, if hot)
            t0 = time.perf_counter()
            rc = self.t1.run(ws["ctx_addr"])
            if self.t2_state == "none":
                self._ran(time.perf_counter() - t0)
            return rc, self.t1
        hot_in = max(HOT_S - self._hot, 0.0) if self.t2_state == "none" else None
        token = tierup.watch(self, ws["ctx"], hot_in)
        t0 = time.perf_counter()
        try:
            rc = self.t1.run(ws["ctx_addr"])
        finally:
            tierup.done(token)
            mv[L.YIELD] = 0  # (set during the last block: no later launch of this workspace may see it)
        if self.t2_state == "none":
            self._ran(time.perf_counter() - t0)
        if rc != 3:
            return rc, self.t1
        # blocks [0, BEGIN) ran on tier 1; tier 2 (its check pass over the remaining blocks first) runs the rest
        count = mv[L.COUNT]
        mv[L.SKIPCHECK] = 0  # a verdict covers whole launches; this one is checked anew
        code = self.t2
        assert code is not None  # YIELD is set only once tier 2 is there
        self.tier2_runs += 1
        self.tier2_switches += 1
        log.debug("PTX kernel %s: blocks %d.. of a launch run on tier 2", self.kernel, int(mv[L.BEGIN]))
        try:
            rc = code.run(ws["ctx_addr"])
            if rc == 2:  # an access of the remaining blocks may fail: the exact code runs them
                self.tier2_declined += 1
                code = self.t1
                rc = code.run(ws["ctx_addr"])
            mv[L.COUNT] += count
        finally:
            mv[L.BEGIN] = 0
        return rc, code

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
            "nblocks": plan.nblocks,
            "ctx": np.zeros(L.SLOTS, np.int64),
            "shbuf": np.zeros(max(plan.shared_total, 1) + 16, np.uint8),
            "lobuf": np.zeros(tpb * lo_stride if prog.frame_bytes else 16, np.uint8),
            "spill": np.zeros(tpb * self.nregs, np.int64),
            "state": np.zeros(tpb, np.int32),
            "arena": _dead,  # the arena, allocations and symbols the context holds now
            "allocs": None,
            "ver": None,  # the memory's allocation version the table was built at, and that memory
            "mem": _dead,
            "syms": None,
            "checked": None,  # the parameters of the last launch the check pass found safe
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
        ws["mv"] = memoryview(ctx).cast("B").cast("q")
        ws["pb"] = np.zeros(64, np.uint8)  # the parameter buffer of the launch (launch() copies it in)
        ws["pmv"] = memoryview(ws["pb"])
        ctx[L.PARAM] = _addr(ws["pb"])
        ws["deadline"] = _watchdog.register(ctx)
        ws["host"] = HostCalls(self.kernel, ws, _refresh_allocs) if self.host_calls else None
        return ws

    def launch(self, plan, shared_bytes: int, memory, symbols, pbuf, psize: int, watchdog_s: float,
               output: Callable[[bytes], None], begin: int = 0) -> int:
        """Run every block of a launch (from block `begin`: the interpreter ran the others, pending.py); the
        thread-instructions executed. Raises CudaError as the interpreter.
        pbuf: the parameters and their zero padding (bytes, or a numpy array of uint8); output: where printf
        and assert write (the interpreter's State.out)."""
        ws = self._workspace(plan, shared_bytes)
        host = ws["host"]
        try:
            ctx = ws["ctx"]
            arena = memory.arena
            if ws["arena"]() is not arena:  # a weak reference: the workspace must not keep the arena mapped
                ctx[L.ARENA] = _addr(arena)
                ctx[L.BASE] = memory.base
                ws["arena"] = weakref.ref(arena)
                ws["checked"] = None
            _refresh_allocs(ws, memory)
            if self.globals:
                syms = [symbols[g] for g in self.globals]
                if syms != ws["syms"]:
                    ws["symtab"] = tab = np.array(syms, np.int64)
                    ws["syms"] = syms
                    ctx[L.SYMS] = _addr(tab)
                    ws["checked"] = None
            mv = ws["mv"]  # item assignment through a memoryview: a third of numpy's cost
            n = len(pbuf)
            if n > len(ws["pb"]):
                ws["pb"] = np.zeros(n, np.uint8)
                ws["pmv"] = memoryview(ws["pb"])
                mv[L.PARAM] = _addr(ws["pb"])
            ws["pmv"][:n] = pbuf  # a copy in the workspace's own buffer: cheaper than asking pbuf its address
            mv[L.PSIZE] = psize
            code = self.t2
            params = None
            if code is not None and self.unchecked is None:
                # tier 2's check pass reads no memory (taint.py): its verdict holds for every launch with the
                # same parameters, configuration (the workspace's), allocations and symbols
                params = bytes(pbuf[:psize])
                mv[L.SKIPCHECK] = self.reuse_checks and ws["checked"] == params
            mv[L.ERR] = 0
            mv[L.ABORT] = 0
            mv[L.UNDEF] = 0
            if begin:  # (a check verdict covers whole launches: none is recorded for this one)
                self.handoffs += 1
                log.debug("PTX kernel %s: blocks %d.. of a launch run compiled (the interpreter ran the others)",
                          self.kernel, begin)  # fmt: skip
                mv[L.BEGIN] = begin
                params = None
                mv[L.SKIPCHECK] = 0
            deadline = ws["deadline"]
            deadline[0] = time.monotonic() + watchdog_s
            _watchdog.running()
            if host is not None:
                host.begin(memory, output, psize, plan.geo.grid, plan.geo.block)
            try:
                if code is not None:
                    self.tier2_runs += 1
                    rc = code.run(ws["ctx_addr"])
                    if rc == 2:  # an access may fail: the exact code runs the launch (nothing ran yet)
                        self.tier2_declined += 1
                        code = self.t1
                        rc = code.run(ws["ctx_addr"])
                    elif rc == 0 and params is not None:
                        ws["checked"] = params
                elif self.t2_state in ("none", "queued"):  # tier 2 may become ready during the launch
                    rc, code = self._tier1_then_tier2(ws)
                else:
                    code = self.t1
                    rc = code.run(ws["ctx_addr"])
            finally:
                deadline[0] = 0.0
                if begin:
                    mv[L.BEGIN] = 0
                failed = host.end() if host is not None else None
            if failed is not None:  # a printf, assert, malloc or free failed (or the assert ran)
                raise failed
            if rc:
                geo = plan.geo
                raise self._error(ctx, code.sites, geo.grid, geo.block, watchdog_s)
            if mv[L.UNDEF] and not self.undef_logged:
                self.undef_logged = True
                log.info("PTX kernel %s: a shuffle read a lane that was not at it (undefined in CUDA; the "
                            "interpreter may return another value)", self.kernel)
            return mv[L.COUNT]
        finally:
            self._pools.setdefault(ws["key"], []).append(ws)

    def _error(self, ctx, sites, grid, block, watchdog_s: float) -> CudaError:
        code = int(ctx[L.ERR])
        site = int(ctx[L.ERR_SITE])
        _, msg = sites[site]
        b, t = int(ctx[L.ERR_BLOCK]), int(ctx[L.ERR_THREAD])
        bc = (b % grid[0], b // grid[0] % grid[1], b // (grid[0] * grid[1]))
        tc = (t % block[0], t // block[0] % block[1], t // (block[0] * block[1]))
        who = f"block ({bc[0]},{bc[1]},{bc[2]}) thread ({tc[0]},{tc[1]},{tc[2]}) of kernel {self.kernel}"
        if code == Err.LAUNCH_TIMEOUT:
            return CudaError(code, f"kernel {self.kernel} ran past the watchdog deadline ({watchdog_s:g} s)")
        addr = int(ctx[L.ERR_ADDR]) & (2**64 - 1)
        if "{who}" in msg:  # (trap, a partial warp at a matrix instruction)
            return CudaError(code, msg.replace("{who}", who))
        if msg.startswith("="):  # the interpreter's st.error_for: the message alone (ops_mbarrier.py)
            return CudaError(code, msg[1:])
        return CudaError(code, f"{msg} at {addr:#x} by {who}")


def _refresh_allocs(ws: dict, memory) -> None:
    """The workspace's table of live allocations (find_alloc's), current for `memory` (at each launch, and
    after a device malloc or free during one: hostcall.py)."""
    # DeviceMemory.version changes with every allocation and free: while it stands (same memory) the table is
    # current without listing the allocations (None: a peer view, whose list is compared)
    ver = getattr(memory, "version", None)
    if ver is None or ver != ws["ver"] or ws["mem"]() is not memory:
        allocs = memory.allocations()
        if allocs != ws["allocs"]:  # identical Allocation objects compare by identity
            tab = np.array(sorted((a.addr, a.addr + a.size) for a in allocs) or [(0, 0)], np.int64)
            ws["tab"] = tab
            ws["allocs"] = allocs
            ctx = ws["ctx"]
            ctx[L.ALLOCS] = _addr(tab)
            ctx[L.NALLOCS] = len(allocs)
            ws["checked"] = None
        ws["ver"], ws["mem"] = ver, weakref.ref(memory)


def _compile(mod: Module, prog: Program, name: str, key: str) -> JitKernel | str:
    """Tier 1 of a kernel, or why the JIT does not run it (logged)."""
    try:
        jk = JitKernel(mod, prog, name, key)
        log.debug("compiled %s in %.1f ms", prog.kernel, jk.compile_s * 1e3)
        return jk
    except JitUnsupported as e:
        log.info("PTX kernel %s runs on the interpreter: the JIT does not support %s", prog.kernel, e)
        return f"{e}"
    except Exception as e:  # a JIT bug: the interpreter still runs the kernel
        why = f"internal error of the JIT: {type(e).__name__}: {e}"
        log.warning("PTX kernel %s runs on the interpreter: %s", prog.kernel, why)
        return why


def _put(key: tuple[str, str], hit: JitKernel | str | Pending) -> None:
    if len(_cache) >= _CACHE_MAX:
        _cache.clear()
    _cache[key] = hit


class _Tier1Queue:
    """Background tier-1 compiles (pending.py), one at a time, in their own thread (not behind tier 2's)."""

    def __init__(self) -> None:
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, job) -> None:
        self._q.put(job)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="ptx-jit-tier1", daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            try:
                self._q.get()()
            except Exception:  # (_compile catches the JIT's errors; this thread must outlive anything else)
                log.exception("background compile of a PTX kernel failed")


_tier1_queue = _Tier1Queue()


def get_kernel(
    mod: Module, prog: Program, source_hash: str, name: str, wait: bool = True
) -> JitKernel | Pending | None:
    """The compiled kernel, or None when the JIT does not support it (logged once per PTX and kernel). With
    wait=False a kernel not compiled yet (and not in the disk cache) compiles in the background and the answer
    is a Pending; later calls answer the same Pending until the compile is done (wait=True waits for it)."""
    key = (source_hash, prog.kernel)
    hit = _cache.get(key)  # the common case, without the lock
    if hit is None:
        with _lock:
            hit = _cache.get(key)
            if hit is None:
                dkey = diskcache.key(source_hash, prog.kernel)
                if wait or diskcache.load(dkey) is not None:  # (from the disk: milliseconds)
                    hit = _compile(mod, prog, name, dkey)
                else:
                    hit = pending = Pending()

                    def job() -> None:
                        done: JitKernel | str = "the background compile did not finish"
                        try:
                            done = _compile(mod, prog, name, dkey)
                        finally:
                            # ready first, then in the cache (pending.py): never compiled in the cache while
                            # the Pending still says not ready
                            pending.finish(isinstance(done, JitKernel), done)
                            with _lock:
                                if _cache.get(key) is pending:
                                    _cache[key] = done

                    _tier1_queue.put(job)
                _put(key, hit)
    if isinstance(hit, Pending):
        if not (wait or hit.wait(0)):  # (a finished one answers its result: the cache may not have it yet)
            return hit
        hit.wait()
        hit = hit.result  # (not the cache again: it may have been cleared or filled anew meanwhile)
    return hit if isinstance(hit, JitKernel) else None


def fallback_reason(source_hash: str, kernel: str) -> str | None:
    """Why the kernel runs on the interpreter (None: compiled, or not compiled yet). A finished background
    compile answers through its Pending, which is ready before the cache swaps it for the answer (pending.py)."""
    hit = _cache.get((source_hash, kernel))
    if isinstance(hit, Pending) and hit.wait(0):
        hit = hit.result
    return hit if isinstance(hit, str) else None


def ptx_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _after_fork_in_child() -> None:
    """A forked child has only the forking thread: the JIT's background threads (compiles, tier-up, watchdog) are
    gone and the locks they held stay held. New locks, queues and threads (started again when needed); compiles
    the parent had under way are forgotten (compiled again here when asked for). The compiled code, the runtime
    library (rtlib.py) and the symbols MCJIT resolves are in the child's copy of the memory: they still work."""
    global _lock, _lock_init
    _lock, _lock_init = threading.Lock(), threading.Lock()
    for q in (_tier1_queue, _tier2_queue):
        q._q, q._lock, q._thread = queue.SimpleQueue(), threading.Lock(), None
    for k, hit in list(_cache.items()):
        if isinstance(hit, Pending):
            del _cache[k]
        elif isinstance(hit, JitKernel):
            hit._t2_lock = threading.Lock()
            if hit.t2_state == "queued":
                hit.t2_state = "none"
    tierup.__init__()  # (the launches it watched ran in the parent)
    _watchdog._start, _watchdog._thread = threading.Lock(), None  # (started by the child's next launch)


os.register_at_fork(after_in_child=_after_fork_in_child)

__all__ = ["JitKernel", "get_kernel", "ptx_hash", "fallback_reason", "CudaError", "Err"]
