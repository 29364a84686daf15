"""mbarrier, cp.async with mbarriers and griddepcontrol (tests/ptx/kernels/mbarrier90.cu, sm_90 PTX).

Semantics from the PTX ISA, "mbarrier": arrive returns a state of the current phase; a phase completes when
its pending arrivals and its transaction count both reach zero; arrive_drop lowers the expected arrivals of
later phases; test_wait/try_wait(.parity) tell whether the phase of a state (or of a parity) completed."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def mb(dev_for):
    return dev_for("mbarrier90", "sm_90")


def test_barrier_phases(mb):
    blocks, threads, phases = 3, 96, 5
    po = mb.empty(4 * blocks * threads)
    mb.launch("barrierPhases", blocks, threads, po, phases)
    got = mb.get(po, np.int32, blocks * threads).reshape(blocks, threads)
    t = np.arange(threads)
    for b in range(blocks):
        want = sum(((t + 1 + p) % threads) * (p + 1) + b for p in range(phases))
        assert np.array_equal(got[b], want)


def test_memcpy_async_with_barrier(mb, rng):
    n, threads = 128 * 6, 128
    x = rng.integers(-1000, 1000, n, dtype=np.int32)
    pi, po = mb.array(x), mb.empty(4 * n)
    mb.launch("memcpyAsyncBarrier", 2, threads, pi, po, n)
    got = mb.get(po, np.int32, n).reshape(-1, threads)
    assert np.array_equal(got, x.reshape(-1, threads)[:, ::-1] * 3)


def test_pipeline_stages(mb, rng):
    tiles, threads = 5, 128
    x = rng.integers(-1000, 1000, tiles * threads, dtype=np.int32)
    pi, po = mb.array(x), mb.empty(4 * threads)
    mb.launch("pipelineStages", 1, threads, pi, po, tiles)
    want = sum(x.reshape(tiles, threads)[k] * (k + 1) for k in range(tiles))
    assert np.array_equal(mb.get(po, np.int32, threads), want)


def test_raw_mbarrier_states(mb):
    """pending_count of a state: PTX leaves the state's encoding opaque; gpushim's is the object before the
    arrival, so thread 2 of 4 sees 2 pending arrivals. The waits follow the ISA: a phase completes at its last
    arrival only once its transaction count is 0, and parity waits name the phase they wait for."""
    po = mb.empty(8 * 6)
    mb.launch("rawMbarrier", 2, 4, po)
    assert mb.get(po, np.uint64, 6).tolist() == [2, 0, 1, 0, 1, 0]


def test_griddepcontrol(mb):
    pa, pb = mb.empty(4 * 64), mb.empty(4 * 64)
    mb.launch("pdlPrimary", 1, 64, pa)
    mb.launch("pdlSecondary", 1, 64, pa, pb)
    assert np.array_equal(mb.get(pb, np.int32, 64), 2 * (np.arange(64) + 1))


@pytest.mark.parametrize("mode, words", [(0, "not initialised"), (1, "count must be between 1")])
def test_mbarrier_misuse_faults(mb, mode, words):
    """Undefined in PTX; the engine stops the kernel with an error naming the instruction instead."""
    from gpushim.cuda_errors import CudaError

    with pytest.raises(CudaError) as e:
        mb.launch("badMbarrier", 1, 32, mode)
    assert "mbarrier" in e.value.message and words in e.value.message
