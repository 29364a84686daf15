"""The per-device scheduler shared by all sessions of a server (docs/scheduling.md).

Sessions are separate worker processes forked by the supervisor, so the scheduler's state is a table in an
anonymous shared mapping the supervisor creates before forking any worker; every worker inherits it. A
session holds a device's token while one of its kernels executes; when the token is released, the next
holder is the waiting session chosen by the policy:

- ``priority``: the highest priority class first, then the least virtual time (device time / weight);
- ``fair``: the least virtual time, priorities ignored;
- ``off``: no arbitration (sessions' kernels run concurrently, as the OS schedules their workers).

With ``max_share`` a session that used ``t`` ns of a device may not take it again for ``t * (1 - s) / s``
ns, so its share of the device's time stays at most ``s`` even when nobody else wants the device.

Robustness: the table's mutex is a futex-based lock whose holder's pid is in the table; a process that
waits a second for it and finds that pid gone takes it over. A token held by a process that died is
reclaimed by the next waiter (waiters wake at least every 50 ms) and by the supervisor when it reaps the
worker. Wake-ups are one semaphore per slot, so a dead process can never leave another blocked forever.
The hot path (a free device nobody waits for) is one lock, a few memoryview element accesses and an unlock.
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

POLICIES = ("priority", "fair", "off")
RECENT_NS = 100_000_000  # cuda backend: a submission this recent counts as a session being active
LOW_INFLIGHT = 1  # cuda backend: kernels a session may have in flight while a higher-priority one is busy
CREDIT_NS = 100_000_000  # device time an idle session may be behind the others when it comes back
POLL_S = 0.05  # a waiter re-checks the table at least this often (dead holders, share caps)


@dataclass
class SchedConfig:
    policy: str = "priority"
    weights: dict[int, float] = field(default_factory=dict)  # priority -> weight (default 1)
    max_share: float | None = None  # 0 < s <= 1: the most of a device's time one session may have

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"--sched must be one of {', '.join(POLICIES)}, not {self.policy!r}")
        if self.max_share is not None and not 0 < self.max_share <= 1:
            raise ValueError(f"--max-share must be in (0, 1], not {self.max_share}")
        for p, w in self.weights.items():
            if not w > 0:
                raise ValueError(f"the weight of priority {p} must be positive, not {w}")

    def weight(self, priority: int) -> float:
        return float(self.weights.get(priority, 1.0))


def parse_weights(items: tuple[str, ...] | list[str]) -> dict[int, float]:
    """`PRIORITY=WEIGHT` items (e.g. `1=4`) as a mapping; ValueError with the offending item."""
    out: dict[int, float] = {}
    for item in items:
        prio, sep, weight = item.partition("=")
        try:
            if not sep:
                raise ValueError
            out[int(prio)] = float(weight)
        except ValueError:
            raise ValueError(f"--weight takes PRIORITY=WEIGHT (e.g. 1=4), not {item!r}") from None
    return out


class DeviceArbiter:
    """The shared table and the operations on it. Create it in the supervisor before forking workers."""

    def __init__(self, ndevices: int, nslots: int, config: SchedConfig) -> None:
        self.config = config
        self.ndev, self.nslots = ndevices, nslots
        S, D = nslots, ndevices
        # (name, dtype, shape) of every array in the shared mapping
        layout: list[tuple[str, Any, tuple[int, ...]]] = [
            ("holder", np.int64, (D,)),  # slot holding the device's token, -1: none
            ("holder_since", np.int64, (D,)),  # monotonic ns when it took it
            ("vclock", np.float64, (D,)),  # the device's virtual clock (vtime of the last session granted)
            ("total", np.float64, (D,)),  # ns of device time used by all sessions
            ("work_ns", np.float64, (D,)),  # ns of kernels that reported their work ...
            ("work_units", np.float64, (D,)),  # ... and that work (emulator: thread-instructions)
            ("nwait", np.int64, (D,)),  # sessions waiting for the device (0: a free device is taken at once)
            ("lock_owner", np.int64, (1,)),  # pid holding the table's mutex, 0: none
            ("session", np.int64, (S,)),  # session id using the slot, 0: free
            ("pid", np.int64, (S,)),  # its worker's pid
            ("prio", np.int64, (S,)),
            ("weight", np.float64, (S,)),
            ("granted", np.int64, (S,)),  # device this slot was just given, -1: none
            ("waiting", np.int64, (S, D)),  # monotonic ns since it waits for the device, 0: not waiting
            ("queued", np.int64, (S, D)),  # work items the session has queued on the device (its report)
            ("usage", np.float64, (S, D)),  # ns of device time used
            ("vtime", np.float64, (S, D)),  # work (or ns) / weight, caught up with vclock when it starts waiting
            ("eligible", np.float64, (S, D)),  # monotonic ns before which it may not take the device (cap)
            ("kernels", np.int64, (S, D)),
            ("memory", np.int64, (S, D)),  # device bytes the session holds (its report)
            ("submitted", np.int64, (S, D)),  # monotonic ns of its last submission (cuda backend)
            ("waits", np.int64, (S, D)),  # kernels that had to wait for the device (it was held or contended)
            ("wait_ns", np.int64, (S, D)),  # ... and their time from waiting to being granted it, in all
            ("passed_over", np.int64, (S, D)),  # grants to another session while this one waited, eligible
            ("ahead_of", np.int64, (S, D)),  # ... and, summed over its grants, the eligible waiters it went before
        ]
        size = sum(int(np.dtype(t).itemsize * np.prod(shape)) for _, t, shape in layout)
        self._map = mmap.mmap(-1, max(size, 1))  # anonymous and MAP_SHARED: inherited by forked workers
        off = 0
        self._mv: dict[str, memoryview] = {}  # the same arrays as memoryviews: fast element access (hot path)
        self._flat: dict[str, memoryview] = {}  # ... and one-dimensional ones (a lane's precomputed indices)
        for name, t, shape in layout:
            n = int(np.prod(shape))
            nbytes = n * np.dtype(t).itemsize
            setattr(self, name, np.frombuffer(self._map, dtype=t, count=n, offset=off).reshape(shape))
            flat = memoryview(self._map)[off : off + nbytes].cast(np.dtype(t).char)
            self._flat[name] = flat
            self._mv[name] = flat.cast("B").cast(np.dtype(t).char, list(shape))
            off += nbytes
        self._lanes: dict[tuple[int, int], _Lane] = {}
        self.holder[:] = -1
        self.granted[:] = -1
        ctx = multiprocessing.get_context("fork")
        self._mutex = ctx.Lock()  # futex-based; a holder that died is detected through lock_owner
        self._me = os.getpid()  # this process (bind() sets it in a worker)
        self._wake = [ctx.Semaphore(0) for _ in range(S)]

    # -- the supervisor's side -------------------------------------------------------------------------
    def open_slot(self, session: int, pid: int, priority: int) -> int:
        """A free slot for a new session (pid: filled in by the worker), or -1 when the table is full."""
        with self._locked():
            free = np.flatnonzero(self.session == 0)
            if not len(free):
                return -1
            s = int(free[0])
            self.session[s], self.pid[s], self.prio[s] = session, pid, priority
            self.weight[s] = self.config.weight(priority)
            self.granted[s] = -1
            for arr in (self.waiting, self.queued, self.kernels, self.memory, self.submitted, self.waits,
                        self.wait_ns, self.passed_over, self.ahead_of):
                arr[s] = 0
            for arr in (self.usage, self.vtime, self.eligible):
                arr[s] = 0.0
            return s

    def close_slot(self, slot: int) -> None:
        """The session ended (its worker was reaped): its token, if it held one, goes to the next waiter."""
        if not 0 <= slot < self.nslots:
            return
        with self._locked():
            self.session[slot] = 0
            for d in range(self.ndev):
                if self.waiting[slot, d]:
                    self.waiting[slot, d] = 0
                    self.nwait[d] -= 1
            self.granted[slot] = -1
            for d in range(self.ndev):
                if self.holder[d] == slot:
                    self.holder[d] = -1
                    self._dispatch(d, time.monotonic_ns())

    # -- the worker's side -----------------------------------------------------------------------------
    def bind(self, slot: int) -> None:
        """Called in the worker: the slot is this process's."""
        self._me = os.getpid()
        self.pid[slot] = self._me

    def lane(self, slot: int, dev: int) -> _Lane:
        """The fast path of `slot`'s kernels on `dev` (made once per process and pair)."""
        ln = self._lanes.get((slot, dev))
        if ln is None:
            if not (0 <= slot < self.nslots and 0 <= dev < self.ndev):
                raise IndexError(f"no slot {slot} / device {dev} in the scheduler's table")
            ln = self._lanes[(slot, dev)] = _Lane(self, slot, dev)
        return ln

    def acquire(self, slot: int, dev: int, queued: int = 1) -> None:
        """Blocks until `slot` holds device `dev`'s token."""
        if self.config.policy == "off" or slot < 0:
            return
        self.lane(slot, dev).acquire(queued)

    def _acquire_slow(self, slot: int, dev: int, now: int) -> bool:
        """acquire() when the device is not free for the taking (lock held): the slot waits; True when it was
        granted the device at once."""
        m = self._mv
        m["waiting"][slot, dev] = now
        m["nwait"][dev] += 1
        # A session that was idle does not bank credit: it starts at most CREDIT_NS behind the device's
        # virtual clock. The slack keeps the credit of a session that was away only for its round trip
        # (reply, client, next launch), which would otherwise lose its turn each time it is a little late.
        credit = CREDIT_NS / self._ns_per_unit(dev)
        m["vtime"][slot, dev] = max(m["vtime"][slot, dev], m["vclock"][dev] - credit)
        if m["holder"][dev] < 0:
            self._dispatch(dev, now, me=slot)
        return m["granted"][slot] == dev

    def _wait(self, slot: int, dev: int) -> None:
        """Sleeps until the slot is granted the device (it is registered as waiting)."""
        m = self._mv
        while True:
            wait = POLL_S
            el = (m["eligible"][slot, dev] - time.monotonic_ns()) / 1e9
            if el > 0:
                wait = min(wait, max(el, 0.0005))
            self._wake[slot].acquire(timeout=wait)
            with self._locked():
                if m["granted"][slot] == dev:
                    return
                self._reclaim(dev)
                if m["holder"][dev] < 0:
                    self._dispatch(dev, time.monotonic_ns(), me=slot)
                if m["granted"][slot] == dev:
                    return

    def release(self, slot: int, dev: int, elapsed_ns: int, memory: int | None = None, work: float = 0) -> None:
        """Gives the device back after a kernel of elapsed_ns. `work` (the emulator: its thread-instructions)
        is what fair share charges when given (virtual time then counts work units): on a CPU the wall time
        of equal kernels varies with the host's load, and an unlucky session should not fall behind."""
        if slot < 0:
            return
        self.lane(slot, dev).release(elapsed_ns, memory, work)

    def hold(self, slot: int, dev: int, queued: int = 1, memory: Callable[[], int] | None = None) -> _Hold:
        """A context manager holding the device's token around a kernel and charging its duration to the
        session; the caller may set the kernel's work in the dict it gets (see release)."""
        return _Hold(self.lane(slot, dev) if slot >= 0 else None, queued, memory)

    def kernel_counter(self, slot: int) -> Callable[..., None]:
        """A function of (dev, n=1) counting n kernels of `slot` that ran without the token (the emulator's
        empty kernels: no work, nothing touched). Without the lock: only the slot's own worker writes its row's
        counters."""
        if not 0 <= slot < self.nslots:
            return lambda dev, n=1: None
        kernels, ndev = self._mv["kernels"], self.ndev

        def count(dev: int, n: int = 1) -> None:
            if 0 <= dev < ndev:
                kernels[slot, dev] += n

        return count

    def note_memory(self, slot: int, dev: int, nbytes: int) -> None:
        if 0 <= slot < self.nslots and 0 <= dev < self.ndev:
            self.memory[slot, dev] = nbytes

    def note_inflight(self, slot: int, dev: int, inflight: int) -> None:
        """cuda backend: the session has `inflight` kernels submitted and not yet complete on dev."""
        self.queued[slot, dev] = inflight
        self.submitted[slot, dev] = time.monotonic_ns()
        self.kernels[slot, dev] += 1

    def outranked(self, slot: int, dev: int, recent_ns: int = RECENT_NS) -> bool:
        """cuda backend: whether a session of higher priority has work in flight on dev (it submitted within
        recent_ns and last reported work in flight). Read without the lock: a hint for gating submissions."""
        if self.config.policy != "priority":
            return False
        now = time.monotonic_ns()
        others = (self.session != 0) & (self.prio > self.prio[slot])
        busy = (self.queued[:, dev] > 0) & (now - self.submitted[:, dev] < recent_ns)
        others[slot] = False
        return bool((others & busy).any())

    # -- status and placement --------------------------------------------------------------------------
    def snapshot(self) -> list[dict[str, Any]]:
        """Per device: who holds it, and each session's priority, share of device time and queued work.
        Read without the lock: a status view, not a decision."""
        now = time.monotonic_ns()
        out = []
        for d in range(self.ndev):
            total = float(self.total[d])
            sessions = []
            for s in np.flatnonzero(self.session != 0):
                if not (self.usage[s, d] or self.waiting[s, d] or self.holder[d] == s or self.memory[s, d]
                        or self.kernels[s, d] or self.queued[s, d]):
                    continue
                sessions.append({
                    "session": int(self.session[s]), "priority": int(self.prio[s]),
                    "weight": float(self.weight[s]),
                    "device_s": round(float(self.usage[s, d]) / 1e9, 6),
                    "share": round(float(self.usage[s, d]) / total, 4) if total else 0.0,
                    "kernels": int(self.kernels[s, d]),
                    "running": bool(self.holder[d] == s),
                    "waiting_s": round((now - int(self.waiting[s, d])) / 1e9, 6) if self.waiting[s, d] else 0.0,
                    "queued": int(self.queued[s, d]),
                    "memory": int(self.memory[s, d]),
                    "waits": int(self.waits[s, d]),
                    "wait_s": round(int(self.wait_ns[s, d]) / 1e9, 6),
                    "passed_over": int(self.passed_over[s, d]),
                    "ahead_of": int(self.ahead_of[s, d]),
                })
            out.append({"device": d, "policy": self.config.policy, "max_share": self.config.max_share,
                        "busy": bool(self.holder[d] >= 0), "device_s": round(total / 1e9, 6),
                        "waiting": int((self.waiting[:, d] != 0).sum()), "sessions": sessions})
        return out

    def load(self, dev: int) -> dict[str, Any]:
        """What placement sees of a device: sessions using it, waiting, device memory held by sessions."""
        active = self.session != 0
        return {"sessions": int((active & ((self.usage[:, dev] > 0) | (self.memory[:, dev] > 0))).sum()),
                "waiting": int((active & (self.waiting[:, dev] != 0)).sum()),
                "busy": bool(self.holder[dev] >= 0),
                "memory_used": int(self.memory[active, dev].sum())}

    # -- internals -------------------------------------------------------------------------------------
    def _lock(self) -> None:
        """The table's mutex (always paired with _unlock in a finally). Held for microseconds; should its
        holder die inside (SIGKILL), the next process to wait a second for it finds the owner gone and takes
        it over."""
        owner = self._mv["lock_owner"]
        while not self._mutex.acquire(timeout=1.0):
            pid = owner[0]
            if pid and not _alive(pid):
                break  # its holder died inside: take it over (it stays acquired, now by us)
        owner[0] = self._me

    def _unlock(self) -> None:
        self._mv["lock_owner"][0] = 0
        self._mutex.release()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self._lock()
        try:
            yield
        finally:
            self._unlock()

    def _ns_per_unit(self, dev: int) -> float:
        """Virtual time's unit in ns: the device's average per work unit, 1 before any kernel reported work."""
        m = self._mv
        units = m["work_units"][dev]
        return m["work_ns"][dev] / units if units else 1.0

    def _reclaim(self, dev: int) -> None:
        """A token held by a process that no longer exists goes back to the device."""
        m = self._mv
        h = m["holder"][dev]
        if h >= 0 and not _alive(m["pid"][h]):
            m["holder"][dev] = -1
            m["granted"][h] = -1

    def _grant(self, s: int, dev: int, now: int) -> None:
        m = self._mv
        m["holder"][dev] = s
        m["holder_since"][dev] = now
        m["granted"][s] = dev
        m["vclock"][dev] = max(m["vclock"][dev], m["vtime"][s, dev])

    def _dispatch(self, dev: int, now: int, me: int = -1) -> None:
        """Gives the free device to the best eligible waiter (lock held)."""
        m = self._mv
        waiting, session, eligible, vtime, prio = m["waiting"], m["session"], m["eligible"], m["vtime"], m["prio"]
        by_prio = self.config.policy == "priority"
        best, best_key = -1, None
        candidates = []
        for s in range(self.nslots):
            since = waiting[s, dev]
            if not since or not session[s] or eligible[s, dev] > now:
                continue
            candidates.append(s)
            key = (-prio[s] if by_prio else 0, vtime[s, dev], since)
            if best_key is None or key < best_key:
                best, best_key = s, key
        if best < 0:
            return
        for s in candidates:
            if s != best:
                m["passed_over"][s, dev] += 1
        m["waits"][best, dev] += 1
        m["ahead_of"][best, dev] += len(candidates) - 1
        m["wait_ns"][best, dev] += max(0, now - waiting[best, dev])
        waiting[best, dev] = 0
        m["nwait"][dev] -= 1
        self._grant(best, dev, now)
        if best != me:
            self._wake[best].release()


class _Lane:
    """One slot's use of one device: what acquire and release do on the common path (a free device nobody
    waits for; a release nobody waits on), with the table's cells as one-dimensional memoryviews and their
    indices worked out once. A kernel pays one lock, the cells it must change, and an unlock on each side;
    anything else (waiting, waking, reclaiming) goes to the DeviceArbiter's general code under the same lock."""

    __slots__ = ("arb", "slot", "dev", "sd", "mutex", "owner", "off", "share", "holder", "holder_since",
                 "vclock", "total", "work_ns", "work_units", "nwait", "granted", "weight", "queued", "usage",
                 "vtime", "eligible", "kernels", "memory")

    def __init__(self, arb: DeviceArbiter, slot: int, dev: int) -> None:
        self.arb, self.slot, self.dev, self.sd = arb, slot, dev, slot * arb.ndev + dev
        self.mutex, self.owner = arb._mutex, arb._flat["lock_owner"]
        self.off = arb.config.policy == "off"
        self.share = arb.config.max_share if arb.config.max_share is not None and arb.config.max_share < 1 else None
        f = arb._flat
        for name in ("holder", "holder_since", "vclock", "total", "work_ns", "work_units", "nwait", "granted",
                     "weight", "queued", "usage", "vtime", "eligible", "kernels", "memory"):
            setattr(self, name, f[name])

    def acquire(self, queued: int) -> None:
        if self.off:
            return
        sd, d = self.sd, self.dev
        if self.mutex.acquire(False):  # _lock(), written out
            self.owner[0] = self.arb._me
        else:
            self.arb._lock()
        try:
            now = time.monotonic_ns()
            self.queued[sd] = queued
            if self.holder[d] < 0 and self.nwait[d] == 0 and self.eligible[sd] <= now:
                # the fast path: a free device nobody else waits for (DeviceArbiter._grant, written out)
                self.holder[d] = self.slot
                self.holder_since[d] = now
                self.granted[self.slot] = d
                vt = self.vtime[sd]
                if vt > self.vclock[d]:
                    self.vclock[d] = vt
                return
            if self.arb._acquire_slow(self.slot, d, now):
                return
        finally:
            self.owner[0] = 0
            self.mutex.release()
        self.arb._wait(self.slot, d)

    def release(self, elapsed_ns: int, memory: int | None, work: float) -> None:
        sd, d, s = self.sd, self.dev, self.slot
        if self.mutex.acquire(False):  # _lock(), written out
            self.owner[0] = self.arb._me
        else:
            self.arb._lock()
        try:
            self.usage[sd] += elapsed_ns
            self.total[d] += elapsed_ns
            self.kernels[sd] += 1
            self.queued[sd] = 0
            if memory is not None:
                self.memory[sd] = memory
            if self.off:
                return
            if work > 0:  # virtual time counts work units where kernels report them, else ns
                self.work_ns[d] += elapsed_ns
                self.work_units[d] += work
                cost = float(work)
            else:
                units = self.work_units[d]
                cost = elapsed_ns / (self.work_ns[d] / units if units else 1.0)
            self.vtime[sd] += cost / max(self.weight[s], 1e-9)
            share = self.share
            if share is not None:
                self.eligible[sd] = time.monotonic_ns() + elapsed_ns * (1 - share) / share
            if self.holder[d] == s:
                self.holder[d] = -1
            self.granted[s] = -1
            if self.nwait[d]:
                self.arb._dispatch(d, time.monotonic_ns())
        finally:
            self.owner[0] = 0
            self.mutex.release()


class _Hold:
    """DeviceArbiter.hold (a class, not @contextmanager: it runs around every kernel)."""

    __slots__ = ("lane", "queued", "memory", "t0", "charge")

    def __init__(self, lane: _Lane | None, queued: int, memory: Callable[[], int] | None) -> None:
        self.lane, self.queued, self.memory = lane, queued, memory
        self.charge: dict[str, float] = {}
        self.t0 = 0

    def __enter__(self) -> dict[str, float]:
        if self.lane is not None:
            self.lane.acquire(self.queued)
        self.t0 = time.monotonic_ns()
        return self.charge

    def __exit__(self, *exc: object) -> None:
        elapsed = time.monotonic_ns() - self.t0
        memory = self.memory() if self.memory else None
        if self.lane is not None:
            self.lane.release(elapsed, memory, self.charge.get("work", 0))


class InflightGate:
    """The cuda backend's part in scheduling (docs/scheduling.md): the GPU runs work itself, so the scheduler
    gates submissions instead of holding a token. Each launch records a completion marker (an event); while a
    session of higher priority has work in flight on the device, a session may keep only LOW_INFLIGHT of its
    own kernels in flight there and waits for the oldest before submitting more, so the higher-priority
    work is not queued behind a deep backlog. Device time is not measured on this backend (fair share and
    --max-share are not applied). The marker operations are passed in, so the logic is testable without a GPU.
    """

    def __init__(self, arbiter: DeviceArbiter, slot: int, record: Callable[[int, Any], Any],
                 done: Callable[[Any], bool], wait: Callable[[Any], None], drop: Callable[[Any], None]) -> None:
        self.arbiter, self.slot = arbiter, slot
        self.record, self.done, self.wait, self.drop = record, done, wait, drop
        self.inflight: dict[int, list[Any]] = {}

    def _reap(self, dev: int) -> list[Any]:
        q = self.inflight.setdefault(dev, [])
        while q and self.done(q[0]):
            self.drop(q.pop(0))
        return q

    def before(self, dev: int) -> None:
        q = self._reap(dev)
        if self.arbiter.outranked(self.slot, dev):
            while len(q) >= LOW_INFLIGHT:
                marker = q.pop(0)
                self.wait(marker)
                self.drop(marker)

    def after(self, dev: int, stream: Any) -> None:
        q = self._reap(dev)
        q.append(self.record(dev, stream))
        self.arbiter.note_inflight(self.slot, dev, len(q))

    def close(self) -> None:
        for q in self.inflight.values():
            for marker in q:
                self.drop(marker)
        self.inflight.clear()


def _alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not yet bound: the worker is starting
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
