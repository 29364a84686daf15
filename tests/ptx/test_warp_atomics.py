"""Warp-level primitives and atomics."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def warp(dev_for):
    return dev_for("warp")


@pytest.fixture(scope="module")
def atomics(dev_for):
    return dev_for("atomics")


def _lanes(n):
    t = np.arange(n)
    return t, t % 32, t - t % 32


def test_warp_shuffle_reduction(warp, rng):
    n = 10_000
    x = rng.integers(-1000, 1000, n, dtype=np.int32)
    pi, po = warp.array(x), warp.empty(4)
    warp.launch("warpReduce", (n + 255) // 256, 256, pi, po, n)
    assert warp.get(po, np.int32, 1)[0] == x.sum()


def test_shuffle_modes(warp, rng):
    n = 256
    v = rng.integers(0, 1 << 30, n, dtype=np.int32)
    pi, po = warp.array(v), warp.empty(16 * n)
    warp.launch("shflModes", 2, 128, pi, po)
    got = warp.get(po, np.int32, 4 * n).reshape(n, 4)
    t, lane, base = _lanes(n)
    assert np.array_equal(got[:, 0], v[base + (lane * 7) % 32])
    assert np.array_equal(got[:, 1], np.where(lane >= 3, v[t - 3], v))
    assert np.array_equal(got[:, 2], v[base + (lane ^ 5)])
    seg = lane % 8
    assert np.array_equal(got[:, 3], np.where(seg + 2 < 8, v[np.minimum(t + 2, n - 1)], v))


def test_vote_ballot_activemask(warp, rng):
    n = 192
    x = rng.integers(-3, 10, n, dtype=np.int32)
    x[64:96] = 1  # a warp where every predicate is true
    pi, po = warp.array(x), warp.empty(16 * n)
    warp.launch("voteBallot", 3, 64, pi, po)
    got = warp.get(po, np.uint32, 4 * n).reshape(n, 4)
    for w in range(n // 32):
        p = x[32 * w : 32 * w + 32] > 0
        ballot = sum(1 << i for i in range(32) if p[i])
        act = sum(1 << i for i in range(32) if x[32 * w + i] > 5)
        rows = got[32 * w : 32 * w + 32]
        assert (rows[:, 0] == ballot).all()
        assert (rows[:, 1] == int(p.all())).all()
        assert (rows[:, 2] == int(p.any())).all()
        assert np.array_equal(rows[:, 3], np.where(x[32 * w : 32 * w + 32] > 5, act, 0))


def test_match_and_redux(dev_for, rng):
    d = dev_for("redux80", "sm_80")
    n = 128
    v = rng.integers(0, 4, n, dtype=np.int32)
    v[32:64] = 2  # uniform warp for match.all
    pi, po = d.array(v), d.empty(16 * n)
    d.launch("matchRedux", 1, n, pi, po)
    got = d.get(po, np.uint32, 4 * n).reshape(n, 4)
    for w in range(n // 32):
        vv = v[32 * w : 32 * w + 32]
        rows = got[32 * w : 32 * w + 32]
        for i in range(32):
            assert rows[i, 0] == sum(1 << j for j in range(32) if vv[j] == vv[i])
        same = len(set((vv & 1).tolist())) == 1
        assert (rows[:, 1] == (0xFFFFFFFF if same else 0)).all()
        assert (rows[:, 2] == vv.sum()).all() and (rows[:, 3] == vv.max()).all()


def test_histogram_shared_and_global_atomics(atomics, rng):
    n = 200_000
    data = rng.integers(0, 256, n, dtype=np.uint8)
    pd, ph = atomics.array(data), atomics.empty(4 * 256)
    atomics.launch("histogram", 16, 256, pd, n, ph)
    assert np.array_equal(atomics.get(ph, np.uint32, 256), np.bincount(data, minlength=256))


def test_atomic_ops_return_values(atomics, rng):
    n = 256
    v = rng.integers(-50, 50, n, dtype=np.int32)
    init = np.array([5, 1000, -1000, 7, 0, -1, 0, 0, 3, 3], np.int32)
    pv, pi, po = atomics.array(init), atomics.array(v), atomics.empty(32 * n)
    atomics.launch("atomicOps", 1, 32, pv, pi, po)  # one warp: thread order is the sequential order
    atomics.launch("atomicOps", 1, n, pv, pi, po)
    final = atomics.get(pv, np.int32, 10)
    old = atomics.get(po, np.int32, 8 * n).reshape(n, 8)
    # replay sequentially in thread order (second launch) on top of the first launch
    s = init.astype(np.int64).copy()
    for rep in (range(32), range(n)):
        olds = []
        for i in rep:
            x = int(v[i])
            o = [int(s[0]), int(s[1]), int(s[2]), int(s[3]), int(s[4]), int(s[5]), int(s[6]), int(s[7])]
            s[0] += x
            s[1] = min(s[1], x)
            s[2] = max(s[2], x)
            s[3] = x
            s[4] = x if s[4] == i else s[4]
            s[5] &= x
            s[6] |= x
            s[7] ^= x
            u8 = int(s[8]) & 0xFFFFFFFF
            s[8] = 0 if u8 >= 17 else u8 + 1
            u9 = int(s[9]) & 0xFFFFFFFF
            s[9] = 13 if (u9 == 0 or u9 > 13) else u9 - 1
            olds.append(o)
    assert np.array_equal(final, s.astype(np.int32))
    assert np.array_equal(old, np.array(olds, np.int64).astype(np.int32))


def test_float_atomics_f32_f64(atomics, rng):
    n = 1024
    x = rng.random(n, dtype=np.float32)
    y = rng.random(n)
    pf, pdd = atomics.array(np.zeros(4, np.float32)), atomics.array(np.zeros(3))
    px, py, pof, pod = atomics.array(x), atomics.array(y), atomics.empty(4 * n), atomics.empty(8 * n)
    atomics.launch("atomicF", 4, 256, pf, pdd, px, py, pof, pod)
    f = atomics.get(pf, np.float32, 4)
    d = atomics.get(pdd, np.float64, 3)
    oldf, oldd = atomics.get(pof, np.float32, n), atomics.get(pod, np.float64, n)
    for k in range(4):  # thread order, sequential f32 additions
        acc = np.float32(0)
        for i in range(k, n, 4):
            assert oldf[i] == acc
            acc = np.float32(acc + x[i])
        assert f[k] == acc
    for k in range(3):
        acc = 0.0
        for i in range(k, n, 3):
            assert oldd[i] == acc
            acc += y[i]
        assert d[k] == acc


def test_labeled_groups_member_masks(dev_for, rng):
    """match.any, then redux/vote with each thread's own member mask: groups of one warp reduce separately
    (PTX ISA, redux.sync and vote.sync: the operation is over the threads of membermask)."""
    d = dev_for("partition80", "sm_80")
    n = 128
    label = rng.integers(0, 5, n, dtype=np.int32)
    v = rng.integers(-100, 100, n, dtype=np.int32)
    pl, pv, po = d.array(label), d.array(v), d.empty(20 * n)
    d.launch("labeled", 2, 64, pl, pv, po)
    got = d.get(po, np.uint32, 5 * n).reshape(n, 5)
    for i in range(n):
        base = i - i % 32
        same = [base + k for k in range(32) if label[base + k] == label[i]]
        assert got[i, 0] == sum(1 << (j - base) for j in same)
        assert got[i, 1].view(np.int32) == v[same].sum()
        assert got[i, 2].view(np.int32) == v[same].max()
        assert got[i, 3] == sum(1 << (j - base) for j in same if v[j] > 0)
        assert got[i, 4] == int(all(v[j] > 0 for j in same))
