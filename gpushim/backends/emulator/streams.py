"""CUDA's ordering rules for the emulator: streams, events, host functions and the legacy default stream.

Work runs as soon as everything it must follow has finished, which on the CPU is almost always at once.
What can hold a stream back is a host function the client has not finished yet, or an event wait on such
a stream; the queued work then runs when the blocker clears (`pump`). The legacy default stream waits for
all blocking streams of its device and they wait for it (CUDA's implicit synchronisation); streams
created with cudaStreamNonBlocking take no part in that. Each device has its own legacy stream.

A fence (cudaMemcpyPeer) is an item on a legacy stream that waits for every stream of the devices it names,
non-blocking ones included, and that all later work on those devices waits for.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence

from gpushim.backends.base import Event, Stream
from gpushim.cuda_errors import CudaError, Err

_log = logging.getLogger(__name__)

NON_BLOCKING = 0x1
EVENT_DISABLE_TIMING = 0x2


def _always() -> bool:
    return True


class EmuStream(Stream):
    def __init__(self, device: int, flags: int, priority: int, legacy: bool = False) -> None:
        self.device = device
        self.flags = flags
        self.priority = priority
        self.legacy = legacy
        self.queue: deque[_Item] = deque()
        self.submitted = 0  # items ever queued
        self.completed = 0  # items finished, in order
        self.destroyed = False

    @property
    def blocking(self) -> bool:
        return not self.legacy and not (self.flags & NON_BLOCKING)


class EmuEvent(Event):
    def __init__(self, device: int, flags: int) -> None:
        self.device = device
        self.flags = flags
        self.recorded = 0  # generation of the latest record
        self.completed = 0  # generation that has completed
        self.time_ns: int | None = None


class _Item:
    """One queued operation: runs when its dependencies (stream, count) have completed."""

    def __init__(self, run: Callable[[], bool], deps: list[tuple[EmuStream, int]]) -> None:
        self.run = run  # returns False while it must stay at the head (a host function in flight)
        self.deps = deps
        self.started = False

    def ready(self) -> bool:
        return all(s.completed >= n for s, n in self.deps)


class Scheduler:
    """All streams of one session."""

    def __init__(self) -> None:
        self.streams: list[EmuStream] = []
        self.legacy: dict[int, EmuStream] = {}
        self.errors: list[tuple[int, str]] = []
        self.fences: dict[int, tuple[EmuStream, int]] = {}  # device -> (stream, count) later work waits for
        self.value_waits = 0  # queued cuStreamWaitValue items: work that runs at once must re-check them
        # streams whose work runs at once whatever is queued: a conditional graph node's bodies, run from
        # within the stream's current item (graph_conditional)
        self.inline: set[EmuStream] = set()

    def legacy_stream(self, dev: int) -> EmuStream:
        s = self.legacy.get(dev)
        if s is None:
            s = self.legacy[dev] = EmuStream(dev, 0, 0, legacy=True)
            self.streams.append(s)
        return s

    def create(self, dev: int, flags: int, priority: int) -> EmuStream:
        s = EmuStream(dev, flags, priority)
        self.streams.append(s)
        return s

    def destroy(self, s: EmuStream) -> None:
        # CUDA: pending work still completes; the handle is gone at once.
        s.destroyed = True
        self._gc()

    def _gc(self) -> None:
        self.streams = [s for s in self.streams if not (s.destroyed and not s.queue)]

    # -- submitting ----------------------------------------------------------------------------------------
    def _implicit_deps(self, s: EmuStream) -> list[tuple[EmuStream, int]]:
        deps: list[tuple[EmuStream, int]] = []
        fence = self.fences.get(s.device)
        if fence is not None:
            if fence[0].completed >= fence[1]:
                del self.fences[s.device]
            elif fence[0] is not s:
                deps.append(fence)
        if s.legacy:
            deps += [(o, o.submitted) for o in self.streams
                     if o is not s and o.device == s.device and o.blocking and o.completed < o.submitted]
        elif s.blocking:
            leg = self.legacy.get(s.device)
            if leg is not None and leg.completed < leg.submitted:
                deps.append((leg, leg.submitted))
        return deps

    def sync_point(self, s: EmuStream) -> Callable[[], bool]:
        """True once everything a synchronisation of s issued now waits for has completed: the work queued
        on s so far, and for a legacy stream what a command issued to it now would wait for (the blocking
        streams of its device; never the non-blocking ones)."""
        if s.completed >= s.submitted and (not s.legacy or self._deps_idle(s)):
            return _always  # the common case of a query, decided without building the list
        deps = [(s, s.submitted)] + (self._implicit_deps(s) if s.legacy else [])
        deps = [(o, n) for o, n in deps if o.completed < n]
        if not deps:
            return _always
        return lambda: all(o.completed >= n for o, n in deps)

    def work_done(self, s: EmuStream, fn: Callable[[], None]) -> Callable[[], bool]:
        """Queues fn like work() and returns a predicate that is true once it has run."""
        self.work(s, fn)
        n = s.submitted
        return lambda: s.completed >= n

    def fence(self, s: EmuStream, devices: list[int], fn: Callable[[], None]) -> None:
        """Queues fn on s after all pending work of every stream of `devices`; later work on those devices
        waits for it (cudaMemcpyPeer's serialisation)."""
        deps = [(o, o.submitted) for o in self.streams
                if o is not s and o.device in devices and o.completed < o.submitted]

        def run() -> bool:
            self._run_reporting(fn)
            return True

        self.submit(s, run, deps)
        for d in devices:
            self.fences[d] = (s, s.submitted)

    def _run_reporting(self, fn: Callable[[], None]) -> None:
        """Runs stream work; a CudaError it raises becomes the session's asynchronous error. Anything else is a
        gpushim bug: logged with its traceback and reported as error 999, instead of escaping from whichever
        unrelated call happened to pump the queue."""
        try:
            fn()
        except CudaError as e:
            self.errors.append((e.code, e.message))
        except Exception as e:  # noqa: BLE001 - see the docstring
            _log.error("internal error in stream work", exc_info=e)
            self.errors.append((Err.UNKNOWN, f"internal server error in stream work: {type(e).__name__}: {e}"))

    def submit(self, s: EmuStream, run: Callable[[], bool], extra_deps: Sequence[tuple[EmuStream, int]] = ()) -> None:
        item = _Item(run, self._implicit_deps(s) + list(extra_deps))
        s.queue.append(item)
        s.submitted += 1
        self.pump()

    def runs_now(self, s: EmuStream) -> bool:
        """Whether work submitted to s now would run at once (nothing queued before it): no implicit dependency
        of _implicit_deps is pending. Written out, without building the list: every posted call asks this."""
        if s in self.inline:
            return True
        return not s.queue and self._deps_idle(s)

    def _deps_idle(self, s: EmuStream) -> bool:
        """No dependency _implicit_deps(s) would return is pending."""
        fence = self.fences.get(s.device)
        if fence is not None and fence[0] is not s and fence[0].completed < fence[1]:
            return False
        if s.legacy:
            dev = s.device
            for o in self.streams:
                if o.completed < o.submitted and o is not s and o.device == dev and o.blocking:
                    return False
        elif s.blocking:
            leg = self.legacy.get(s.device)
            if leg is not None and leg.completed < leg.submitted:
                return False
        return True

    def work(self, s: EmuStream, fn: Callable[[], None]) -> None:
        """Queues fn; a CudaError it raises becomes the session's asynchronous error."""
        if self.runs_now(s):  # the common case on the CPU: run at once, without queueing
            s.submitted += 1
            try:
                self._run_reporting(fn)
            finally:
                s.completed += 1
            if self.value_waits:  # the work may have written a value another stream waits for
                self.pump()
            return

        def run() -> bool:
            self._run_reporting(fn)
            return True

        self.submit(s, run)

    def sync_work(self, s: EmuStream, fn: Callable[[], object]) -> object:
        """Runs fn in stream order right now; the caller must have checked that the stream is idle."""
        if s.queue or self._implicit_deps(s):
            raise CudaError(Err.ILLEGAL_STATE, "internal: synchronous work on a busy stream")
        return fn()

    # -- events --------------------------------------------------------------------------------------------
    def record(self, e: EmuEvent, s: EmuStream) -> None:
        e.recorded += 1
        gen = e.recorded

        def run() -> bool:
            e.time_ns = time.perf_counter_ns()
            e.completed = max(e.completed, gen)
            return True

        self.submit(s, run)

    def wait_event(self, s: EmuStream, e: EmuEvent) -> None:
        gen = e.recorded
        if e.completed >= gen:
            return  # nothing to wait for: the event has completed (or was never recorded)
        # The wait stays at the head of s (returning False) until the record has run, wherever it is queued.
        self.submit(s, lambda: e.completed >= gen)

    def submit_wait(self, s: EmuStream, ready: Callable[[], bool]) -> None:
        """Holds s until ready() (a memory value condition) is true, re-checked whenever work completes."""
        state = {"done": False}

        def run() -> bool:
            if ready():
                if not state["done"]:
                    state["done"] = True
                    self.value_waits -= 1
                return True
            return False

        self.value_waits += 1
        self.submit(s, run)

    # -- host functions ------------------------------------------------------------------------------------
    def host_func(self, s: EmuStream, notify: Callable[[], None]) -> Callable[[], None]:
        state = {"notified": False, "done": False}

        def run() -> bool:
            if not state["notified"]:
                state["notified"] = True
                notify()
            return state["done"]

        def done() -> None:
            state["done"] = True
            self.pump()

        self.submit(s, run)
        return done

    # -- progress ------------------------------------------------------------------------------------------
    def pump(self) -> None:
        """Runs every queued item whose turn has come, until nothing more can run."""
        progress = True
        while progress:
            progress = False
            for s in list(self.streams):
                while s.queue and s.queue[0].ready():
                    if not s.queue[0].run():
                        break  # waiting for a client callback
                    s.queue.popleft()
                    s.completed += 1
                    progress = True
        self._gc()

    def idle(self, s: EmuStream) -> bool:
        return not s.queue

    def device_idle(self, dev: int) -> bool:
        return all(not s.queue for s in self.streams if s.device == dev)

    def event_idle(self, e: EmuEvent) -> bool:
        return e.completed >= e.recorded
