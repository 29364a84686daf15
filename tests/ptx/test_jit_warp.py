"""Warp collectives on the compiling engine (gpushim/ptx/jit/ops_warp.py): shuffles, votes, match, redux,
activemask and __syncwarp in divergent code, with barriers, early exits and labeled masks. Each test compiles
kernels/jitwarp.cu's kernels (sm_90) on tier 1 and on tier 2, checks that the JIT runs them (no fallback), runs them on
random inputs with "diff" (both engines from the same memory, bit-identical memory or the launch fails) and
checks the answer against CUDA's definition where it is simple to state."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from harness import Dev, compile_ptx

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx.jit import kernel as jit_kernel


@pytest.fixture
def dev(monkeypatch, request):
    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", request.param)
    jit_kernel._cache.clear()  # the policy applies when a kernel is compiled
    d = Dev(compile_ptx("jitwarp", "sm_90"))  # (elect.sync needs sm_90)
    launch = d.launch

    def launch_compiled(kernel, *args, **kw):  # every kernel here must run on the JIT, not fall back
        assert d.mod.jit_kernel(kernel) is not None, f"{kernel} runs on the interpreter"
        return launch(kernel, *args, **kw)

    d.launch = launch_compiled
    yield d
    jit_kernel._cache.clear()


TIERS = pytest.mark.parametrize("dev", ["now", "off"], indirect=True)  # tier 2 from the start; tier 1 only
DIFF = pytest.mark.parametrize("engine", ["diff"], indirect=True)


@DIFF
@TIERS
def test_divergent_shuffles(dev, engine, rng):
    """CUDA C++ Programming Guide, Warp Shuffle Functions: __shfl_up/down_sync read lane -/+ delta inside the
    lane's width-segment (their own value when that leaves it), __shfl_xor_sync lane ^ laneMask."""
    n = 512
    for _ in range(3):
        v = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
        sel = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        pv, ps, po = dev.array(v), dev.array(sel), dev.empty(16 * n)
        dev.launch("shflDivergent", 4, 128, pv, ps, po)
        got = dev.get(po, np.int32, 4 * n).reshape(n, 4)
        for w in range(n // 32):
            sw = int(sel[32 * w])
            W = 4 << (sw & 3)
            lanes = np.arange(32)
            inn = (sw >> (8 + lanes // W)) & 1 == 1
            vv, ss, g = v[32 * w : 32 * w + 32], sel[32 * w : 32 * w + 32].astype(np.int64), got[32 * w : 32 * w + 32]
            if inn.any():
                lo, hi = lanes[inn].min(), lanes[inn].max()
                d_up, d_dn, m = ss & 7, (ss >> 3) & 7, ((ss >> 9) & 31) & (W - 1)
                seg = lanes % W
                up = np.where(seg >= d_up, lanes - d_up, lanes)
                dn = np.where(seg + d_dn < W, lanes + d_dn, lanes)
                for lane in lanes[inn]:
                    assert g[lane, 0] == vv[hi if (ss[lane] >> 8) & 1 else lo]
                    assert g[lane, 1] == vv[up[lane]] and g[lane, 2] == vv[dn[lane]]
                    assert g[lane, 3] == vv[lane ^ m[lane]]
            if not inn.all():
                assert (g[~inn, 0] == vv[lanes[~inn].min()]).all()


@DIFF
@TIERS
def test_shuffle_predicate_clamp_and_segment_mask(dev, engine, rng):
    """PTX ISA, shfl.sync: the source lane from the mode, b and c (clamp value c[4:0], segment mask c[12:8]),
    the predicate false (and the own value) when the source is out of range."""
    n = 256
    for _ in range(3):
        v = rng.integers(0, 2**31, n, dtype=np.int32)
        c = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        pv, pc, po = dev.array(v), dev.array(c), dev.empty(16 * n)
        dev.launch("shflPred", 2, 128, pv, pc, po)
        got = dev.get(po, np.int32, 4 * n).reshape(n, 4)
        for i in range(n):
            lane, cc, b = i % 32, int(c[i >> 5]) & 0x1F1F, int(c[i]) & 31
            seg, cval = (cc >> 8) & 0x1F, cc & 0x1F
            maxl = (lane & seg) | (cval & ~seg)
            j = lane - b
            ok = j >= maxl
            assert (got[i, 0], got[i, 1]) == (v[i - lane + j] if ok else v[i], int(ok)), i
            j = (lane & seg) | (b & ~seg)
            ok = j <= maxl
            assert (got[i, 2], got[i, 3]) == (v[i - lane + j] if ok else v[i], int(ok)), i


@DIFF
@TIERS
def test_collectives_in_a_divergent_loop(dev, engine, rng):
    """Lanes leave a loop after different trip counts; votes, match and redux run with __activemask()."""
    n = 256
    for _ in range(3):
        v = rng.integers(-50, 50, n, dtype=np.int32)
        trips = rng.integers(0, 6, n, dtype=np.uint32)
        trips[64:96] = 3  # a warp where every lane runs every trip
        pv, pt, po = dev.array(v), dev.array(trips), dev.empty(8 * n)
        dev.launch("loopCollectives", 2, 128, pv, pt, po)
        got = dev.get(po, np.uint32, n)
        assert (got[trips == 0] == 0).all() and (got[trips > 0] != 0).any()


@DIFF
@TIERS
def test_block_sums_with_barriers_and_early_exit(dev, engine, rng):
    n, reps, bs = 1000, 3, 256
    x = rng.integers(-8, 8, n).astype(np.float32)  # sums exact in f32 in any order
    px, po = dev.array(x), dev.empty(4 * 4 * reps)
    dev.launch("blockSums", 4, bs, px, po, n, reps)
    got = dev.get(po, np.float32, 4 * reps).reshape(4, reps)
    v = x.astype(np.float64)
    for r in range(reps):
        for blk in range(4):
            seg = v[blk * bs : min(n, blk * bs + bs)]
            assert got[blk, r] == seg.sum() + (seg.size + 31) // 32, (blk, r)
        v = v * 0.5 + 1.0


@DIFF
@TIERS
def test_syncwarp_orders_shared_memory(dev, engine, rng):
    """__syncwarp: a lane sees its neighbours' shared-memory stores made before it (Programming Guide,
    Synchronization Functions: __syncwarp is a memory fence among the participating threads)."""
    n = 512
    x = rng.integers(-100, 100, n, dtype=np.int32)
    px, po = dev.array(x), dev.empty(4 * n)
    dev.launch("syncwarpExchange", 2, 256, px, po)
    got = dev.get(po, np.int32, n)
    t = np.arange(n)
    base = t - t % 32
    nb = x[base + (t + 1) % 32]
    doubled = 2 * nb
    want = doubled[base + (t + 5) % 32]
    for w in range(n // 32):
        sl = slice(32 * w, 32 * w + 32)
        pos = x[sl] > 0
        odd = int(((nb[sl] & 1) == 1)[pos].sum())
        assert np.array_equal(got[sl], want[sl] + np.where(pos, odd, -1))


@DIFF
@TIERS
def test_elect_leads_each_labeled_group(dev, engine, rng):
    """PTX ISA, elect.sync: the leader is the lowest lane among membermask's active lanes."""
    n = 256
    label = rng.integers(0, 4, n, dtype=np.int32)
    pl, po = dev.array(label), dev.empty(8 * n)
    dev.launch("electGroups", 2, 128, pl, po)
    got = dev.get(po, np.uint32, 2 * n).reshape(n, 2)
    for i in range(n):
        base = i - i % 32
        lead = min(k for k in range(32) if label[base + k] == label[i])
        assert got[i, 0] == lead and got[i, 1] == int(i % 32 == lead), i


@DIFF
@TIERS
def test_block_reductions_at_barriers(dev, engine, rng):
    """__syncthreads_count/_and/_or (bar.red; Programming Guide, Synchronization Functions: the count of, all
    of, any of the predicates of the block's threads), after some threads of each block exited."""
    n, bs, live = 512, 128, 94
    v = rng.integers(-100, 100, n, dtype=np.int32)
    pv, po = dev.array(v), dev.empty(16 * n)
    dev.launch("barReductions", n // bs, bs, pv, po, live)
    got = dev.get(po, np.int32, 4 * n).reshape(n, 4)
    for blk in range(n // bs):
        vv = v[blk * bs : blk * bs + live]
        rows = got[blk * bs : blk * bs + live]
        assert (rows[:, 0] == (vv > 0).sum()).all()
        assert (rows[:, 1] == int((vv > -50).all())).all() and (rows[:, 2] == int((vv > 90).any())).all()
        acc, w = 0, vv.copy()
        for k in range(3):
            acc += int(((w >> k) & 1).sum())
            w = w + w[np.arange(live) ^ 1]
        assert (rows[:, 3] == acc).all()


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
@TIERS
def test_watchdog_stops_an_endless_shuffle_loop(dev, engine):
    """Each cycle of the loop stops at a shuffle, so its branch has no poll of its own: the rounds poll."""
    dev.mod.watchdog_s = 0.3
    with pytest.raises(CudaError) as e:
        dev.launch("shuffleSpin", 2, 64, dev.empty(4 * 64), 5)
    assert e.value.code == Err.LAUNCH_TIMEOUT


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
@pytest.mark.parametrize("dev", ["off"], indirect=True)
def test_shuffle_from_an_exited_lane_is_logged(dev, engine, caplog):
    """CUDA leaves a shuffle from a lane that does not take part undefined; the engines may differ there, so
    the JIT says so (once per kernel)."""
    caplog.set_level(logging.INFO, "gpushim.ptx.jit")
    x = np.arange(64, dtype=np.int32)
    px, po = dev.array(x), dev.empty(4 * 64)
    for _ in range(2):
        dev.launch("shflFromExited", 2, 32, px, po)
    got = dev.get(po, np.int32, 64)
    assert np.array_equal(got[:4], x[16:20])  # lanes 0..3 read lanes 16..19, which are there
    assert sum("a shuffle read a lane that was not at it" in r.message for r in caplog.records) == 1
