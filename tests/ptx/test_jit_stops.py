"""Stops on tier 1 (gpushim/ptx/jit/stops.py): at barriers and warp collectives a thread saves only what its
resume point needs (registers read before the next stop, not those recomputed there), tier 1's stops with
similar sets share one save and one restore sequence, its spill slots are thread-major, and registers start at
zero only where a path reads one before writing it. Less code to compile (pinned loosely: IR counts are
deterministic), the interpreter's results (with "diff")."""

from __future__ import annotations

import numpy as np
import pytest
from harness import Dev, compile_ptx

from gpushim.ptx.jit import kernel as jit_kernel
from gpushim.ptx.jit.stops import save_groups


def _tier1(name: str, arch: str, kname: str):
    from gpushim.ptx.jit.codegen import generate

    mod = Dev(compile_ptx(name, arch)).mod
    return generate(mod._mod, mod._compiled[kname].prog, kname, 1)


def test_save_groups_join_similar_sets_only():
    a = {f"r{i}" for i in range(12)}
    sets = {3: a, 7: a | {"x"}, 9: a - {"r0"} | {"y"}, 12: {"p", "q"}, 15: set(), 20: {"z"} | a}
    g = save_groups(sets)
    # 3, 7, 9, 20 differ by a register or two: one union (each member saves at most a quarter more)
    assert g[3] == g[7] == g[9] == g[20] == a | {"x", "y", "z"}
    assert 12 not in g and 15 not in g  # nothing similar; nothing to save
    big = {f"s{i}" for i in range(8)}
    assert save_groups({1: big, 2: big | {f"t{i}" for i in range(5)}}) == {}  # 5 more than 8 // 4: apart
    for i, u in g.items():
        assert sets[i] <= u and len(u) - len(sets[i]) <= max(2, len(sets[i]) // 4)


@pytest.mark.parametrize("engine", ["jit"], indirect=True)  # (no launches: engine-independent)
def test_stop_code_is_small(engine):
    g = _tier1("cub", "sm_75", "cubBlockOps")  # 27 stops (14 barriers, 13 shuffles), 340 PTX instructions
    # 9087 IR instructions before (every live register saved at every stop, every register zeroed at the
    # start, slot addresses computed per access, a @combine case per shuffle); 4704 when this was written
    assert g.ir_size() < 5600
    text = str(g.m)
    assert len(g.barriers) == 27
    lines = text.splitlines()
    assert 0 < sum(x.startswith('"save') for x in lines) < 10  # shared save sequences (6 when written)
    assert text.count('define internal void @"combine') == 1
    assert sum(x.startswith('"k') for x in lines) < 6  # @combine: one case for the shuffles
    sums = _tier1("jitwarp", "sm_90", "blockSums")
    assert sums.ir_size() < 2600  # 4842 before
    loops = _tier1("jitwarp", "sm_90", "loopCollectives")
    assert loops.ir_size() < 2500  # 4655 before (4 votes and 6 reductions: one @combine case each kind)


_UNSET = """
.version 7.5
.target sm_75
.address_size 64
.visible .entry unset(.param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  .reg .pred %p<3>;
  mov.u32 %r1, %tid.x;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 bra SKIP;
  mov.u32 %r2, 7;
SKIP:
  bar.sync 0;
  and.b32 %r5, %r1, 1;
  setp.ne.u32 %p2, %r5, 0;
  @%p2 mov.u32 %r6, 100;
  bar.sync 0;
  add.u32 %r3, %r2, %r4;
  add.u32 %r3, %r3, %r6;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3;
  ret;
}
"""


@pytest.mark.parametrize("gen", ["cheap", "full"])
@pytest.mark.parametrize("engine", ["diff"], indirect=True)  # both engines, bit-identical memory or it fails
def test_registers_read_before_written_are_zero_across_barriers(engine, gen, monkeypatch):
    """A register read before any write holds 0, in the interpreter and on tier 1 (r4 never written; r2 not
    on thread 0, r6 only on odd threads, each carried across barriers)."""
    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", "off")
    monkeypatch.setenv("GPUSHIM_PTX_JIT_T1", gen)
    jit_kernel._cache.clear()
    try:
        d = Dev(_UNSET)
        out = d.empty(4 * 64)
        d.launch("unset", 1, 64, out)
        assert d.mod.jit_kernel("unset") is not None
        t = np.arange(64)
        assert np.array_equal(d.get(out, np.uint32, 64), np.where(t == 0, 0, 7) + np.where(t % 2 == 1, 100, 0))
    finally:
        jit_kernel._cache.clear()


@pytest.mark.parametrize("gen", ["cheap", "full"])
@pytest.mark.parametrize("engine", ["diff"], indirect=True)
def test_cub_on_tier1(engine, gen, monkeypatch, rng):
    """CUB's block reduce, scan and radix sort (27 stops, shared save sequences) and warp reduce on tier 1
    (tests/ptx runs tier 2 from the first launch otherwise), against numpy and the interpreter."""
    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", "off")
    monkeypatch.setenv("GPUSHIM_PTX_JIT_T1", gen)
    jit_kernel._cache.clear()
    try:
        cub = Dev(compile_ptx("cub", "sm_75"))
        blocks = 2
        x = rng.integers(-(2**20), 2**20, 512 * blocks, dtype=np.int32)
        ps, pscan, psort = cub.empty(4 * blocks), cub.empty(4 * 128 * blocks), cub.empty(4 * 512 * blocks)
        cub.launch("cubBlockOps", blocks, 128, cub.array(x), ps, pscan, psort)
        assert cub.mod.jit_kernel("cubBlockOps") is not None
        assert cub.mod.jit_kernel("cubBlockOps").t2 is None  # tier 1 ran it
        v = x.reshape(blocks, 128, 4)[:, :, 0]
        assert np.array_equal(cub.get(ps, np.int32, blocks), v.sum(axis=1))
        assert np.array_equal(cub.get(pscan, np.int32, 128 * blocks).reshape(blocks, 128), np.cumsum(v, axis=1) - v)
        srt = cub.get(psort, np.int32, 512 * blocks).reshape(blocks, 512)
        assert np.array_equal(srt, np.sort(x.reshape(blocks, 512), axis=1))
        y = rng.standard_normal(256).astype(np.float32)
        po = cub.empty(4 * 8)
        cub.launch("cubWarpOps", 2, 128, cub.array(y), po)
        assert np.array_equal(cub.get(po, np.float32, 8), y.reshape(8, 32).max(axis=1))
    finally:
        jit_kernel._cache.clear()


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_outlined_stops_keep_the_count(engine, monkeypatch, rng):
    """The cheap code generator keeps the thread function out of line in kernels with stops too (a call per
    thread and round): its count is a local copy, added to the launch's at every stop and at the exit. The
    launch's thread-instruction count equals the full generator's (thread function inlined) and the
    interpreter's; the results are CUB's."""
    import harness

    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", "off")
    blocks = 3
    x = rng.integers(-(2**20), 2**20, 512 * blocks, dtype=np.int32)
    counts = {}
    try:
        for gen in ("cheap", "full", "interp"):
            monkeypatch.setenv("GPUSHIM_PTX_JIT_T1", "full" if gen == "interp" else gen)
            harness.ENGINE["name"] = "interp" if gen == "interp" else "jit"
            jit_kernel._cache.clear()
            cub = Dev(compile_ptx("cub", "sm_75"))
            ps, pscan, psort = cub.empty(4 * blocks), cub.empty(4 * 128 * blocks), cub.empty(4 * 512 * blocks)
            counts[gen] = cub.launch("cubBlockOps", blocks, 128, cub.array(x), ps, pscan, psort).thread_instructions
            if gen != "interp":
                t1 = cub.mod.jit_kernel("cubBlockOps").t1
                assert (t1.codegen, t1.outlined) == (gen, gen == "cheap")
            srt = cub.get(psort, np.int32, 512 * blocks).reshape(blocks, 512)
            assert np.array_equal(srt, np.sort(x.reshape(blocks, 512), axis=1))
    finally:
        jit_kernel._cache.clear()
    assert counts["cheap"] == counts["full"] == counts["interp"] > 0
