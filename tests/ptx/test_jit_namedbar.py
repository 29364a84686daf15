"""Named barriers and mbarrier on the compiling engine (gpushim/ptx/jit/namedbar.py, ops_mbarrier.py; kernels in
kernels/jitnamedbar.cu, mbarrier90.cu, more.cu): barrier ids, thread counts, bar.arrive/barrier.arrive, mbarrier
objects, on both tier-1 code generators and on tier 2, against the interpreter (the reference: barriers.py,
ops_mbarrier.py) and against the PTX ISA's definitions.

PTX ISA, "bar, barrier": `bar.sync a{, b}` waits until b threads (every thread of the CTA without b) have arrived
at barrier a (0-15); `bar.arrive a, b` counts the thread's arrival without waiting; a barrier completes when the
count is reached and is then reset for its next use."""

from __future__ import annotations

import numpy as np
import pytest
from harness import ENGINE, Dev, assert_compiled_as_configured, compile_ptx

from gpushim.cuda_errors import CudaError
from gpushim.ptx.jit import kernel as jit_kernel

CONFIGS = [("full", "off"), ("cheap", "off"), ("auto", "now")]  # (GPUSHIM_PTX_JIT_T1, GPUSHIM_PTX_JIT_TIER2)


def _configured(request, monkeypatch, name: str, arch: str) -> Dev:
    t1, tier2 = request.param
    monkeypatch.setenv("GPUSHIM_PTX_JIT_T1", t1)
    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", tier2)
    monkeypatch.setenv("GPUSHIM_PTX_JIT_CACHE", "off")  # compiled here, by the generator asked for
    jit_kernel._cache.clear()
    d = Dev(compile_ptx(name, arch))
    d.config = request.param
    return d


@pytest.fixture(params=CONFIGS, ids=lambda c: f"t1={c[0]},tier2={c[1]}")
def dev(request, monkeypatch):
    yield _configured(request, monkeypatch, "jitnamedbar", "sm_90")  # (mbarrier: sm_80 and later)
    jit_kernel._cache.clear()


@pytest.fixture(params=CONFIGS, ids=lambda c: f"t1={c[0]},tier2={c[1]}")
def mb(request, monkeypatch):
    yield _configured(request, monkeypatch, "mbarrier90", "sm_90")
    jit_kernel._cache.clear()


@pytest.fixture(params=CONFIGS, ids=lambda c: f"t1={c[0]},tier2={c[1]}")
def more(request, monkeypatch):
    yield _configured(request, monkeypatch, "more", "sm_75")
    jit_kernel._cache.clear()


def _engines(dev: Dev, kernel: str, launch) -> dict[str, object]:
    """launch(engine) on the interpreter, the JIT and "diff" (which fails a launch that differs); the kernel
    was compiled (no fallback) by the configured generator and tier"""
    outs = {}
    for eng in ("interp", "jit", "diff"):
        ENGINE["name"] = eng
        outs[eng] = launch()
    assert_compiled_as_configured(dev, kernel)
    return outs


def _same_fault(dev: Dev, kernel: str, *args) -> str:
    """the launch fails on the interpreter and on the JIT with the same error and message (returned)"""
    errs = {}
    for eng in ("interp", "jit"):
        ENGINE["name"] = eng
        with pytest.raises(CudaError) as e:
            dev.launch(kernel, *args)
        errs[eng] = (e.value.code, e.value.message)
    assert errs["interp"] == errs["jit"]
    return errs["jit"][1]


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_pipeline_two_named_barriers_per_stage(dev, engine, rng):
    """producers bar.arrive on a stage's "full" barrier and bar.sync on its "empty" one, consumers the other
    way round (128 threads each); a third group scans with its own 64-thread barrier; a barrier that released
    early would let the producers overwrite a stage before the consumers read it"""
    blocks, rounds = 3, 7
    x = rng.integers(-1000, 1000, blocks * rounds * 64, dtype=np.int32)
    px = dev.array(x)

    def launch():
        po, ps = dev.empty(x.nbytes), dev.empty(4 * blocks)
        dev.launch("pipeline", blocks, 192, px, po, ps, rounds)
        return dev.get(po, np.int32, x.size).copy(), dev.get(ps, np.int32, blocks).copy()

    outs = _engines(dev, "pipeline", launch)
    src = x.reshape(blocks, rounds, 64)
    c, r = np.arange(64), np.arange(rounds)[:, None]
    want = src[:, r, (c * 7 + r) & 63] * 3 + r
    sums = want.sum(axis=(1, 2)) + np.cumsum(src[:, 0, :] ^ 0x55, axis=1).sum(axis=1)
    for eng, (out, s) in outs.items():
        assert np.array_equal(out.reshape(blocks, rounds, 64), want), eng
        assert np.array_equal(s, sums.astype(np.int32)), eng


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
@pytest.mark.parametrize("mode", [0, 1, 2])
def test_threads_that_never_arrive(dev, engine, mode):
    """barriers whose count is never reached. CUDA leaves this undefined (a hang); the interpreter reports no
    deadlock: a barrier without a count completes once every live thread arrived (barriers.recheck, after exits),
    and when no thread can run, every waiting thread is released (barriers.release_all). The JIT does the same:
    the launch succeeds with the interpreter's results. mode 0: two halves wait at barriers 1 and 2 (count
    128, 64 arrive each); mode 1: threads >= 96 exit, the others wait at barrier 1 without a count; mode 2:
    threads < 64 wait at barrier 1 with count 128, the others exit."""
    blocks = 2

    def launch():
        po = dev.array(np.full(blocks * 128, -1, np.int32))
        dev.launch("neverArrive", blocks, 128, po, mode)
        return dev.get(po, np.int32, blocks * 128).reshape(blocks, 128).copy()

    outs = _engines(dev, "neverArrive", launch)
    t, b = np.arange(128), np.arange(blocks)[:, None]
    want = np.where(t < (128, 96, 64)[mode], (t ^ 1) * 5 + b + ((t + 32) & 63) * 5 + b, -1)
    for eng, out in outs.items():
        assert np.array_equal(out, want), eng


def test_register_barrier_id_falls_back(dev, engine):
    """`bar.sync %r, %r` (an id and a count in registers): not compiled, the reason named, the interpreter
    runs it (CUDA's result)"""
    po = dev.empty(4 * 128)
    dev.launch("registerBarrier", 1, 128, po, 1, 128)
    assert np.array_equal(dev.get(po, np.int32, 128), 128 - np.arange(128))
    if engine != "interp":
        assert "register barrier id" in (jit_kernel.fallback_reason(dev.mod.source_hash, "registerBarrier") or "")


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_sync_waits_for_late_arrivals(dev, engine):
    """a bar.sync with a count releases only when that many threads arrived, bar.arrive's included: the warps
    arrive rounds apart (each first passes barriers of its own), and every waiting thread sees every addition
    made before the last arrival; the barrier is reused in each phase"""
    blocks, phases = 2, 3

    def launch():
        po = dev.array(np.full(blocks * phases * 128, -1, np.int32))
        dev.launch("arrivalOrder", blocks, 128, po, phases)
        return dev.get(po, np.int32, blocks * phases * 128).reshape(blocks, phases, 128).copy()

    outs = _engines(dev, "arrivalOrder", launch)
    p = np.arange(phases)[:, None]
    want = np.where(np.arange(128) >= 32, 128 * (p + 1) * (p + 2) // 2, -1)
    for eng, out in outs.items():
        assert np.array_equal(out, np.broadcast_to(want, out.shape)), eng


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_producer_consumer_compiled(more, engine, rng):
    """more.cu's producerConsumer (bar.arrive 1/2 and bar.sync 2/1, 128 threads), once on the interpreter only"""
    blocks, rounds = 3, 5
    x = rng.integers(-1000, 1000, blocks * rounds * 64, dtype=np.int32)
    px = more.array(x)

    def launch():
        po = more.empty(x.nbytes)
        more.launch("producerConsumer", blocks, 128, px, po, rounds)
        return more.get(po, np.int32, x.size).copy()

    for eng, out in _engines(more, "producerConsumer", launch).items():
        assert np.array_equal(out.reshape(-1, 64), x.reshape(-1, 64)[:, np.arange(64) ^ 1] * 2 + 1), eng


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_mbarrier_kernels_compiled(mb, engine, rng):
    """mbarrier90.cu's kernels (test_mbarrier.py has their CUDA semantics): cuda::barrier's arrive_and_wait
    (arrive, then a try_wait loop: an incomplete wait lets the other threads run), memcpy_async completed through
    the barrier (cp.async.mbarrier.arrive), and raw states, pending counts, drops and transactions"""
    blocks, threads, phases = 3, 96, 5

    def phases_launch():
        po = mb.empty(4 * blocks * threads)
        mb.launch("barrierPhases", blocks, threads, po, phases)
        return mb.get(po, np.int32, blocks * threads).reshape(blocks, threads).copy()

    t = np.arange(threads)
    want = np.array([sum(((t + 1 + p) % threads) * (p + 1) + b for p in range(phases)) for b in range(blocks)])
    for eng, got in _engines(mb, "barrierPhases", phases_launch).items():
        assert np.array_equal(got, want), eng

    n = 128 * 6
    x = rng.integers(-1000, 1000, n, dtype=np.int32)
    pi = mb.array(x)

    def copy_launch():
        po = mb.empty(4 * n)
        mb.launch("memcpyAsyncBarrier", 2, 128, pi, po, n)
        return mb.get(po, np.int32, n).copy()

    for eng, got in _engines(mb, "memcpyAsyncBarrier", copy_launch).items():
        assert np.array_equal(got.reshape(-1, 128), x.reshape(-1, 128)[:, ::-1] * 3), eng

    def raw_launch():
        po = mb.empty(8 * 6)
        mb.launch("rawMbarrier", 2, 4, po)
        return mb.get(po, np.uint64, 6).tolist()

    for eng, got in _engines(mb, "rawMbarrier", raw_launch).items():
        assert got == [2, 0, 1, 0, 1, 0], eng


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
@pytest.mark.parametrize("mode, words", [(0, "not initialised"), (1, "count must be between 1")])
def test_mbarrier_faults_as_interpreter(mb, engine, mode, words):
    """misuse (undefined in PTX): the compiled kernel fails with the interpreter's error and message"""
    assert words in _same_fault(mb, "badMbarrier", 1, 32, mode)
    assert jit_kernel.fallback_reason(mb.mod.source_hash, "badMbarrier") is None
    assert mb.mod.jit_kernel("badMbarrier") is not None


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_mbarrier_outside_shared_memory(dev, engine):
    """an mbarrier object at a generic address of global memory: the interpreter's fault, the same message"""
    p = dev.empty(8)
    assert "must be in shared memory" in _same_fault(dev, "mbarrierGlobal", 1, 32, p)
    assert dev.mod.jit_kernel("mbarrierGlobal") is not None
