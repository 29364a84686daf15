"""The one accounting point of device memory: a session's quota, and the host-RAM ledger that all
sessions' workers (forked processes) share, including the share of a worker that was killed."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
from ledger_peer import LedgerPeer, state

from gpushim.backends.accounting import HostLedger, MemoryAccount, default_memory_cap, mem_available
from gpushim.backends.emulator.backend import EmulatorBackend
from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx import heap

MIB = 1 << 20


def test_quota_counts_every_kind_of_allocation() -> None:
    be = EmulatorBackend(memory_cap=1 << 30)
    s = be.open_session(lambda b: None, quota=8 * MIB)
    try:
        s.malloc(0, 2 * MIB)
        s.malloc_pitch(0, 1024, 2048)  # 2 MiB
        s.malloc_managed(0, 2 * MIB)
        got = heap.malloc(s.memories[0], np.array([MIB, MIB, MIB], np.uint64))
        assert (got != 0).tolist() == [True, True, False]  # the device heap's malloc returns NULL past the quota
        assert s.account.used == 8 * MIB
        with pytest.raises(CudaError) as e:
            s.malloc(0, 1)
        assert e.value.code == Err.MEMORY_ALLOCATION
        assert s.mem_info(0)[0] == 0
        heap.free(s.memories[0], got)
        assert s.mem_info(0)[0] == 2 * MIB
    finally:
        s.close()
    assert s.account.used == 0


def test_device_heap_limit_beyond_the_quota_is_refused() -> None:
    s = EmulatorBackend(memory_cap=1 << 30).open_session(lambda b: None, quota=16 * MIB)
    try:
        with pytest.raises(CudaError) as e:
            s.set_limit(0, 2, 64 * MIB)  # cudaLimitMallocHeapSize
        assert e.value.code == Err.MEMORY_ALLOCATION
        s.set_limit(0, 2, 8 * MIB)
    finally:
        s.close()


def test_devices_never_present_more_than_the_cap() -> None:
    be = EmulatorBackend("h100", count=2, memory_cap=256 * MIB)
    assert [d.props["totalGlobalMem"] for d in be.devices()] == [256 * MIB, 256 * MIB]
    s = be.open_session(lambda b: None)
    try:
        s.malloc(0, 200 * MIB)
        with pytest.raises(CudaError) as e:  # the cap is for all devices and sessions together
            s.malloc(1, 100 * MIB)
        assert e.value.code == Err.MEMORY_ALLOCATION
        assert s.mem_info(1) == (56 * MIB, 256 * MIB)
    finally:
        s.close()


def test_cap_zero_means_no_cap() -> None:
    be = EmulatorBackend("t4", memory_cap=0)
    assert be.ledger is None and be.devices()[0].props["totalGlobalMem"] == be.model.total_mem


def test_default_cap_leaves_a_margin() -> None:
    avail = mem_available()
    cap = default_memory_cap()
    assert avail is not None and cap is not None
    assert cap <= avail - 512 * MIB or cap == 64 * MIB


@pytest.mark.parametrize("reap_first", [True, False])
def test_a_killed_workers_share_is_reclaimed(reap_first: bool) -> None:
    ledger = HostLedger(100 * MIB)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a worker that holds 60 MiB and is then killed
        try:
            MemoryAccount(None, ledger).charge(60 * MIB)
            os.write(w, b"x")
            time.sleep(60)
        finally:
            os._exit(0)
    try:
        assert os.read(r, 1) == b"x"
        mine = MemoryAccount(None, ledger)
        with pytest.raises(CudaError):
            mine.charge(60 * MIB)
        os.kill(pid, signal.SIGKILL)
        if reap_first:
            os.waitpid(pid, 0)
        else:  # a zombie the supervisor has not reaped yet holds nothing either
            while state(pid) != "Z":
                time.sleep(0.01)
        mine.charge(60 * MIB)
        assert ledger.used() == 60 * MIB
        mine.close()
        assert ledger.used() == 0
    finally:
        os.close(r)
        os.close(w)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


@pytest.mark.parametrize("pidfds", [True, False])
def test_the_unlocked_total_follows_other_processes(pidfds: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """HostLedger.used() (cudaMemGetInfo) keeps a per-process watch of the ledger's slots and sums them without
    the lock: a process that joins, allocates, frees or is killed after the watch was built is still seen at
    once. Without pidfds (too many open files, an old kernel) the slots are checked through /proc instead."""
    if not pidfds:
        def no_pidfd(pid: int, flags: int = 0) -> int:
            raise OSError(24, "Too many open files")

        monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    ledger = HostLedger(100 * MIB)
    mine = MemoryAccount(None, ledger)
    mine.charge(MIB)
    assert ledger.used() == MIB  # the watch is built: this process alone
    other = LedgerPeer(ledger, 10 * MIB)  # another worker: joins now, charges and releases 10 MiB on command
    pid = other.pid
    try:
        assert ledger.used() == MIB
        other.charge()
        assert ledger.used() == 11 * MIB
        assert mine.headroom() == 89 * MIB
        other.charge()
        assert ledger.used() == 21 * MIB
        other.release()
        assert ledger.used() == 11 * MIB
        other.kill()  # killed, not reaped: its 10 MiB are no one's
        assert ledger.used() == MIB
        assert (ledger.pids == pid).sum() == 0  # its slot was reclaimed
        os.waitpid(pid, 0)
        assert ledger.used() == MIB
        mine.close()
        assert ledger.used() == 0
    finally:
        other.close()


def test_a_forked_process_builds_its_own_watch() -> None:
    """The watch's pidfds belong to the process that opened them: a worker forked after its parent read the
    total builds its own (and still sees the parent's share, and its own)."""
    ledger = HostLedger(100 * MIB)
    mine = MemoryAccount(None, ledger)
    mine.charge(3 * MIB)
    assert ledger.used() == 3 * MIB
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            child = MemoryAccount(None, ledger)
            child.charge(5 * MIB)
            code = 0 if ledger.used() == 8 * MIB and ledger._watch._owner == os.getpid() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert ledger.used() == 3 * MIB  # the child's slot went with it
    mine.close()


@pytest.mark.parametrize("sessions", [3, 100])
def test_the_locked_total_counts_the_highest_slot(sessions: int) -> None:
    """charge() sums the slots up to the highest ever handed out (in Python up to 64 slots, through numpy
    beyond): bytes held in the highest slot, by another process, and in a slot freed and handed out again all
    count against the cap, exactly."""
    ledger = HostLedger(100 * MIB)
    accounts = [MemoryAccount(None, ledger) for _ in range(sessions - 1)]
    other = LedgerPeer(ledger, 40 * MIB)  # another process, in the highest slot
    try:
        assert int(ledger.pids[sessions - 1]) == other.pid
        other.charge()
        accounts[0].charge(50 * MIB)
        with pytest.raises(CudaError) as e:
            accounts[1].charge(10 * MIB + 1)  # 50 + 40 + 10 MiB + 1 byte: one byte over the cap
        assert e.value.code == Err.MEMORY_ALLOCATION
        accounts[1].charge(10 * MIB)  # exactly the cap
        lowest = accounts[0]._slot
        accounts[0].close()  # its 50 MiB and its slot (the lowest) are free; a new session takes that slot
        again = MemoryAccount(None, ledger)
        assert again._slot == lowest == 0
        again.charge(50 * MIB)
        with pytest.raises(CudaError):
            again.charge(1)
        other.release()
        again.charge(40 * MIB)
        assert ledger.used() == 100 * MIB
    finally:
        other.close()
