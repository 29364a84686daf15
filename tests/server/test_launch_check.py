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


def test_cached_launch_follows_module_unload(session) -> None:
    """launch() keeps what a configuration's checks found per (module, kernel, device, configuration); an
    unloaded module must not launch from that cache."""
    s, sent = session
    assert launch(s, [2, 1, 1], [32, 1, 1]) == 0
    s.bs.unload_module(KEY)
    assert launch(s, [2, 1, 1], [32, 1, 1]) == Err.INVALID_KERNEL_IMAGE
    s.dispatch([CALL, 3, OPS_BY_NAME["MODULE_QUERY"].id, [KEY]])  # loads it afresh from the server's store
    assert sent.pop()[3] == [1]
    assert launch(s, [2, 1, 1], [32, 1, 1]) == 0
    assert s.bs.take_async_error() is None


STORE_PTX = b""".version 8.0
.target sm_80
.address_size 64
.visible .entry store(.param .u64 p)
{
\t.reg .b64 %rd<2>;
\t.reg .b32 %r<2>;
\tld.param.u64 %rd1, [p];
\tmov.u32 %r1, 7;
\tst.global.u32 [%rd1], %r1;
\tret;
}
"""


def test_empty_kernels_are_counted_without_the_token(session) -> None:
    """An empty kernel (gpushim/ptx/module.py, PtxModule.trivial) does no work: it runs without taking the
    device's token, even while another session holds it, and still counts as the session's kernel; any other
    kernel is gated and charged as before (docs/scheduling.md)."""
    from gpushim.server.scheduler import DeviceArbiter, SchedConfig

    s, sent = session
    arb = DeviceArbiter(1, 4, SchedConfig(policy="fair"))
    slot, other = arb.open_slot(1, 1, 0), arb.open_slot(2, 2, 0)
    s.bs.attach_scheduler(arb, slot)
    arb.acquire(other, 0)  # another session's kernel holds the device
    for _ in range(5):
        s.dispatch([CALL, 4, OPS_BY_NAME["LAUNCH"].id, [0, KEY, "_Z5emptyv", [4, 1, 1], [64, 1, 1], 0, 0, b""]])
        assert sent.pop()[2] == 0
    assert arb.kernels[slot, 0] == 5 and arb.usage[slot, 0] == 0 and arb.holder[0] == other
    # the first launch ran the engine's checks, the next four only counted: the same totals either way
    st = s.bs.stats()
    assert st["launches"] == 5 and st["thread_instructions"] == 5 * 4 * 64, st
    arb.release(other, 0, 1000)
    key = hashlib.sha256(STORE_PTX).digest()
    s.dispatch([CALL, 5, OPS_BY_NAME["MODULE_LOAD"].id, [key, STORE_PTX]])
    assert sent.pop()[2] == 0
    ptr = s.bs.malloc(0, 4)
    s.dispatch([CALL, 6, OPS_BY_NAME["LAUNCH"].id, [0, key, "store", [1, 1, 1], [1, 1, 1], 0, 0,
                                                    ptr.to_bytes(8, "little")]])
    assert sent.pop()[2] == 0
    assert bytes(s.bs.memory_of(ptr).read(ptr, 4)) == (7).to_bytes(4, "little")
    assert arb.kernels[slot, 0] == 6 and arb.usage[slot, 0] > 0 and arb.holder[0] == -1


def test_refused_empty_launch_is_refused_every_time(session) -> None:
    """The engine's own checks (here the parameter size: the kernel takes none, 16 bytes came) fail an empty
    kernel's launch as stream work; the launch cache must not turn a refused configuration into a counted one."""
    s, _ = session
    for _ in range(3):
        s.bs.launch(0, KEY, "_Z5emptyv", [1, 1, 1], [1, 1, 1], 0, None, bytes(16))
        err = s.bs.take_async_error()
        assert err is not None and err[0] == Err.INVALID_VALUE, err
    assert s.bs.stats()["launches"] == 0
    s.bs.launch(0, KEY, "_Z5emptyv", [1, 1, 1], [1, 1, 1], 0, None, b"")
    assert s.bs.take_async_error() is None and s.bs.stats()["launches"] == 1
