"""The emulator checks a launch's configuration against the device's limits before queueing it: every block
and grid dimension at least 1 and at most the device's maximum, at most maxThreadsPerBlock threads, the shared
memory within sharedMemPerBlockOptin (CUDA Runtime API, cudaLaunchKernel: cudaErrorInvalidConfiguration). The
check runs on every launch, so it is written out; this pins its conditions at and past each limit."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest

from gpushim.backends.emulator.backend import EmulatorBackend
from gpushim.cuda_errors import CudaError, Err
from gpushim.protocol import CALL, OPS_BY_NAME
from gpushim.server.modules import ModuleStore
from gpushim.server.session import Session, SessionInfo

PTX = b""".version 8.0
.target sm_80
.address_size 64
.visible .entry _Z5emptyv()
{
\tret;
}
"""
KEY = hashlib.sha256(PTX).digest()


@pytest.fixture
def session(tmp_path: Path) -> tuple[Session, list]:
    sent: list = []
    s = Session(EmulatorBackend(memory_limit=1 << 28), SessionInfo(1, 1, "launch", 13000, 0, [0]), sent.append,
                logging.getLogger("launch"), ModuleStore(tmp_path / "modules"))
    s.dispatch([CALL, 1, OPS_BY_NAME["MODULE_LOAD"].id, [KEY, PTX]])
    assert sent.pop()[2] == 0
    return s, sent


def launch(s: Session, grid: list[int], block: list[int], shared: int = 0) -> int:
    """The backend's launch, called directly: a bad configuration must raise at once (the launch itself
    reports it, before anything is queued; the PTX engine's own check would only fail later, as stream work)."""
    try:
        s.bs.launch(0, KEY, "_Z5emptyv", grid, block, shared, None, b"")
    except CudaError as e:
        return e.code
    return 0


def test_launch_configuration_limits(session) -> None:
    s, sent = session
    p = s.backend.devices()[0].props
    tx, ty, tz = p["maxThreadsDim"]
    gx, gy, gz = p["maxGridSize"]
    ok = [([1, 1, 1], [1, 1, 1]), ([1, 1, 1], [tx, 1, 1]), ([1, 1, 1], [1, ty, 1]), ([1, 1, 1], [1, 1, tz]),
          ([1, gy, 1], [1, 1, 1]), ([1, 1, gz], [1, 1, 1])]
    bad = [([0, 1, 1], [1, 1, 1]), ([1, 1, 1], [1, 0, 1]), ([1, 1, 1], [tx + 1, 1, 1]),
           ([1, 1, 1], [1, ty + 1, 1]), ([1, 1, 1], [1, 1, tz + 1]),
           ([1, 1, 1], [32, 32, 2]),  # each dimension within its limit, the product above maxThreadsPerBlock
           ([gx + 1, 1, 1], [1, 1, 1]), ([1, gy + 1, 1], [1, 1, 1]), ([1, 1, gz + 1], [1, 1, 1])]
    for grid, block in ok:
        assert launch(s, grid, block) == 0, (grid, block)
    for grid, block in bad:
        assert launch(s, grid, block) == Err.INVALID_CONFIGURATION, (grid, block)
    assert launch(s, [1, 1, 1], [1, 1, 1], p["sharedMemPerBlockOptin"]) == 0
    assert launch(s, [1, 1, 1], [1, 1, 1], p["sharedMemPerBlockOptin"] + 1) == Err.INVALID_CONFIGURATION
    assert s.bs.take_async_error() is None  # every refusal was the launch's own, none became stream work
    # through the session: the launch's answer, and not sticky
    s.dispatch([CALL, 2, OPS_BY_NAME["LAUNCH"].id, [0, KEY, "_Z5emptyv", [1, 1, 1], [1, 1, tz + 1], 0, 0, b""]])
    assert sent.pop()[2] == Err.INVALID_CONFIGURATION
    assert s.sticky is None
