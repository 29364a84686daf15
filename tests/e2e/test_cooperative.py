"""Cooperative groups end to end."""

from __future__ import annotations

from .conftest import emulator_only, kv


@emulator_only
def test_cooperative_grid_sync(server):
    """cg::this_grid().sync() in a cudaLaunchCooperativeKernel launch (tests/programs/gridsync.cu)."""
    r = server.run("gridsync")
    assert r.returncode == 0, r.stdout + r.stderr
    v = kv(r.stdout)
    assert v["cooperative_attr"] == "1"
    assert v["grid_sync_errors"] == "0"
