"""CUB's block and warp primitives (BlockReduce, BlockScan, BlockRadixSort, WarpReduce): library code full of
inline PTX (predicated shuffles, bmsk, bfe, prmt, ld.nc), checked against numpy."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def cub(dev_for):
    return dev_for("cub")


def test_cub_block_primitives(cub, rng):
    blocks = 3
    x = rng.integers(-(2**20), 2**20, 512 * blocks, dtype=np.int32)
    ps, pscan, psort = cub.empty(4 * blocks), cub.empty(4 * 128 * blocks), cub.empty(4 * 512 * blocks)
    cub.launch("cubBlockOps", blocks, 128, cub.array(x), ps, pscan, psort)
    v = x.reshape(blocks, 128, 4)[:, :, 0]
    assert np.array_equal(cub.get(ps, np.int32, blocks), v.sum(axis=1))
    excl = np.cumsum(v, axis=1) - v
    assert np.array_equal(cub.get(pscan, np.int32, 128 * blocks).reshape(blocks, 128), excl)
    srt = cub.get(psort, np.int32, 512 * blocks).reshape(blocks, 512)
    assert np.array_equal(srt, np.sort(x.reshape(blocks, 512), axis=1))


def test_cub_warp_reduce(cub, rng):
    x = rng.standard_normal(256).astype(np.float32)
    po = cub.empty(4 * 8)
    cub.launch("cubWarpOps", 2, 128, cub.array(x), po)
    assert np.array_equal(cub.get(po, np.float32, 8), x.reshape(8, 32).max(axis=1))
