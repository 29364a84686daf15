"""Special registers, bar.red, generic addressing across spaces, 64-bit atomics, spin locks, unsupported PTX,
other compiler flags."""

import numpy as np
import pytest
from harness import Dev, compile_ptx

from gpushim.ptx import PtxUnsupported, load_module


@pytest.fixture(scope="module")
def more(dev_for):
    return dev_for("more")


def test_special_registers(more):
    grid, block = (2, 3, 2), (8, 4, 2)
    nt, nb = 64, 12
    po = more.empty(4 * 16 * nt * nb)
    more.launch("specials", grid, block, po)
    o = more.get(po, np.uint32, 16 * nt * nb).reshape(nb, nt, 16)
    for b in range(nb):
        bx, by, bz = b % 2, (b // 2) % 3, b // 6
        for t in range(nt):
            tx, ty, tz = t % 8, (t // 8) % 4, t // 32
            lane = t % 32
            exp = [tx, ty, tz, bx, by, bz, 80402, 20302, lane, t // 32, (1 << lane) - 1,
                   (0xFFFFFFFF << lane) & 0xFFFFFFFF, 1, 1, 1, 32]  # fmt: skip
            assert o[b, t].tolist() == exp, (b, t)


def test_bar_red_and_syncwarp(more, rng):
    n = 256
    v = rng.integers(-6, 10, n, dtype=np.int32)
    v[128:192] = 5
    po = more.empty(12 * n)
    more.launch("barReduce", 4, 64, more.array(v), po)
    o = more.get(po, np.int32, 3 * n).reshape(4, 64, 3)
    for b in range(4):
        vv = v[64 * b : 64 * b + 64]
        assert (o[b, :, 0] == (vv > 0).sum()).all()
        assert (o[b, :, 1] == int((vv > -5).all())).all()
        assert (o[b, :, 2] == int((vv > 8).any())).all()


def test_generic_pointers_mixing_spaces(more, rng):
    nb, bs = 3, 96
    g = rng.random(nb * bs, dtype=np.float32)
    pg, po, pc, ps = more.array(g), more.empty(4 * nb * bs), more.array(np.zeros(1, np.uint32)), more.empty(4 * nb)
    more.launch("genericPtrs", nb, bs, pg, po, pc, ps)
    out = more.get(po, np.float32, nb * bs)
    g2 = more.get(pg, np.float32, nb * bs)
    t = np.tile(np.arange(bs), nb)
    loc = ((t & 3) + 1).astype(np.float32)
    init = np.where(t % 3 == 0, 100.0 + t, np.where(t % 3 == 1, g, loc)).astype(np.float32)
    locv = np.where(t % 3 == 2, loc + np.float32(0.5), loc)
    assert np.allclose(out, init + (init + np.float32(0.5)) + locv * 1000, rtol=1e-6)
    assert np.array_equal(g2, np.where(t % 3 == 1, g + np.float32(0.5), g))
    assert more.get(pc, np.uint32, 1)[0] == nb * bs // 2
    assert (more.get(ps, np.uint32, nb) == bs // 2).all()


def test_atomics_64bit(more, rng):
    n = 128
    v = rng.integers(-(2**62), 2**62, n, dtype=np.int64)
    v[5] = 3  # thread 3 stores into a[1] when a[1] == 3
    a0 = np.array([2**64 - 5, 3], np.uint64)
    m0 = np.array([-(2**63), 2**63 - 1], np.int64)
    pa, pm, pold = more.array(a0), more.array(m0), more.empty(32 * n)
    more.launch("atomics64", 1, n, pa, pm, more.array(v), pold)
    old = more.get(pold, np.uint64, 4 * n).reshape(n, 4)
    s0, s1 = int(a0[0]), int(a0[1])
    mx, mn = int(m0[0]), int(m0[1])
    for t in range(n):
        x = int(v[t])
        assert old[t].tolist() == [s0, mx & (2**64 - 1), mn & (2**64 - 1), s1]
        s0 = (s0 + x) & (2**64 - 1)
        mx, mn = max(mx, x), min(mn, x)
        s1 = (x & (2**64 - 1)) if s1 == t else s1
    assert more.get(pa, np.uint64, 2).tolist() == [s0, s1]
    assert more.get(pm, np.int64, 2).tolist() == [mx, mn]


def test_spin_lock_makes_progress(more, rng):
    n = 512
    v = rng.integers(0, 100, n, dtype=np.int32)
    lock, total = more.array(np.zeros(1, np.int32)), more.array(np.zeros(1, np.int32))
    more.launch("spinLock", 2, 256, lock, total, more.array(v))
    assert more.get(total, np.int32, 1)[0] == v[::32].sum()


@pytest.mark.parametrize(
    "case,what",
    [(1, "formatted surface"), (4, "wmma")],
)
def test_unsupported_ptx_rejected_at_load(case, what):
    ptx = compile_ptx("unsupported", "sm_75", (f"-DCASE={case}",))
    with pytest.raises(PtxUnsupported) as e:
        load_module(ptx)
    msg = str(e.value)
    assert what in msg and "in kernel" in msg and "line" in msg, msg


@pytest.mark.parametrize("flags", [("-G",), ("-lineinfo",), ("-use_fast_math",), ("-arch=sm_90",)])
def test_other_compiler_flags(flags, rng):
    arch = "sm_90" if "-arch=sm_90" in flags else "sm_75"
    extra = tuple(f for f in flags if not f.startswith("-arch"))
    d = Dev(compile_ptx("basic", arch, extra))
    n = 3000
    x = rng.random(n, dtype=np.float32)
    nb = (n + 511) // 512
    pout = d.empty(4 * nb)
    d.launch("reduceSum", nb, 256, d.array(x), pout, n)
    assert np.allclose(d.get(pout, np.float32, nb).sum(), x.sum(), rtol=1e-5)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    pc = d.empty(4 * n)
    d.launch("vectorAdd", (n + 255) // 256, 256, d.array(a), d.array(b), pc, n)
    assert np.array_equal(d.get(pc, np.float32, n), a + b)


def test_last_block_reduction_across_batches(more, rng):
    """Blocks communicate through global memory and atomicInc (threadFenceReduction's pattern); the grid spans
    several batches, so the last block to retire runs in a later batch than most others."""
    n = 300_000
    x = rng.random(n, dtype=np.float32)
    blocks, threads = 300, 256
    pp, pt = more.empty(4 * blocks), more.empty(4)
    for _ in range(2):  # the kernel resets its ticket counter for the next launch
        more.launch("lastBlockSum", blocks, threads, more.array(x), pp, pt, n, shared=4 * threads // 32)
        part = more.get(pp, np.float32, blocks)
        assert more.get(pt, np.float32, 1)[0] == np.float32(sum(float(v) for v in part)) or np.isclose(
            more.get(pt, np.float32, 1)[0], part.sum(dtype=np.float64), rtol=1e-6
        )
        assert np.isclose(part.sum(dtype=np.float64), x.sum(dtype=np.float64), rtol=1e-5)
    assert more.get(more.symbols["g_retired"], np.uint32, 1)[0] == 0


def test_named_barriers_producer_consumer(more, rng):
    blocks, rounds = 3, 5
    x = rng.integers(-1000, 1000, blocks * rounds * 64, dtype=np.int32)
    po = more.empty(x.nbytes)
    more.launch("producerConsumer", blocks, 128, more.array(x), po, rounds)
    got = more.get(po, np.int32, x.size).reshape(-1, 64)
    ref = x.reshape(-1, 64)[:, np.arange(64) ^ 1] * 2 + 1
    assert np.array_equal(got, ref)


def test_non_strict_load_keeps_other_kernels(rng, engine):
    ptx = compile_ptx("unsupported", "sm_75", ("-DCASE=1",)) + "\n"
    mod = load_module(ptx, strict=False)
    mod.engine = engine
    assert "texKernel" in mod.unsupported and "sust.p" in mod.unsupported["texKernel"]
    assert mod.kernels["texKernel"].param_bytes == 16
    from gpushim.backends.emulator.memory import DeviceMemory
    from gpushim.cuda_errors import CudaError, Err

    mem = DeviceMemory(1 << 20)
    with pytest.raises(CudaError) as e:
        mod.launch("texKernel", (1, 1, 1), (1, 1, 1), 0, bytes(16), mem, {}, print)
    assert e.value.code == Err.NOT_SUPPORTED


def test_function_pointers(more, rng):
    n = 300
    x = rng.integers(-1000, 1000, n, dtype=np.int32)
    po = more.empty(4 * n)
    more.launch("funcPointers", 3, 100, more.array(x), po)
    fns = [lambda v: 2 * v, lambda v: v * v, lambda v: -v]
    ref = [fns[i % 3](int(v)) + (2 * (int(v) + 1) if v & 1 else -(int(v) + 1)) for i, v in enumerate(x)]
    assert more.get(po, np.int32, n).tolist() == ref


def test_device_malloc_free(more):
    po = more.empty(4 * 64)
    before = len(more.mem.allocations())
    more.launch("deviceHeap", 2, 32, po, 10)
    assert more.get(po, np.int32, 64).tolist() == [45 * i for i in range(64)]
    assert len(more.mem.allocations()) == before  # everything freed
    more.launch("deviceHeap", 1, 4, po, 3 << 20)  # 12 MiB each: over the 8 MiB heap, malloc returns NULL
    assert more.get(po, np.int32, 4).tolist() == [-1, -1, -1, -1]


def test_cp_async(dev_for, rng):
    d = dev_for("async80", "sm_80")
    blocks = 3
    x = rng.integers(-1000, 1000, (blocks * 64, 4), dtype=np.int32)
    po = d.empty(8 * blocks * 64)
    d.launch("cpAsync", blocks, 64, d.array(x), po)
    o = d.get(po, np.int32, 2 * blocks * 64).reshape(blocks, 64, 2)
    w = np.array([1, 2, 3, 4])
    xb = x.reshape(blocks, 64, 4)
    assert np.array_equal(o[:, :, 0], (xb[:, ::-1, :] * w).sum(-1))
    t = np.arange(64)
    keep = np.arange(16)[None, :] < (t % 17)[:, None]  # src-size bytes are copied, the rest zero-filled
    part = np.where(keep[None], xb.view(np.uint8).reshape(blocks, 64, 16), 0).astype(np.uint8)
    assert np.array_equal(o[:, :, 1], (part.view(np.int32).reshape(blocks, 64, 4) * w).sum(-1))


def test_cooperative_group_tiles_and_coalesced_groups(more, rng):
    n = 128
    x = rng.integers(0, 100, n, dtype=np.int32)
    po = more.empty(16 * n)
    more.launch("cgTiles", 2, 64, more.array(x), po)
    o = more.get(po, np.int32, 4 * n).reshape(n, 4)
    t = np.arange(n)
    tile = t // 8
    assert np.array_equal(o[:, 0], np.bincount(tile, weights=x).astype(np.int64)[tile])
    assert np.array_equal(o[:, 1], np.where(t % 8 == 0, x, x[np.maximum(t - 1, 0)]))
    for w in range(n // 32):
        lanes = np.arange(32 * w, 32 * w + 32)
        odd = lanes[x[lanes] & 1 == 1]
        for rank, ln in enumerate(odd):
            assert o[ln, 2] == len(odd) * 1000 + rank
        assert (o[lanes[x[lanes] & 1 == 0], 2] == 0).all()
    assert np.array_equal(o[:, 3], (t % 64) // 8)


def test_exited_threads_take_no_part(more, rng):
    n = 256
    x = rng.integers(2, 100, n, dtype=np.int32)
    x[5] = 1
    po = more.array(np.full(4 * n, -7, np.int32))
    pc = more.array(np.zeros(1, np.int32))
    more.out.clear()
    more.launch("earlyExit", 4, 64, more.array(x), po, pc)
    o = more.get(po, np.int32, 4 * n).reshape(n, 4)
    live = x % 3 != 0
    assert (o[~live] == -7).all()
    assert np.array_equal(o[live, 0], 2 * x[live])
    assert more.get(pc, np.int32, 1)[0] == live.sum()
    for i in np.flatnonzero(live):
        w = i // 32
        lanes = np.arange(32 * w, 32 * w + 32)
        ballot = sum(1 << (ln % 32) for ln in lanes if live[ln] and x[ln] & 1)
        blk = np.arange(64 * (i // 64), 64 * (i // 64) + 64)
        assert int(o[i, 1]) & 0xFFFFFFFF == ballot
        assert o[i, 2] == (live[blk] & (x[blk] > 50)).sum()
        assert o[i, 3] == sum(range(x[i] & 7))
    assert more.text() == "v1 at 5\n"


def _walk(t, n):
    return 0 if n <= 0 else int(t[n]) + _walk(t, int(t[n]) % n) + _walk(t, n // 2)


def test_bounded_recursion(rng):
    from gpushim.cuda_errors import CudaError, Err

    d = Dev(compile_ptx("unsupported", "sm_75", ("-DCASE=2",)))  # walk(): a recursive device function
    t = (np.arange(64) // 3 + 64 * rng.integers(0, 5, 64)).astype(np.int32)  # t[n] % n == n // 3: shallow
    po = d.empty(4 * 64)
    d.launch("recursive", 1, 64, d.array(t), po)
    assert d.get(po, np.int32, 64).tolist() == [_walk(t, n) for n in range(64)]
    deep = (np.arange(64) - 1 + 64 * np.arange(64)).astype(np.int32)  # t[n] % n == n - 1: depth n
    with pytest.raises(CudaError) as e:
        d.launch("recursive", 1, 64, d.array(deep), po)
    assert e.value.code == Err.HARDWARE_STACK_ERROR


def test_elect_sync(dev_for, rng):
    d = dev_for("elect90", "sm_90")
    n = 96
    x = rng.integers(-3, 3, n, dtype=np.int32)
    po = d.empty(8 * n)
    d.launch("electLeader", 1, n, d.array(x), po)
    o = d.get(po, np.uint32, 2 * n).reshape(n, 2)
    for w in range(n // 32):
        lanes = np.arange(32 * w, 32 * w + 32)
        act = lanes[x[lanes] > 0]
        if act.size == 0:
            continue
        lead = act[0] % 32
        for ln in lanes:
            if x[ln] > 0:
                assert o[ln].tolist() == [lead, int(ln % 32 == lead)]
            else:
                assert o[ln].tolist() == [0xFFFFFFFF, 0]
