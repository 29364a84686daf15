"""Host functions on real streams (cuLaunchHostFunc) whose body runs in the client.

The driver calls a host function on a thread of its own when the stream reaches it. Ours only tells the
worker's main thread (a queue and a byte on a pipe the worker's select loop watches) and returns at once.
The stream is held by a wait on a 32-bit signal in pinned host memory mapped to the device, queued right
behind the host function (cuStreamWaitValue32, GEQ); when the client answers CALLBACK_DONE the worker
writes the value and the stream goes on. Nothing blocks the driver's callback thread: a callback that
blocked would hold the driver's host-function dispatch, and a later cuLaunchHostFunc on the main thread
could then wait for it while the CALLBACK_DONE that ends it sits unread (a deadlock). Where the driver has
no stream memory operations the callback itself waits for the client instead (`blocking`).

Everything that talks to the client or to CUDA stays on the main thread; the driver thread touches
neither (CUDA forbids API calls inside host functions). One C trampoline serves every call for the life
of the process, identified by the `userData` integer: a ctypes callback must never be freed while the
driver may still be running it.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

_FN_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class HostCall:
    def __init__(self, ident: int, hub: HostCallHub, notify: Callable[[], None], stream: Any,
                 run: Callable[[], None] | None = None) -> None:
        self.ident = ident
        self.hub = hub
        self.notify = notify
        self.stream = stream
        self.run = run  # gpushim's own work in stream order (no client involved), run on the driver's thread
        self.released = threading.Event()
        self.blocking = False  # the callback waits for `released` (no stream memory operations)
        self.on_done: Callable[[], None] | None = None  # writes the stream's signal
        self.fired = False
        self.notified = False

    def done(self) -> None:
        """The client ran the function (or the session is going away): let the stream go on."""
        if not self.released.is_set():
            if self.on_done is not None:
                self.on_done()
            self.released.set()
            self.hub.finished(self)


class HostCallHub:
    """The host calls of one session (there is one session per worker process)."""

    def __init__(self) -> None:
        self.calls: dict[int, HostCall] = {}
        self.fired: deque[HostCall] = deque()
        self.failures: deque[str] = deque()  # errors of internal host functions
        self.lock = threading.Lock()
        self.next_id = 1
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)

    def add(self, notify: Callable[[], None], stream: Any) -> HostCall:
        with self.lock:
            ident = self.next_id
            self.next_id += 1
            call = self.calls[ident] = HostCall(ident, self, notify, stream)
        stream.pending_host += 1
        return call

    def add_internal(self, run: Callable[[], None], stream: Any) -> HostCall:
        """A host function of gpushim's own (copying between staging and the client's shared memory when
        the stream gets there): it makes no CUDA call and does not wait for the client."""
        with self.lock:
            ident = self.next_id
            self.next_id += 1
            call = self.calls[ident] = HostCall(ident, self, lambda: None, stream, run)
        return call

    def finished(self, call: HostCall) -> None:
        with self.lock:
            self.calls.pop(call.ident, None)
        if call.run is None:
            call.stream.pending_host = max(0, call.stream.pending_host - 1)

    # -- driver thread -------------------------------------------------------------------------------------
    def on_fire(self, ident: int) -> None:
        with self.lock:
            call = self.calls.get(ident)
        if call is None:
            return
        if call.run is not None:
            try:
                call.run()
            except Exception as e:  # reported with the session's next synchronising call
                self.failures.append(f"{e.__class__.__name__}: {e}")
            finally:
                call.released.set()
                self.finished(call)
            return
        call.fired = True
        self.fired.append(call)
        try:
            os.write(self.wake_w, b"\0")
        except OSError:  # the pipe is full (the main thread wakes anyway) or closed (the session ended)
            pass
        if call.blocking:
            call.released.wait()

    # -- main thread ---------------------------------------------------------------------------------------
    def deliver(self) -> int:
        """Drains the wake pipe and tells the client about every host call its streams reached."""
        try:
            while os.read(self.wake_r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass
        n = 0
        while self.fired:
            call = self.fired.popleft()
            if not call.notified and not call.released.is_set():
                call.notified = True
                call.notify()
                n += 1
        return n

    def pending(self) -> bool:
        return bool(self.calls)

    def release(self, device: int | None = None) -> None:
        """Lets every blocked host call of `device` (all when None) return, without running it."""
        with self.lock:
            calls = [c for c in self.calls.values()
                     if c.run is None and (device is None or c.stream.device == device)]
        for c in calls:
            c.done()

    def close(self) -> None:
        self.release()
        for fd in (self.wake_r, self.wake_w):
            try:
                os.close(fd)
            except OSError:
                pass


_HUB: HostCallHub | None = None


def _trampoline(user_data: int | None) -> None:
    hub = _HUB
    if hub is not None and user_data:
        hub.on_fire(int(user_data))


TRAMPOLINE = _FN_TYPE(_trampoline)  # kept for the life of the process
TRAMPOLINE_ADDRESS: int = ctypes.cast(TRAMPOLINE, ctypes.c_void_p).value or 0


def install_hub() -> HostCallHub:
    """The process's hub (a worker serves one session; a new session replaces it)."""
    global _HUB
    if _HUB is not None:
        _HUB.close()
    _HUB = HostCallHub()
    return _HUB


class Signals:
    """32-bit signal slots in pinned host memory mapped to each device: one per stream that has had a client
    host function. The stream waits until its slot reaches a target; the worker writes it from the host."""

    SLOT_BYTES = 4
    PAGE = 4096
    MEMHOSTALLOC_PORTABLE_DEVICEMAP = 0x1 | 0x2

    def __init__(self, cu: Any, check: Callable[[tuple, str], Any]) -> None:
        self.cu = cu
        self.check = check
        self.free: dict[int, list[tuple[int, int]]] = {}  # device -> [(host address, device address)]
        self.pages: dict[int, list[int]] = {}

    def take(self, dev: int) -> tuple[int, int]:
        """A slot on dev (whose context is current): (host address, device address)."""
        free = self.free.setdefault(dev, [])
        if not free:
            cu = self.cu
            host = int(self.check(cu.cuMemHostAlloc(self.PAGE, self.MEMHOSTALLOC_PORTABLE_DEVICEMAP), "cuMemHostAlloc"))
            ctypes.memset(host, 0, self.PAGE)
            devptr = int(self.check(cu.cuMemHostGetDevicePointer(host, 0), "cuMemHostGetDevicePointer"))
            self.pages.setdefault(dev, []).append(host)
            free.extend((host + i, devptr + i) for i in range(self.PAGE - self.SLOT_BYTES, -1, -self.SLOT_BYTES))
        return free.pop()

    def give_back(self, dev: int, slot: tuple[int, int]) -> None:
        self.free.setdefault(dev, []).append(slot)

    @staticmethod
    def value(slot: tuple[int, int]) -> int:
        return ctypes.c_uint32.from_address(slot[0]).value

    @staticmethod
    def write(slot: tuple[int, int], value: int) -> None:
        cell = ctypes.c_uint32.from_address(slot[0])
        if value > cell.value:
            cell.value = value & 0xFFFFFFFF

    def forget_device(self, dev: int) -> None:
        """After cuDevicePrimaryCtxReset(dev) the pages are gone with the context."""
        self.free.pop(dev, None)
        self.pages.pop(dev, None)
