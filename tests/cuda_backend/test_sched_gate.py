"""The cuda backend's part in scheduling (InflightGate, docs/scheduling.md) through CudaSession.launch, on the
stand-in driver: each launch records a marker event; while a higher-priority session is busy on the device,
a launch first waits for the session's own earlier kernels. Proves the wiring, not GPU behaviour."""

from __future__ import annotations

import hashlib

import pytest

from gpushim.server.scheduler import DeviceArbiter, SchedConfig
from tests.cuda_backend.fake_driver import NOT_READY, FakeDriver
from tests.cuda_backend.test_session_logic import make_session, pytestmark  # noqa: F401


def test_launches_are_gated_while_outranked(fatbin: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    # kernels stay "in flight" on the stand-in until cuEventSynchronize
    from cuda.bindings import driver as real

    monkeypatch.setattr(FakeDriver, "_cuEventQuery", lambda self, e: (real.CUresult(NOT_READY),))
    s, drv, _ = make_session(layouts={"nothing": []})
    key = hashlib.sha256(fatbin).digest()
    s.load_module(key, fatbin)
    arb = DeviceArbiter(2, 2, SchedConfig("priority"))
    low, high = arb.open_slot(1, 0, 0), arb.open_slot(2, 0, 1)
    s.attach_scheduler(arb, low)
    for _ in range(3):
        s.launch(0, key, "nothing", [1, 1, 1], [1, 1, 1], 0, None, b"")
    assert drv.calls.count("cuEventRecord") == 3 and "cuEventSynchronize" not in drv.calls
    assert arb.queued[low, 0] == 3 and arb.kernels[low, 0] == 3
    arb.note_inflight(high, 0, 1)  # a higher-priority session is busy on device 0
    drv.calls.clear()
    s.launch(0, key, "nothing", [1, 1, 1], [1, 1, 1], 0, None, b"")
    # its three earlier kernels were waited for before this one went out
    launch = drv.calls.index("cuLaunchKernel")
    assert drv.calls[:launch].count("cuEventSynchronize") == 3
    assert arb.queued[low, 0] == 1
    s.launch(1, key, "nothing", [1, 1, 1], [1, 1, 1], 0, None, b"")  # device 1: not gated
    assert drv.calls.count("cuEventSynchronize") == 3
    s.close()
    assert drv.calls.count("cuEventDestroy") >= 5


@pytest.mark.parametrize("policy", ["fair", "off"])
def test_no_gating_without_priority_policy(fatbin: bytes, policy: str) -> None:
    s, drv, _ = make_session(layouts={"nothing": []})
    key = hashlib.sha256(fatbin).digest()
    s.load_module(key, fatbin)
    arb = DeviceArbiter(2, 2, SchedConfig(policy))
    low, high = arb.open_slot(1, 0, 0), arb.open_slot(2, 0, 1)
    s.attach_scheduler(arb, low)
    arb.note_inflight(high, 0, 1)
    s.launch(0, key, "nothing", [1, 1, 1], [1, 1, 1], 0, None, b"")
    assert "cuEventSynchronize" not in drv.calls
