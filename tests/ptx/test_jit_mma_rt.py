"""@combine's mma case is one call of the runtime library's mma_warp (gpushim/ptx/jit/mma_rt.py), for every
mma.sync and wmma.mma form the JIT compiles: the kernel's module only declares it (or, with
$GPUSHIM_PTX_JIT_RTLIB=off, defines it once), and the form is a constant descriptor. Its results are checked bit
for bit against the interpreter by test_jit_mma.py and test_mma_wmma.py; here: the code the kernels get, and that
the descriptor's buffers hold every supported form."""

from __future__ import annotations

import pytest
from harness import compile_ptx

from gpushim.ptx import load_module
from gpushim.ptx.jit import mma_rt, ops_mma, rtlib
from gpushim.ptx.jit.codegen import generate
from gpushim.ptx.mma_frag import dims

ONCE = pytest.mark.parametrize("engine", ["interp"], indirect=True)  # (they launch nothing)


@ONCE
def test_buffers_hold_every_supported_shape(engine):
    shapes = {s for d in (ops_mma._SHAPES, ops_mma._WMMA_SHAPES) for v in d.values() for s in v}
    most = max(max(m * k, k * n, m * n) for m, n, k in map(dims, shapes))
    assert most == mma_rt.MAXE  # (m16n8k32's A, m32n8k16's A, m8n32k16's B: 512 elements)


@ONCE
@pytest.mark.parametrize("lib", ["on", "off"])
def test_every_form_is_one_call(engine, monkeypatch, lib):
    monkeypatch.setenv("GPUSHIM_PTX_JIT_RTLIB", lib)
    for name, arch, kern, forms in (("mma_wmma", "sm_80", "u8_32x8_rr", 2), ("mma_wmma", "sm_80", "h16_rc_f32", 1),
                                    ("mma_sync", "sm_90", "m16n8k32_s32_u8s8_sat", 1)):  # fmt: skip
        m = load_module(compile_ptx(name, arch))
        g = generate(m._mod, m._compiled[kern].prog, kern, 1)
        fn = next(f for f in g.m.functions if f.name in (rtlib.name(("mma_warp",)), "mma_warp"))
        assert fn.is_declaration == (lib == "on"), kern
        text = str(g.m)
        # one call for all the kernel's (unguarded) mmas, the form's descriptor chosen by the resume point
        assert text.count(f'call void @"{fn.name}"') + text.count(f"call void @{fn.name}(") == 1, kern
        assert text.count("mmadesc_") == 2 * forms, kern  # (each descriptor defined and used once)
        combine = [f for f in g.m.functions if f.name.startswith("combine")]
        size = sum(len(b.instructions) for f in combine for b in f.blocks)
        assert size < 300, (kern, size)  # (was 289-1490 with the computation unrolled per form)
