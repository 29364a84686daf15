"""Pure expansions as helper functions (a mixin of codegen.Codegen): at tier 1 an expensive expansion that only
computes a value from its operands (software directed rounding, half precision lanes) is a function called at
each use, instead of its 20-80 IR instructions inlined at every PTX instruction.

With the runtime library (rtlib.py, the default) the kernel's module only declares the helpers: they are compiled
once per process (or loaded from the disk cache) with the full code generator, and the kernel's code calls them
out of line, on both of tier 1's code generators. A helper the process does not have yet is built here, from the
same `emit`, into the kernel's chunk of the library (`rt_chunk`), which kernel.py compiles before the kernel.
Without it ($GPUSHIM_PTX_JIT_RTLIB=off) each module defines its helpers as internal functions, `alwaysinline`
(the full code generator inlines them) or `noinline` (Codegen.outline(), for the cheap one). Tier 2 inlines the
expansions either way."""

from __future__ import annotations

import time

from gpushim.ptx.jit import rtlib
from gpushim.ptx.jit import textir as ir


class PureHelpers:
    # set by generate() at tier 1: {key: (function, its IR instructions in this module, the IR instructions a call
    # stands for: its body with the helpers it calls inlined)}; None: the expansions inline
    helpers: dict | None = None
    npure = 0  # helpers defined in the module (named pure.N)
    inlined_extra = 0  # IR instructions the calls stand for beyond themselves (ir_size: the inlined size)
    rt_used: dict | None = None  # library functions the module calls: {name: key}; None: no library (rtlib.py)
    rt_chunk: rtlib.Chunk | None = None  # the library functions this kernel builds (the process lacks them)
    _in_chunk = False  # building a library function: helpers it calls are defined beside it, in the chunk

    def _pure(self, key: tuple, ret, arg_types, emit, args):
        """emit(*values) -> the value, built with self.b from operands only (no memory, no faults, no blocks of
        the thread function). At tier 1 a call of the helper for key (made from emit at its first use)."""
        if self.helpers is None:
            return emit(*args)
        h = self.helpers.get(key)
        if h is None:
            fty = ir.FunctionType(ret, list(arg_types))
            if self._in_chunk:
                h = self.helpers[key] = self._pure_define(fty, emit, rtlib.name(key), "")
            elif self.rt_used is not None:
                h = self.helpers[key] = self._rt_declare(key, fty, emit)
            else:
                self.npure += 1
                h = self.helpers[key] = self._pure_define(fty, emit, f"pure.{self.npure}", "internal")
        fn, _, inlined = h
        self.inlined_extra += inlined - 2  # inlined: its body less the ret, in place of the call
        return self.b.call(fn, list(args))

    def _pure_define(self, fty, emit, name: str, linkage: str) -> tuple:
        fn = ir.Function(self.m, fty, name=name)
        fn.linkage = linkage
        fn.attributes.add("alwaysinline")
        saved = self.b, self.f, self._known, self._known_blk, self.inlined_extra
        self.f, self._known, self._known_blk, self.inlined_extra = fn, {}, None, 0
        self.b = ir.IRBuilder(fn.append_basic_block("e"))
        try:
            self.b.ret(emit(*fn.args))
            size = sum(len(blk.instructions) for blk in fn.blocks)
            return fn, size, size + self.inlined_extra  # (helpers it calls: inlined)
        finally:
            self.b, self.f, self._known, self._known_blk, self.inlined_extra = saved

    def _rt_declare(self, key: tuple, fty, emit) -> tuple:
        """The library's helper for key, declared in the module (built into rt_chunk when the process lacks it)."""
        name = rtlib.name(key)
        inlined = rtlib.size(name)
        if inlined is None:
            chunk = self.rt_chunk = self.rt_chunk or rtlib.Chunk()
            h = chunk.helpers.get(key)
            if h is None:
                with self._switch_module(chunk):
                    h = chunk.helpers[key] = self._pure_define(fty, emit, name, "")
            inlined = h[2]
        fn = ir.Function(self.m, fty, name=name)
        fn.attributes.add("readnone")  # (a value of its operands: LLVM may merge or drop calls)
        fn.attributes.add("nounwind")
        self.rt_used[name] = key
        return fn, 0, inlined

    def _switch_module(self, chunk: rtlib.Chunk):
        """Code generation into the chunk's module (its own intrinsics' declarations and helpers) for a while."""
        return _InChunk(self, chunk)

    def _pure_noinline(self) -> None:
        """Helpers of the module stay out of line (the cheap code generator: Codegen.outline)."""
        for fn, size, _ in (self.helpers or {}).values():
            if size:  # (library functions are declarations)
                fn.attributes.remove("alwaysinline")
                fn.attributes.add("noinline")

    def _pure_size(self) -> int:
        """IR instructions of the helper definitions."""
        return sum(size for _, size, _ in (self.helpers or {}).values())


class _InChunk:
    """Context manager of PureHelpers._switch_module: the module, its helpers and the intrinsics (`i_*`) swapped."""

    def __init__(self, g, chunk: rtlib.Chunk) -> None:
        self.g, self.chunk = g, chunk

    def __enter__(self) -> None:
        g, chunk = self.g, self.chunk
        self.c0 = time.thread_time()
        self.saved = (g.m, g.helpers, g._in_chunk, {k: v for k, v in vars(g).items() if k.startswith("i_")})
        g.m, g.helpers, g._in_chunk = chunk.m, chunk.helpers, True
        if not chunk.intrinsics:
            g._declare_intrinsics()
            chunk.intrinsics = {k: v for k, v in vars(g).items() if k.startswith("i_")}
        vars(g).update(chunk.intrinsics)

    def __exit__(self, *exc) -> None:
        g = self.g
        g.m, g.helpers, g._in_chunk, intrinsics = self.saved
        vars(g).update(intrinsics)
        self.chunk.ir_cpu_s += time.thread_time() - self.c0
