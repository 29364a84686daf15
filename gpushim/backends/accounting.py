"""Device memory accounting: the one point every allocation of a session passes (cudaMalloc, pitched, 3D,
managed, stream-ordered, module variables, the kernels' device heap).

A `MemoryAccount` belongs to one session and enforces its `--memory-quota`. When the memory is host RAM
(the emulator), the account also charges a `HostLedger`: the RAM all sessions' workers hold together,
capped at what the host can back (`--memory-cap`, by default MemAvailable at start less a margin). Workers
are forked processes, so the ledger is a small shared mapping (a memfd created before the fork) with one
slot per worker process, guarded by a POSIX record lock: the kernel drops the lock of a process that dies,
and a slot whose process is gone is reclaimed, so a killed worker never leaks its share.

Reading the total (`cudaMemGetInfo`, twice per call) takes no lock: each worker watches the processes of the
ledger's slots through pidfds (opened once per process it sees; readable once that process has exited, zombie
or not), so an unchanged ledger of live processes costs one `poll` and a sum. A slot whose process has
exited sends the reader through the locked reclaim, as before.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import select
import threading
import weakref

import numpy as np

from gpushim.cuda_errors import CudaError, Err

MIN_MARGIN = 512 << 20  # the host keeps at least this much RAM for itself, the server and its clients
MARGIN_FRACTION = 10  # ... or a tenth of what was available, whichever is larger


def mem_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None where there is no such file)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def default_memory_cap() -> int | None:
    """What the emulator may hold in host RAM when the operator does not say: MemAvailable now, less
    max(10 %, 512 MiB); None when unknown."""
    avail = mem_available()
    if avail is None:
        return None
    return max(64 << 20, avail - max(avail // MARGIN_FRACTION, MIN_MARGIN))


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


class HostLedger:
    """Bytes of host RAM held by each worker process, summed against `cap`. Created in the supervisor before
    it forks workers; each worker takes a slot with `join()`."""

    SLOTS = 1024
    _FIELDS = 3  # pid, start time, bytes

    def __init__(self, cap: int) -> None:
        self.cap = cap
        size = self.SLOTS * self._FIELDS * 8
        self.fd = os.memfd_create("gpushim-memory-ledger", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, size + 8)  # + one word after the table: the high-water mark of the slots
        weakref.finalize(self, os.close, self.fd)
        self._map = mmap.mmap(self.fd, size + 8, flags=mmap.MAP_SHARED)
        # rows: pid, start time, bytes (the bytes row is contiguous: summing it is the hot path)
        words = np.frombuffer(self._map, dtype=np.int64)
        table = words[:-1].reshape(self._FIELDS, self.SLOTS)
        self.pids, self.starts, self.bytes = table[0], table[1], table[2]
        self._ids = table[:2]  # pids and start times: which processes hold slots
        self._bytes_mv = memoryview(self.bytes)
        # 1 + the highest slot ever handed out (raised by join, under the lock): the slots above it have always
        # held 0 bytes, so the locked total (charge) sums only the slots below it, in Python -- join hands out
        # the lowest free slot, so this is the most sessions that were ever open at once, not SLOTS
        self._high = memoryview(words[-1:])
        self._thread_lock = threading.Lock()  # record locks do not exclude threads of one process
        self._watch = _Watch()

    def _lock(self) -> None:
        self._thread_lock.acquire()
        fcntl.lockf(self.fd, fcntl.LOCK_EX)

    def _unlock(self) -> None:
        fcntl.lockf(self.fd, fcntl.LOCK_UN)
        self._thread_lock.release()

    def _reclaim(self) -> None:
        """Frees the slots of processes that are gone (killed workers: they could not release)."""
        for i in np.nonzero(self.pids)[0].tolist():
            if _start_time(int(self.pids[i])) != int(self.starts[i]):
                self._clear(i)

    def _clear(self, i: int) -> None:
        self.bytes[i] = 0
        self.starts[i] = 0
        self.pids[i] = 0

    def join(self) -> int:
        """A slot for this process (the worker calls it once)."""
        pid = os.getpid()
        start = _start_time(pid) or 0
        self._lock()
        try:
            for attempt in range(2):
                free = np.nonzero(self.pids == 0)[0]
                if free.size:
                    i = int(free[0])
                    self.bytes[i] = 0
                    self.starts[i] = start
                    self.pids[i] = pid
                    self._high[0] = max(self._high[0], i + 1)
                    return i
                if attempt == 0:
                    self._reclaim()
            raise CudaError(Err.MEMORY_ALLOCATION, f"the server's memory ledger is full ({self.SLOTS} sessions)")
        finally:
            self._unlock()

    def charge(self, slot: int, n: int) -> None:
        self._lock()
        try:
            total = self._total()
            if total + n > self.cap:
                self._reclaim()
                total = self._total()
            if total + n > self.cap:
                raise CudaError(Err.MEMORY_ALLOCATION,
                                f"out of memory: {n} more bytes would exceed the {self.cap} bytes of host RAM this "
                                f"server may use for emulated device memory (--memory-cap); {total} are in use")
            self.bytes[slot] += n
        finally:
            self._unlock()

    def _total(self) -> int:
        """Bytes of every slot (under the lock): those below the high-water mark, the rest hold none."""
        high = self._high[0]
        if high <= 64:  # a short slice sums faster in Python than through numpy's call overhead
            return sum(self._bytes_mv[:high])
        return int(self.bytes[:high].sum())

    def release(self, slot: int, n: int) -> None:
        # Lock-free: only this process writes its slot, and a reader that sees the old value is conservative.
        with self._thread_lock:
            self.bytes[slot] = max(0, int(self.bytes[slot]) - n)

    def leave(self, slot: int) -> None:
        """Gives the slot back (lock-free: aligned stores, safe even from a thread ending the process)."""
        self._clear(slot)

    def used(self) -> int:
        """Bytes held by live processes. Without the lock unless a slot's process has exited: each slot's bytes
        are one aligned 8-byte word that only its process changes, so the sum counts every allocation that
        completed before the call (and perhaps some in progress), as the locked sum did."""
        if self._watch.gone(self._ids):  # a process exited: reclaim its slot, sum under the lock (as before)
            self._lock()
            try:
                self._reclaim()
                return self._total()
            finally:
                self._unlock()
                self._watch.forget()
        bv = self._bytes_mv  # only the slots held when the watch looked: a free slot holds 0 bytes
        return sum([bv[i] for i in self._watch.held])


class _Watch:
    """This process's view of which ledger slots' processes have exited: a pidfd per process seen in the table
    (checked against its start time once, so a reused pid is not mistaken for it), polled together. Slots whose
    process could not be given a pidfd (too many open files, an old kernel) are checked through /proc."""

    def __init__(self) -> None:
        self._owner = 0  # the process the pidfds belong to (a forked child starts afresh)
        self._seen = b""  # the pid and start-time rows the watch was built from
        self._slots: dict[int, tuple[int, int, int]] = {}  # slot -> (pid, start time, pidfd; -1 none; -2 gone)
        self._fd_slot: dict[int, int] = {}
        self._poll = select.poll()
        self._mutex = threading.Lock()
        self._unwatched: list[tuple[int, int, int]] = []  # the slots without a pidfd
        self.held: list[int] = []  # the slots held by a process when the watch last looked

    def gone(self, ids: np.ndarray) -> bool:
        """Whether a process holding a slot (rows `ids`: pids, start times) may have exited."""
        with self._mutex:  # threads of one worker share the pidfds: one builds or closes them at a time
            return self._gone(ids)

    def _gone(self, ids: np.ndarray) -> bool:
        if self._owner != os.getpid():
            self._forget(inherited=True)
            self._owner = os.getpid()
        seen = ids.tobytes()
        if seen != self._seen:
            self._build(np.frombuffer(seen, np.int64).reshape(2, -1))
            self._seen = seen
        if self._unwatched and any(fd == -2 or _start_time(pid) != start for pid, start, fd in self._unwatched):
            return True
        return bool(self._poll.poll(0))

    def _build(self, ids: np.ndarray) -> None:
        old, self._slots = self._slots, {}
        for i in np.nonzero(ids[0])[0].tolist():
            pid, start = int(ids[0, i]), int(ids[1, i])
            had = old.pop(i, None)
            if had is not None and had[:2] == (pid, start):
                self._slots[i] = had
                continue
            if had is not None:
                self._close(had[2])
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                fd = -2
            except (OSError, AttributeError):
                fd = -1
            if fd >= 0:
                if _start_time(pid) != start:  # exited, or its pid now names another process
                    os.close(fd)
                    fd = -2
                else:
                    self._poll.register(fd, select.POLLIN)
                    self._fd_slot[fd] = i
            self._slots[i] = (pid, start, fd)
        for had in old.values():
            self._close(had[2])
        self._unwatched = [x for x in self._slots.values() if x[2] < 0]
        self.held = list(self._slots)

    def _close(self, fd: int) -> None:
        if fd >= 0:
            self._poll.unregister(fd)
            del self._fd_slot[fd]
            os.close(fd)

    def forget(self) -> None:
        """Drops the watch (it is rebuilt at the next look)."""
        with self._mutex:
            self._forget(False)

    def _forget(self, inherited: bool) -> None:
        """`inherited`: this process forked from the one that opened the pidfds. Their copies are left open (a
        few descriptors, close-on-exec): this process may have reused a number since, closing it could be
        closing something else."""
        if inherited:
            self._poll = select.poll()
        else:
            for _, _, fd in self._slots.values():
                self._close(fd)
        self._slots, self._fd_slot, self._seen, self._unwatched, self.held = {}, {}, b"", [], []


class MemoryAccount:
    """One session's device memory: charged before every allocation, released by every free."""

    def __init__(self, quota: int | None = None, ledger: HostLedger | None = None) -> None:
        self.quota = quota
        self.ledger = ledger
        self.used = 0
        self._slot = ledger.join() if ledger is not None else None

    def charge(self, n: int) -> None:
        """Raises CudaError(cudaErrorMemoryAllocation) when n more bytes exceed the quota or the host cap."""
        if n <= 0:
            return
        if self.quota is not None and self.used + n > self.quota:
            raise CudaError(Err.MEMORY_ALLOCATION,
                            f"session memory quota of {self.quota} bytes exceeded ({self.used} held, {n} requested)")
        if self.ledger is not None and self._slot is not None:
            self.ledger.charge(self._slot, n)
        self.used += n

    def release(self, n: int) -> None:
        if n <= 0:
            return
        self.used = max(0, self.used - n)
        if self.ledger is not None and self._slot is not None:
            self.ledger.release(self._slot, n)

    def headroom(self) -> int | None:
        """How many more bytes this session could allocate; None when nothing limits it here."""
        room = None
        if self.quota is not None:
            room = max(0, self.quota - self.used)
        if self.ledger is not None:
            host = max(0, self.ledger.cap - self.ledger.used())
            room = host if room is None else min(room, host)
        return room

    def close(self) -> None:
        """The session is over: its slot in the host ledger is free again."""
        if self.ledger is not None and self._slot is not None:
            self.ledger.leave(self._slot)
            self._slot = None
