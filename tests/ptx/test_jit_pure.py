"""Pure expansions as helper functions (gpushim/ptx/jit/pure.py): at tier 1 the software directed rounding and
the half-precision lanes are emitted once per module and called; the cheap code generator keeps them out of line
(fewer IR instructions for LLVM), the full one inlines them; with the runtime library (the default) both call its
functions (test_jit_rtlib.py). Either way the results are the interpreter's."""

from __future__ import annotations

import re

import numpy as np
import pytest
from harness import ENGINE, Dev, compile_ptx


def _tier1(name: str, arch: str, kname: str):
    from gpushim.ptx.jit.codegen import generate

    dev = Dev(compile_ptx(name, arch))
    mod = dev.mod
    return generate(mod._mod, mod._compiled[kname].prog, kname, 1)


@pytest.mark.parametrize("engine", ["jit"], indirect=True)  # (no launches: engine-independent)
def test_cheap_kernels_call_one_definition_of_each_helper(engine, monkeypatch):
    monkeypatch.setenv("GPUSHIM_PTX_JIT_RTLIB", "off")  # helpers defined in the module (the library: test_jit_rtlib.py)
    g = _tier1("jithalf", "sm_90", "halfOps")
    inlined, actual = g.ir_size(), g.ir_size(inlined=False)
    # the size that chooses the code generator is the inlined one (the same choice as without helpers)
    assert actual < 0.8 * inlined
    g.outline()  # what tier 1 does for a kernel on the cheap code generator
    text = str(g.m)
    defs = re.findall(r'define internal \S+ @"(pure\.\d+)"\([^)]*\)([^\n{]*)', text)
    assert len(defs) == len(g.helpers) > 5
    assert all("noinline" in attrs and "alwaysinline" not in attrs for _, attrs in defs)
    h2f = g.helpers[("h2f",)][0].name  # f16 -> f32: each operand of each f16 lane
    assert len(re.findall(rf'call float @"{re.escape(h2f)}"\(', text)) >= 10
    assert text.count(f'define internal float @"{h2f}"') == 1
    # on the full code generator they are inlined by tier 1's pipeline
    g2 = _tier1("jithalf", "sm_90", "halfOps")
    assert all("alwaysinline" in fn.attributes for fn, _, _ in g2.helpers.values())
    assert g2.ir_size() == inlined


@pytest.mark.parametrize("engine", ["jit"], indirect=True)  # compares the two engines itself (diff)
def test_cheap_helpers_give_the_interpreters_results(engine, monkeypatch, rng):
    from gpushim.ptx.jit import kernel
    from gpushim.ptx.jit.diff import stats

    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", "off")  # tier 1 runs every launch below
    monkeypatch.setenv("GPUSHIM_PTX_JIT_T1", "cheap")
    kernel._cache.clear()
    try:
        half = Dev(compile_ptx("jithalf", "sm_90"))
        rnd = Dev(compile_ptx("jitround", "sm_75"))
        n = 1024
        h = rng.integers(0, 2**16, 3 * n, dtype=np.uint32).astype(np.uint16)
        h[: 3 * n // 2] = rng.standard_normal(3 * n // 2).astype(np.float16).view(np.uint16)
        f = rng.integers(0, 2**32, 4 * n, dtype=np.uint64).astype(np.uint32).view(np.float32)
        x = rng.integers(0, 2**32, 3 * n, dtype=np.uint64).astype(np.uint32).view(np.float32)
        x[: 3 * n // 2] = rng.standard_normal(3 * n // 2).astype(np.float32)
        ENGINE["name"] = "diff"  # both engines; the launch fails unless memory and outcome are bit-identical
        compared = stats["compared"]
        half.launch("halfOps", n // 256, 256, half.array(h), half.empty(80 * n), half.empty(48 * n), half.array(f), n)
        rnd.launch("directed32", n // 256, 256, rnd.array(x), rnd.empty(30 * 4 * n), n)
        assert stats["compared"] == compared + 2
        for dev, k in ((half, "halfOps"), (rnd, "directed32")):
            t1 = dev.mod.jit_kernel(k).t1
            assert t1.codegen == "cheap"
    finally:
        kernel._cache.clear()  # (other tests compile these kernels anew, as configured)
