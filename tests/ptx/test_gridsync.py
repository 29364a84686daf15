"""Cooperative groups' grid sync (cg::this_grid().sync()): the grid workspace nvcc reads from %envreg1/%envreg2
is given to every launch of a kernel that reads it, and the whole grid runs in one batch so every block meets
at the barrier; grids larger than the device holds at once fail as cudaErrorCooperativeLaunchTooLarge."""

from __future__ import annotations

import numpy as np
import pytest

from gpushim.cuda_errors import CudaError, Err


def test_grid_sync_rounds(dev_for):
    dev = dev_for("gridsync", "sm_80")
    blocks, threads, rounds = 24, 64, 3
    n = blocks * threads
    a, sums = dev.empty(4 * n), dev.empty(4 * rounds * blocks)
    dev.launch("rounds", blocks, threads, a, sums, rounds)
    got = dev.get(sums, np.int32, rounds * blocks).reshape(rounds, blocks)
    for r in range(rounds):
        assert (got[r] == (r + 1) * n * (n - 1) // 2).all(), r
    assert not [al for al in dev.mem.allocations() if al.kind == "grid_sync"]  # the workspace is freed


def test_grid_sync_too_large(dev_for):
    dev = dev_for("gridsync", "sm_80")
    with pytest.raises(CudaError) as e:
        dev.launch("rounds", 2000, 1024, 0, 0, 0)
    assert e.value.code == Err.COOPERATIVE_LAUNCH_TOO_LARGE
