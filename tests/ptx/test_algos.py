"""Classic GPU algorithms against numpy: bitonic sort, ballot-based stable split, a 2-D stencil with halos."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def algos(dev_for):
    return dev_for("algos")


def test_bitonic_sort(algos, rng):
    L, batches = 1024, 6
    k = rng.integers(0, 2**32, L * batches, dtype=np.uint64).astype(np.uint32)
    v = np.arange(L * batches, dtype=np.uint32)
    pk, pv = algos.array(k), algos.array(v)
    algos.launch("bitonicSort", batches, 256, pk, pv, L, 1, shared=8 * L)
    gk = algos.get(pk, np.uint32, L * batches).reshape(batches, L)
    gv = algos.get(pv, np.uint32, L * batches).reshape(batches, L)
    kb = k.reshape(batches, L)
    assert np.array_equal(gk, np.sort(kb, axis=1))
    assert np.array_equal(k[gv], gk)  # values moved with their keys


def test_stable_split_by_bit(algos, rng):
    n, bs = 1000, 256
    x = rng.integers(0, 2**16, n, dtype=np.uint32)
    nb = (n + bs - 1) // bs
    po = algos.empty(4 * nb * bs)
    algos.launch("splitByBit", nb, bs, algos.array(x), po, 3, n)
    got = algos.get(po, np.uint32, nb * bs).reshape(nb, bs)
    xp = np.full(nb * bs, 0xFFFFFFFF, np.uint32)
    xp[:n] = x
    for b in range(nb):
        blk = xp[b * bs : (b + 1) * bs]
        bit = (blk >> 3) & 1
        assert np.array_equal(got[b], np.concatenate([blk[bit == 0], blk[bit == 1]]))


def test_stencil_with_halo(algos, rng):
    w, h = 50, 37
    a = rng.random((h, w), dtype=np.float32)
    po = algos.empty(4 * w * h)
    algos.launch("stencil2d", ((w + 15) // 16, (h + 15) // 16), (16, 16), algos.array(a), po, w, h)
    got = algos.get(po, np.float32, w * h).reshape(h, w)
    p = np.pad(a, 1, mode="edge")
    ref = np.float32(0.5) * a + np.float32(0.125) * (((p[1:-1, :-2] + p[1:-1, 2:]) + p[:-2, 1:-1]) + p[2:, 1:-1])
    assert np.allclose(got, ref, rtol=1e-6, atol=1e-6)
