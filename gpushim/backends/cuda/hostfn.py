"""Host functions on real streams (cuLaunchHostFunc) whose body runs in the client.

The driver calls a host function on a thread of its own when the stream reaches it. Ours only tells the
worker's main thread (a queue and a byte on a pipe the worker's select loop watches) and then blocks that
driver thread until the client has run the function and sent CALLBACK_DONE, so the stream does not pass
it early. Everything that talks to the client or to CUDA stays on the main thread; the driver thread
touches neither (CUDA forbids API calls inside host functions).

One C trampoline serves every call for the life of the process, identified by the `userData` integer:
a ctypes callback must never be freed while the driver may still be running it.
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
        self.fired = False
        self.notified = False

    def done(self) -> None:
        """The client ran the function (or the session is going away): let the stream go on."""
        if not self.released.is_set():
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
