"""Peer access and IPC through the driver face (tests/programs/drv_peer_ipc.c): cuCtxEnablePeerAccess /
cuCtxDisablePeerAccess and cuIpc*, which CuPy's static runtime calls for cudaDeviceEnablePeerAccess and
cudaIpc* (tests/e2e/test_cupy_api.py runs those through CuPy), with their documented error codes for bad
input, after which the session goes on working."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Server, emulator_only


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory, built: Path) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("peer_ipc"), "--emulate-devices", "2")
    yield s
    s.stop()


@emulator_only
def test_driver_peer_access_and_ipc(two: Server) -> None:
    p = two.run("drv_peer_ipc", timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "peer ipc ok" in p.stdout
    assert "junk handle: CUDA_ERROR_INVALID_VALUE" in p.stdout
    assert "not supported by gpushim" not in p.stderr
