"""Pure expansions as helper functions of the module (a mixin of codegen.Codegen): at tier 1 an expensive
expansion that only computes a value from its operands (software directed rounding, half precision lanes) is
emitted once per module as an internal function and called at each use, instead of its 20-80 IR instructions
inlined at every PTX instruction. The helpers are `alwaysinline` (tier 1's pipeline inlines them: the full code
generator compiles the same code as before); Codegen.outline() makes them `noinline` for the cheap one, whose
LLVM time grows with the IR instructions it is given. Tier 2 inlines the expansions as before."""

from __future__ import annotations

from gpushim.ptx.jit import textir as ir


class PureHelpers:
    # set by generate() at tier 1: {key: (function, its IR instructions, the same with the helpers it calls
    # inlined)}; None: the expansions inline
    helpers: dict | None = None
    npure = 0  # helpers made (named pure.N)
    inlined_extra = 0  # IR instructions the calls stand for beyond themselves (ir_size: the inlined size)

    def _pure(self, key: tuple, ret, arg_types, emit, args):
        """emit(*values) -> the value, built with self.b from operands only (no memory, no faults, no blocks of
        the thread function). At tier 1 a call of the helper for key (made from emit at its first use)."""
        if self.helpers is None:
            return emit(*args)
        h = self.helpers.get(key)
        if h is None:
            self.npure += 1
            fn = ir.Function(self.m, ir.FunctionType(ret, list(arg_types)), name=f"pure.{self.npure}")
            fn.linkage = "internal"
            fn.attributes.add("alwaysinline")
            saved = self.b, self.f, self._known, self._known_blk, self.inlined_extra
            self.f, self._known, self._known_blk, self.inlined_extra = fn, {}, None, 0
            self.b = ir.IRBuilder(fn.append_basic_block("e"))
            try:
                self.b.ret(emit(*fn.args))
                size = sum(len(blk.instructions) for blk in fn.blocks)
                h = self.helpers[key] = (fn, size, size + self.inlined_extra)  # (helpers it calls: inlined)
            finally:
                self.b, self.f, self._known, self._known_blk, self.inlined_extra = saved
        fn, _, inlined = h
        self.inlined_extra += inlined - 2  # inlined: its body less the ret, in place of the call
        return self.b.call(fn, list(args))

    def _pure_noinline(self) -> None:
        """The helpers stay out of line (the cheap code generator: Codegen.outline)."""
        for fn, _, _ in (self.helpers or {}).values():
            fn.attributes.remove("alwaysinline")
            fn.attributes.add("noinline")

    def _pure_size(self) -> int:
        """IR instructions of the helper definitions."""
        return sum(size for _, size, _ in (self.helpers or {}).values())
