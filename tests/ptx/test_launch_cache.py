"""Repeated launches reuse per-configuration state (PtxModule._plan, state.Batch, lazy State attributes): no
launch may see anything of another one, errors must not poison later launches, and interleaved
configurations of one kernel must each compute their own results."""

import numpy as np
import pytest

from gpushim.cuda_errors import CudaError, Err


@pytest.fixture(scope="module")
def lc(dev_for):
    return dev_for("launchcache")


def test_shared_memory_starts_fresh(lc):
    out = lc.empty(4 * 64 * 3)
    lc.launch("sharedFresh", 3, 64, out, 1)
    assert np.array_equal(lc.get(out, np.int32, 192), np.tile(np.arange(64) + 100, 3))
    for _ in range(3):
        lc.launch("sharedFresh", 3, 64, out, 0)
        assert not lc.get(out, np.int32, 192).any()
        lc.launch("sharedFresh", 1, 64, out, 1)
        lc.launch("sharedFresh", 1, 64, out, 0)
        assert not lc.get(out, np.int32, 64).any()


def test_dynamic_shared_memory_starts_fresh_at_every_size(lc):
    out = lc.empty(4 * 32)
    for n in (16, 64, 16, 200, 64):
        lc.launch("dynSharedFresh", 1, 32, out, 1, n, shared=4 * n)
        exp = [sum(i + 7 for i in range(t, n, 32)) for t in range(32)]
        assert lc.get(out, np.int32, 32).tolist() == exp
        lc.launch("dynSharedFresh", 1, 32, out, 0, n, shared=4 * n)
        assert not lc.get(out, np.int32, 32).any()


def test_local_memory_starts_fresh(lc):
    out = lc.empty(4 * 32)
    for k in (3, 15, 0):
        lc.launch("localFresh", 1, 32, out, 1, k)
        assert lc.get(out, np.int32, 32).tolist() == [t * 16 + k + 1 for t in range(32)]
        lc.launch("localFresh", 1, 32, out, 0, k)
        assert not lc.get(out, np.int32, 32).any()


def _ids_ref(grid, block, scale):
    nb, tpb = int(np.prod(grid)), int(np.prod(block))
    i = np.arange(nb * tpb)
    return (i * scale + i // tpb).astype(np.int32)


def test_interleaved_configurations(lc, rng):
    cap = 300 * 256
    outs = [lc.empty(4 * cap) for _ in range(2)]
    configs = [
        ((1, 1, 1), (1, 1, 1)),
        ((1, 1, 1), (32, 1, 1)),
        ((4, 1, 1), (256, 1, 1)),
        ((2, 3, 1), (8, 4, 2)),
        ((1, 1, 1), (32, 1, 1)),
        ((300, 1, 1), (256, 1, 1)),  # more than one batch
        ((3, 2, 2), (5, 3, 1)),
    ]
    for rnd in range(3):
        for j, (grid, block) in enumerate(configs):
            out = outs[(rnd + j) % 2]
            scale = int(rng.integers(1, 1000))
            lc.launch_raw("ids", grid, block, 0, lc.pack("ids", out, scale), lc.mem, lc.symbols, lc.out.append)
            n = int(np.prod(grid)) * int(np.prod(block))
            assert np.array_equal(lc.get(out, np.int32, n), _ids_ref(grid, block, scale)), (grid, block)


def test_list_grid_and_numpy_dims(lc):
    out = lc.empty(4 * 64)
    for grid, block in (([2, 1, 1], [32, 1, 1]), ((np.int64(2), 1, 1), (np.int32(32), 1, 1)), ((2, 1, 1), (32, 1, 1))):
        lc.launch_raw("ids", grid, block, 0, lc.pack("ids", out, 5), lc.mem, lc.symbols, lc.out.append)
        assert np.array_equal(lc.get(out, np.int32, 64), _ids_ref((2, 1, 1), (32, 1, 1), 5))


def test_exited_threads_and_barriers_across_launches(lc):
    out = lc.empty(4 * 256)
    for n, v in ((100, 1), (256, 2), (0, 3), (31, 4), (256, 5)):
        lc.mem.fill(out, 0, 4 * 256)
        lc.launch("halfExit", 2, 128, out, n, v)
        got = lc.get(out, np.int32, 256)
        assert got[:n].tolist() == [v + i for i in range(n)] and not got[n:].any()


def test_errors_do_not_poison_later_launches(lc):
    p = lc.empty(4 * 32)
    for rnd in range(3):
        with pytest.raises(CudaError) as e:
            lc.launch("poke", 1, 1, p, 1 << 20, 1)
        assert e.value.code == Err.ILLEGAL_ADDRESS
        with pytest.raises(CudaError) as e:
            lc.launch("poke", 1, 1, p + 2, 0, 1)
        assert e.value.code == Err.MISALIGNED_ADDRESS
        lc.launch("poke", 1, 1, p, rnd, 40 + rnd)
        assert lc.get(p, np.int32, 32)[rnd] == 40 + rnd
        with pytest.raises(CudaError) as e:  # a bad configuration is checked at every launch, never cached
            lc.launch("poke", 1, 2048, p, 0, 1)
        assert e.value.code == Err.INVALID_CONFIGURATION
        with pytest.raises(CudaError) as e:
            lc.launch_raw("poke", (1, 1, 1), (1, 1, 1), 0, b"\0" * 4, lc.mem, lc.symbols, lc.out.append)
        assert e.value.code == Err.INVALID_VALUE


def test_globals_are_device_memory_not_launch_state(lc):
    out = lc.empty(4)
    lc.mem.fill(lc.symbols["counter"], 0, 4)
    for i in range(4):
        lc.launch("bump", 2, 64, out)
        assert lc.get(out, np.int32, 1)[0] == 128 * i
    with pytest.raises(CudaError) as e:  # a missing symbol is checked at every launch
        lc.launch_raw("bump", (2, 1, 1), (64, 1, 1), 0, lc.pack("bump", out), lc.mem, {}, lc.out.append)
    assert e.value.code == Err.INVALID_VALUE


def test_memory_closes_after_launches(lc):
    """Nothing of a launch (views of the arena) outlives it: DeviceMemory.close() unmaps the arena."""
    from gpushim.backends.emulator.memory import DeviceMemory

    mem = DeviceMemory(1 << 20)
    out = mem.alloc(4 * 64)
    for grid in ((2, 1, 1), (1, 1, 1)):
        lc.launch_raw("ids", grid, (32, 1, 1), 0, lc.pack("ids", out, 3), mem, lc.symbols, lc.out.append)
    assert np.array_equal(np.frombuffer(bytes(mem.read(out, 4 * 32)), np.int32), _ids_ref((1, 1, 1), (32, 1, 1), 3))
    mem.close()


def test_many_configurations_evict_and_stay_correct(lc):
    """More configurations than the caches hold: evicted ones are worked out again, results stay right."""
    out = lc.empty(4 * 80 * 64)
    for rnd in range(2):
        for g in range(1, 81, 2):
            block = (32 + (g % 3) * 16, 1, 1)
            lc.launch_raw("ids", (g, 1, 1), block, 0, lc.pack("ids", out, g + rnd), lc.mem, lc.symbols, lc.out.append)
            n = g * block[0]
            assert np.array_equal(lc.get(out, np.int32, n), _ids_ref((g, 1, 1), block, g + rnd)), (g, block)
    assert len(lc.mod._plans) <= 64 and len(lc.mod._geometries) <= 33


def test_allocations_made_or_freed_between_launches_are_seen(lc):
    """The JIT keeps its allocation table while the memory's allocations are unchanged (DeviceMemory.version):
    a buffer freed after a launch faults at the next launch, one allocated after it is accessible."""
    keep = lc.empty(4 * 64)
    out = lc.empty(4 * 64)
    for _ in range(2):
        lc.launch("sharedFresh", 1, 64, out, 1)
    assert lc.get(out, np.int32, 64).tolist() == list(range(100, 164))
    lc.mem.free(out)
    with pytest.raises(CudaError) as e:
        lc.launch("sharedFresh", 1, 64, out, 1)
    assert e.value.code == Err.ILLEGAL_ADDRESS
    lc.launch("sharedFresh", 1, 64, keep, 1)
    fresh = lc.empty(4 * 64)
    lc.launch("sharedFresh", 1, 64, fresh, 1)
    assert lc.get(fresh, np.int32, 64).tolist() == list(range(100, 164))
