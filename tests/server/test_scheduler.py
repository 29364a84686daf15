"""The device scheduler's table and decisions (gpushim/server/scheduler.py), with real forked processes where
the behaviour depends on them (waking a waiter, reclaiming a dead holder's token)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from gpushim.server.scheduler import RECENT_NS, DeviceArbiter, InflightGate, SchedConfig, parse_weights


def _arbiter(policy: str = "priority", slots: int = 4, devices: int = 2, **kw: object) -> DeviceArbiter:
    return DeviceArbiter(devices, slots, SchedConfig(policy, **kw))  # type: ignore[arg-type]


def _wait_in_child(arb: DeviceArbiter, slot: int, dev: int, hold_s: float = 0.0, granted: int = -1) -> int:
    """Forks a process that binds `slot`, acquires `dev`, holds it hold_s and releases it. While it holds the
    device it writes its slot to the pipe `granted`: the pipe lists the holders in the order the arbiter granted
    them, however late this process polls (sampling arb.holder misses a holder the host did not let it see)."""
    pid = os.fork()
    if pid == 0:
        try:
            arb.bind(slot)
            arb.acquire(slot, dev)
            if granted >= 0:
                os.write(granted, bytes([slot]))
            time.sleep(hold_s)
            arb.release(slot, dev, int(hold_s * 1e9))
        finally:
            os._exit(0)
    return pid


def _grants(r: int, n: int) -> list[int]:
    """The first n slots the children wrote to the pipe whose read end is r (blocks until they have)."""
    out = b""
    while len(out) < n:
        chunk = os.read(r, n - len(out))
        assert chunk, "a child ended without being granted the device"
        out += chunk
    return list(out)


def _until(cond, timeout: float = 60.0) -> None:  # noqa: ANN001
    """Waits for an event (a generous limit: a loaded host may be slow to run the forked children)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="--sched"):
        SchedConfig("fifo")
    with pytest.raises(ValueError, match="--max-share"):
        SchedConfig("fair", max_share=1.5)
    with pytest.raises(ValueError, match="positive"):
        SchedConfig("fair", weights={0: 0.0})
    with pytest.raises(ValueError, match="PRIORITY=WEIGHT"):
        parse_weights(["2"])
    with pytest.raises(ValueError, match="PRIORITY=WEIGHT"):
        parse_weights(["a=1"])
    assert parse_weights(["1=4", "-2=0.5"]) == {1: 4.0, -2: 0.5}


def test_slots_are_reused_and_the_table_can_be_full() -> None:
    arb = _arbiter(slots=2)
    a, b = arb.open_slot(1, 0, 0), arb.open_slot(2, 0, 0)
    assert (a, b) == (0, 1)
    assert arb.open_slot(3, 0, 0) == -1
    arb.close_slot(a)
    assert arb.open_slot(4, 0, 0) == a


def test_higher_priority_waiter_goes_first_then_least_device_time() -> None:
    arb = _arbiter("priority", slots=4)
    me = arb.open_slot(1, 0, 0)
    arb.bind(me)
    low_busy, low_idle, high = arb.open_slot(2, 0, 0), arb.open_slot(3, 0, 0), arb.open_slot(4, 0, 1)
    arb.usage[low_busy, 0] = arb.vtime[low_busy, 0] = 5e9  # it has had the device for 5 s already
    arb.acquire(me, 0)  # free: taken at once
    assert arb.holder[0] == me
    r, w = os.pipe()
    pids = [_wait_in_child(arb, s, 0, 0.05, w) for s in (low_busy, low_idle, high)]
    _until(lambda: int((arb.waiting[:, 0] != 0).sum()) == 3)
    arb.release(me, 0, 1000)
    order = _grants(r, 3)
    for pid in pids:
        os.waitpid(pid, 0)
    os.close(r)
    os.close(w)
    assert order == [high, low_idle, low_busy]
    assert arb.holder[0] == -1
    # status counts each session's waits and the grants that went to another while it waited
    rows = {r["session"]: r for r in arb.snapshot()[0]["sessions"]}
    assert {k: (r["waits"], r["passed_over"], r["ahead_of"]) for k, r in rows.items()} == {
        1: (0, 0, 0), 4: (1, 0, 2), 3: (1, 1, 1), 2: (1, 2, 0)}
    assert rows[1]["wait_s"] == 0 and all(rows[k]["wait_s"] > 0 for k in (2, 3, 4))


def test_fair_policy_ignores_priority() -> None:
    arb = _arbiter("fair", slots=3)
    me = arb.open_slot(1, 0, 0)
    arb.bind(me)
    high, low = arb.open_slot(2, 0, 5), arb.open_slot(3, 0, 0)
    arb.vtime[high, 0] = 1e9
    arb.acquire(me, 0)
    r, w = os.pipe()
    pids = [_wait_in_child(arb, s, 0, 0.05, w) for s in (high, low)]
    _until(lambda: int((arb.waiting[:, 0] != 0).sum()) == 2)
    arb.release(me, 0, 1000)
    order = _grants(r, 2)
    for pid in pids:
        os.waitpid(pid, 0)
    os.close(r)
    os.close(w)
    assert order == [low, high]


def test_weights_scale_virtual_time() -> None:
    arb = _arbiter("fair", slots=2, weights={1: 4.0})
    heavy, light = arb.open_slot(1, 0, 1), arb.open_slot(2, 0, 0)
    for s in (heavy, light):
        arb.bind(s)
        arb.acquire(s, 1)
        arb.release(s, 1, 4_000_000)
    assert arb.vtime[heavy, 1] == pytest.approx(1_000_000)
    assert arb.vtime[light, 1] == pytest.approx(4_000_000)
    shares = {s["session"]: s["share"] for s in arb.snapshot()[1]["sessions"]}
    assert shares == {1: 0.5, 2: 0.5}


def test_max_share_keeps_a_lone_session_off_the_device() -> None:
    arb = _arbiter("priority", slots=1, max_share=0.25)
    s = arb.open_slot(1, 0, 0)
    arb.bind(s)
    arb.acquire(s, 0)
    arb.release(s, 0, 30_000_000)  # 30 ms used: it may take the device again after 90 ms
    t0 = time.monotonic()
    arb.acquire(s, 0)
    waited = time.monotonic() - t0
    arb.release(s, 0, 0)
    assert waited >= 0.08


def test_token_of_a_dead_holder_is_reclaimed() -> None:
    arb = _arbiter(slots=2)
    dead, me = arb.open_slot(1, 0, 0), arb.open_slot(2, 0, 0)
    pid = os.fork()
    if pid == 0:
        arb.bind(dead)
        arb.acquire(dead, 0)
        os._exit(0)  # dies holding the device
    os.waitpid(pid, 0)
    assert arb.holder[0] == dead
    arb.bind(me)
    t0 = time.monotonic()
    arb.acquire(me, 0)
    assert arb.holder[0] == me
    assert time.monotonic() - t0 < 2


def test_closing_a_slot_hands_its_token_on() -> None:
    arb = _arbiter(slots=2)
    holder, waiter = arb.open_slot(1, 0, 0), arb.open_slot(2, 0, 0)
    arb.bind(holder)  # this process, which stays alive: only close_slot can free the token
    arb.acquire(holder, 0)
    r, w = os.pipe()
    pid = _wait_in_child(arb, waiter, 0, 0.0, w)
    _until(lambda: arb.waiting[waiter, 0] != 0)
    # The waiter is stopped (outside the table's lock) while the slot closes: its own POLL_S re-check would
    # find the device free too, so only with it stopped does the grant show that close_slot handed it on.
    while True:
        os.kill(pid, signal.SIGSTOP)
        os.waitpid(pid, os.WUNTRACED)
        if arb._mutex.acquire(False):  # not stopped inside the lock (close_slot would wait for it forever)
            arb._mutex.release()
            break
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.001)
    arb.close_slot(holder)
    assert arb.holder[0] == waiter and arb.granted[waiter] == 0
    os.kill(pid, signal.SIGCONT)
    assert _grants(r, 1) == [waiter]
    os.waitpid(pid, 0)
    os.close(r)
    os.close(w)
    assert arb.holder[0] == -1


def test_off_policy_only_accounts() -> None:
    arb = _arbiter("off", slots=2)
    a, b = arb.open_slot(1, 0, 0), arb.open_slot(2, 0, 0)
    arb.acquire(a, 0)
    arb.acquire(b, 0)  # does not block: no arbitration
    arb.release(a, 0, 10)
    arb.release(b, 0, 30)
    assert arb.holder[0] == -1
    assert [(s["share"], s["kernels"]) for s in arb.snapshot()[0]["sessions"]] == [(0.25, 1), (0.75, 1)]


class _Markers:
    """Completion markers for InflightGate: complete when the test says so."""

    def __init__(self) -> None:
        self.next = 0
        self.complete: set[int] = set()
        self.waited: list[int] = []
        self.dropped: list[int] = []

    def record(self, dev: int, stream: object) -> int:
        self.next += 1
        return self.next

    def wait(self, m: int) -> None:
        self.waited.append(m)
        self.complete.add(m)


def _gate(arb: DeviceArbiter, slot: int, marks: _Markers) -> InflightGate:
    return InflightGate(arb, slot, marks.record, lambda m: m in marks.complete, marks.wait, marks.dropped.append)


def test_inflight_gate_drains_a_low_priority_backlog_only_while_outranked() -> None:
    arb = _arbiter("priority", slots=2)
    low, high = arb.open_slot(1, 0, 0), arb.open_slot(2, 0, 1)
    marks = _Markers()
    gate = _gate(arb, low, marks)
    for _ in range(5):  # nobody else busy: the backlog may grow
        gate.before(0)
        gate.after(0, None)
    assert len(gate.inflight[0]) == 5 and not marks.waited
    assert arb.snapshot()[0]["sessions"][0]["queued"] == 5
    arb.note_inflight(high, 0, 2)  # a higher-priority session submits
    gate.before(0)
    assert marks.waited == [1, 2, 3, 4, 5] and gate.inflight[0] == []  # drained to LOW_INFLIGHT - 1
    gate.after(0, None)
    arb.note_inflight(high, 0, 0)  # its work completed
    gate.before(0)
    gate.after(0, None)
    assert len(gate.inflight[0]) == 2 and len(marks.waited) == 5
    marks.complete.add(6)
    gate.before(0)  # completed markers are reaped (and destroyed) at the next submission
    assert 6 in marks.dropped and len(gate.inflight[0]) == 1
    gate.close()
    assert 7 in marks.dropped


def test_inflight_gate_ignores_stale_and_lower_priority_activity() -> None:
    arb = _arbiter("priority", slots=3)
    me, lower, stale = arb.open_slot(1, 0, 1), arb.open_slot(2, 0, 0), arb.open_slot(3, 0, 2)
    arb.note_inflight(lower, 0, 9)
    arb.note_inflight(stale, 0, 3)
    arb.submitted[stale, 0] -= 10 * RECENT_NS  # it has not submitted for a while: not counted as busy
    assert not arb.outranked(me, 0)
    arb.note_inflight(stale, 1, 3)  # another device's work does not count either
    assert not arb.outranked(me, 0) and arb.outranked(me, 1)
    assert not _arbiter("fair").outranked(0, 0)


def test_fair_share_charges_work_not_the_hosts_noise() -> None:
    arb = _arbiter("fair", slots=2)
    a, b = arb.open_slot(1, 0, 0), arb.open_slot(2, 0, 0)
    for s, elapsed in ((a, 10_000_000), (b, 30_000_000)):  # the same kernel, slowed down 3x by the host
        arb.bind(s)
        arb.acquire(s, 0)
        arb.release(s, 0, elapsed, work=1000)
    assert arb.vtime[a, 0] == pytest.approx(arb.vtime[b, 0], rel=0.01)
    # status still shows wall time
    shares = {r["session"]: r["share"] for r in arb.snapshot()[0]["sessions"]}
    assert shares == {1: 0.25, 2: 0.75}


def test_a_mutex_held_by_a_dead_process_is_taken_over() -> None:
    arb = _arbiter(slots=1)
    s = arb.open_slot(1, 0, 0)
    pid = os.fork()
    if pid == 0:
        arb.bind(s)
        arb._lock()  # killed inside the critical section
        os._exit(0)
    os.waitpid(pid, 0)
    t0 = time.monotonic()
    arb.bind(s)
    arb.acquire(s, 0)
    arb.release(s, 0, 1)
    assert time.monotonic() - t0 < 5
    assert arb.lock_owner[0] == 0 and arb.kernels[s, 0] == 1
