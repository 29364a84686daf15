"""The JIT's runtime library: kernel-independent helper functions (pure.py's directed-rounding and half-precision
helpers, ops_mem's find_alloc and mem_miss) compiled once per process with the full code generator and called by every
kernel's code, which only declares them. MCJIT resolves the declarations through `llvm.add_symbol`.

The library grows in chunks: a kernel needing helpers the process lacks builds them (from the code generator's
own emitters) into a `Chunk`, which is compiled before the kernel, or loaded from the disk cache (diskcache.py),
keyed by the chunk's IR text, the host CPU and llvmlite's version. Each chunk is self-contained (the helpers its
helpers call are defined in it too) and lives in an MCJIT engine and LLVM context of its own, kept for the
process; a forked child inherits the code and the symbol table. Names are `gsrt.<kind>.<hash of the key>`: one
key, one function, in every process. A kernel's disk-cache entry lists the chunks it calls (`ensure`).

$GPUSHIM_PTX_JIT_RTLIB=off: no library (each module defines its helpers, pure.py)."""

from __future__ import annotations

import hashlib
import os
import threading
import time

from gpushim.ptx.jit import diskcache, log
from gpushim.ptx.jit import textir as ir


def enabled() -> bool:
    return os.environ.get("GPUSHIM_PTX_JIT_RTLIB", "on").strip().lower() != "off"


def name(key: tuple) -> str:
    """The library function's symbol for a helper key. Keys of str, bool, int and tuples have the same repr in every
    process (a set's order would not be: other names, so other chunks on disk, in each process)."""
    return f"gsrt.{key[0]}.{hashlib.sha256(repr(key).encode()).hexdigest()[:16]}"


class Chunk:
    """Library functions one kernel's code generation adds: their module, {key: (function, size, inlined size)}
    (pure.py) and the intrinsics declared in the module."""

    def __init__(self) -> None:
        self.m = ir.Module(name="gpushim-rtlib")
        self.m.triple = ""
        self.helpers: dict = {}
        self.intrinsics: dict = {}
        self.ir_cpu_s = 0.0  # building its IR (pure.py)

    def define(self, key: tuple, build) -> str:
        """A library function that is not a pure helper (build(module, name) defines it): once per chunk."""
        nm = name(key)
        if key not in self.helpers:
            fn = build(self.m, nm)
            size = sum(len(b.instructions) for b in fn.blocks)
            self.helpers[key] = (fn, size, size)
        return nm

    def exports(self) -> dict[str, int]:
        """{name: the IR instructions a call stands for}"""
        return {fn.name: inlined for fn, _, inlined in self.helpers.values()}


class _Library:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.addr: dict[str, int] = {}  # loaded functions
        self.sizes: dict[str, int] = {}  # their inlined IR sizes (ir_size)
        self.where: dict[str, str] = {}  # their chunk's disk-cache key ("": not on disk)
        # (context, engine) per chunk: the code lives as long as the process (a tuple drops its last item first: the
        # engine goes before its context, the order LLVM needs, kernel._Code.__del__)
        self.keep: list = []
        self.compiles = self.disk_loads = 0
        self.compile_cpu_s = self.load_cpu_s = 0.0


_lib = _Library()
os.register_at_fork(after_in_child=lambda: setattr(_lib, "lock", threading.Lock()))  # (held by a parent's thread)


def function(g, key: tuple, local: str, fty: ir.FunctionType, build, in_chunk: bool = False) -> ir.Function:
    """A library function for the module g generates (codegen.Codegen): declared there, and built into g's chunk
    when the process lacks it (build(module, name) defines it; in_chunk: with g's code generation switched to
    the chunk, for builds that call pure.py's helpers); without the library ($GPUSHIM_PTX_JIT_RTLIB=off) defined
    in the module as `local`."""
    nm = name(key) if enabled() else local
    try:
        return g.m.get_global(nm)
    except KeyError:
        pass
    if not enabled():
        f = build(g.m, nm)
        f.linkage = "internal"
        return f
    if size(nm) is None:
        chunk = g.rt_chunk = g.rt_chunk or Chunk()
        if in_chunk:
            with g._switch_module(chunk):
                chunk.define(key, build)
        else:
            chunk.define(key, build)
    f = ir.Function(g.m, fty, name=nm)
    f.attributes.add("nounwind")
    g.rt_used[nm] = key
    return f


def size(nm: str) -> int | None:
    """The inlined size of a loaded library function, None when the process does not have it."""
    return _lib.sizes.get(nm)


def stats() -> dict:
    return {"compiles": _lib.compiles, "disk_loads": _lib.disk_loads, "functions": len(_lib.addr),
            "compile_cpu_s": _lib.compile_cpu_s, "load_cpu_s": _lib.load_cpu_s}  # fmt: skip


def _disk_key(text: str) -> str:
    if diskcache._dir() is None:
        return ""
    import llvmlite
    from llvmlite import binding as llvm

    host = f"{llvmlite.__version__}:{llvm.llvm_version_info}:{llvm.get_host_cpu_name()}"
    host += f":{llvm.get_host_cpu_features().flatten()}"
    return "rtlib-" + hashlib.sha256(f"{host}\n{text}".encode()).hexdigest()[:32]


def _engine(text: str | None, obj: bytes | None) -> tuple:
    """(engine, context, object code) of the chunk, finalised: its object code from the disk cache, or its IR text
    compiled by the full code generator (kernel.compile_object; always-inline: a helper's helpers are inlined into
    it), loaded as kernels' objects are (kernel._load)."""
    from llvmlite import binding as llvm

    from gpushim.ptx.jit.kernel import _load, compile_object

    context = llvm.create_context()
    if obj is None:
        ref = llvm.parse_assembly(text, context=context)
        ref.verify()
        obj = compile_object(ref, 1, False)
    engine = _load(obj, context, 1)
    engine.finalize_object()
    return engine, context, obj


def _register(engine, context, exports: dict[str, int], where: str) -> bool:
    from llvmlite import binding as llvm

    addrs = {nm: engine.get_function_address(nm) for nm in exports}
    if not all(addrs.values()):
        return False
    _lib.keep.append((context, engine))
    for nm, a in addrs.items():
        if nm not in _lib.addr:  # (a function two chunks define: the first stays, the same code)
            llvm.add_symbol(nm, a)
            _lib.addr[nm], _lib.sizes[nm], _lib.where[nm] = a, exports[nm], where
    return True


def _from_disk(k: str) -> bool:
    """Load chunk k from the disk cache (under the lock; the caller counts the time); False when it is not there
    or not usable."""
    cached = diskcache.load(k)
    if cached is None:
        return False
    meta, obj = cached
    exports = meta.get("exports")
    if meta.get("sha256") != hashlib.sha256(obj).hexdigest() or not isinstance(exports, dict):
        log.warning("the PTX JIT's runtime library chunk %s in the disk cache is corrupt: compiling it again", k)
        return False
    engine, context, _ = _engine(None, obj)
    if not _register(engine, context, exports, k):
        log.warning("the PTX JIT's runtime library chunk %s lacks functions: compiling it again", k)
        return False
    _lib.disk_loads += 1
    return True


def load(chunk: Chunk | None) -> None:
    """Make the chunk's functions callable: from the disk cache, or compiled (and stored there)."""
    if chunk is None:
        return
    exports = chunk.exports()
    with _lib.lock:
        if all(nm in _lib.addr for nm in exports):
            return  # (another thread's kernel loaded them meanwhile)
        c0 = time.thread_time()
        text = str(chunk.m)
        k = _disk_key(text)
        if k and _from_disk(k):
            _lib.load_cpu_s += chunk.ir_cpu_s + time.thread_time() - c0  # (the IR: to know its key)
            return
        engine, context, obj = _engine(text, None)
        if k:
            diskcache.store(k, {"exports": exports, "sha256": hashlib.sha256(obj).hexdigest()}, obj)
        if not _register(engine, context, exports, k):
            raise RuntimeError("the PTX JIT's runtime library lacks a function it compiled")
        _lib.compiles += 1
        _lib.compile_cpu_s += chunk.ir_cpu_s + time.thread_time() - c0


def where(names) -> dict[str, str]:
    """{name: its chunk's disk-cache key} of loaded functions (a kernel's disk-cache entry records it)."""
    return {nm: _lib.where[nm] for nm in names}


def ensure(chunks: dict[str, str]) -> bool:
    """The functions a kernel loaded from the disk cache calls ({name: chunk key}, where()): True when all are
    loaded (from the disk cache where missing), False when one cannot be (the kernel is then compiled again)."""
    missing = {k for nm, k in chunks.items() if nm not in _lib.addr}
    if not missing:
        return True
    with _lib.lock:
        c0 = time.thread_time()
        try:
            for k in missing:
                if not k or not _from_disk(k):
                    return False
            return all(nm in _lib.addr for nm in chunks)
        finally:
            _lib.load_cpu_s += time.thread_time() - c0
