"""One client session: the client's handles, its view of the devices, CUDA's error rules, and the
dispatch of every operation in gpushim/protocol.py to the backend.

Synchronising operations whose condition is not met yet (a stream held back by a host function the
client is still running) are answered later, when the condition holds: the worker keeps reading frames
meanwhile, so the client's CALLBACK_DONE can arrive.
"""

from __future__ import annotations

import logging
import mmap
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpushim.backends.base import Backend, Event, Stream
from gpushim.compat.policy import Policy, build_policy
from gpushim.cuda_errors import STICKY, CudaError, Err
from gpushim.protocol import HANDLE_BASE, OPS_BY_ID, POST, REPLY, Op
from gpushim.server.modules import ModuleStore
from gpushim.server.ops_devices import DeviceOps
from gpushim.server.ops_driver import DriverOps
from gpushim.server.ops_graph import GraphOps
from gpushim.server.ops_ipc import IpcOps
from gpushim.server.ops_memory import MemoryOps
from gpushim.server.ops_modules import ModuleOps
from gpushim.server.ops_streams import StreamOps
from gpushim.server.ops_texture import TextureOps
from gpushim.server.ops_vmm import VmmOps
from gpushim.server.validate import check_call
from gpushim.server.wait import Wait

# The runtime API an operation serves, for the policy's per-API verdicts.
OP_API = {
    "DEVICE_PROPS": "cudaGetDeviceProperties", "DEVICE_ATTR": "cudaDeviceGetAttribute", "MALLOC": "cudaMalloc",
    "MALLOC_PITCH": "cudaMallocPitch", "MALLOC_MANAGED": "cudaMallocManaged", "FREE": "cudaFree",
    "FREE_ASYNC": "cudaFreeAsync", "MEMCPY_H2D": "cudaMemcpy",
    "MEMCPY_D2H": "cudaMemcpy",
    "MEMCPY_D2D": "cudaMemcpy", "MEMSET": "cudaMemset", "STREAM_CREATE": "cudaStreamCreateWithPriority",
    "STREAM_WAIT_EVENT": "cudaStreamWaitEvent", "STREAM_HOST_FUNC": "cudaLaunchHostFunc",
    "EVENT_CREATE": "cudaEventCreateWithFlags", "EVENT_RECORD": "cudaEventRecord",
    "EVENT_ELAPSED": "cudaEventElapsedTime", "LAUNCH": "cudaLaunchKernel", "LAUNCH_EX": "cudaLaunchKernelEx",
    "FUNC_INFO": "cudaFuncGetAttributes",
    "FUNC_SET_ATTR": "cudaFuncSetAttribute", "SYMBOL_INFO": "cudaGetSymbolAddress",
}

# Errors whose reason the shim prints for a person to act on (others are ordinary API results).
NOTED = frozenset({Err.NOT_SUPPORTED, Err.UNKNOWN, Err.INSUFFICIENT_DRIVER, Err.UNSUPPORTED_PTX_VERSION,
                   Err.NO_KERNEL_IMAGE_FOR_DEVICE, Err.INVALID_KERNEL_IMAGE, Err.NOT_PERMITTED} | STICKY
                  | {218})  # cudaErrorInvalidPtx: the PTX engine names the kernel and the instruction it lacks




class ProtocolError(Exception):
    """The client broke the protocol; the session ends."""


class ClientGone(Exception):
    """The client's connection is gone (EPIPE, ECONNRESET): the session ends, and that is no server error."""



@dataclass
class SessionInfo:
    session_id: int
    pid: int
    program: str
    runtime: int
    priority: int
    devices: list[int]  # client ordinal -> backend ordinal
    memory_quota: int | None = None
    policy: Policy | None = None  # the adaptation policy for this client and driver (built at the handshake)
    transport: str = "unix"  # unix | tcp: what the client's connection is
    sched_slot: int = -1  # the session's row in the server's scheduler table (gpushim/server/scheduler.py)


class Session(DeviceOps, MemoryOps, StreamOps, ModuleOps, DriverOps, GraphOps, IpcOps, TextureOps, VmmOps):
    """The operations themselves are in the ops_* mixins, one area each."""

    def __init__(self, backend: Backend, info: SessionInfo, send: Callable[[list[Any]], None],
                 log: logging.Logger, store: ModuleStore) -> None:
        self.backend = backend
        self.store = store
        self.info = info
        self.send = send
        self.log = log
        self.out = bytearray()  # kernel printf output, attached to the next reply
        self.policy = info.policy or build_policy(
            info.runtime or backend.driver_version(), backend.driver_version(),
            [(backend.devices()[d].props["major"], backend.devices()[d].props["minor"]) for d in info.devices])
        for line in self.policy.adaptations:
            log.info("adaptation: %s", line)
        self.bs = backend.open_session(self.out.extend, info.memory_quota)
        self.bs.policy = self.policy
        self.streams: dict[int, Stream] = {}
        self.events: dict[int, Event] = {}
        self.callbacks: dict[int, Callable[[], None]] = {}
        self.waiting: list[tuple[int, Wait]] = []
        self._legacy: dict[int, Stream] = {}  # client device -> its legacy stream (_stream: every posted call)
        self.next_handle = HANDLE_BASE
        self.sticky: tuple[int, str] | None = None
        self.deferred: tuple[int, str] | None = None
        self.device_flags: dict[int, int] = {}
        self.limits: dict[int, dict[int, int]] = {}  # device -> cudaLimit -> value
        self.received_fds: list[int] = []  # descriptors that came with frames (SCM_RIGHTS), in order
        self.host_maps: dict[int, mmap.mmap] = {}
        self.uploads = store.allowance()  # modules this session may still upload
        self.calls = 0
        self.fast_calls: Callable[[], int] = lambda: 0  # calls the worker's C loop answered (fastpath.py)
        self.started = time.time()
        # op id -> (op, handler, the error every call of it gets): built once, the policy does not change
        self.routes: dict[int, tuple[Op, Callable[..., Any], CudaError | None]] = {}
        for op in OPS_BY_ID.values():
            handler = getattr(self, f"op_{op.name.lower()}", None)
            refusal = None
            if handler is None:
                refusal = CudaError(Err.NOT_SUPPORTED, f"{op.name} is not implemented by this server")
            elif op.name in OP_API:
                verdict = self.policy.check_api(OP_API[op.name])
                if not verdict.ok:
                    refusal = CudaError(verdict.error, f"{OP_API[op.name]}: {verdict.reason}")
            self.routes[op.id] = (op, handler or (lambda *a: []), refusal)

    # -- dispatch ----------------------------------------------------------------------------------------
    def dispatch(self, msg: Any) -> None:
        problem = check_call(msg)  # types and ranges of every field, from the protocol's schema
        if problem:
            raise ProtocolError(problem)
        kind, seq, op_id, args = msg
        op, handler, refusal = self.routes[op_id]
        self.calls += 1
        err, msg_text, results, noted = 0, "", [], False
        try:
            if refusal is not None:
                raise refusal
            if self.sticky and op.name not in ("SESSION_INFO", "DEVICE_RESET", "CALLBACK_DONE"):
                raise CudaError(*self.sticky)
            result = handler(*args)
            if isinstance(result, Wait):
                self._collect_async_errors()
                if kind == POST:
                    return
                result.what = result.what or op.name
                self.waiting.append((seq, result))
                self.progress()
                return
            results = result or []
        except CudaError as e:
            err, msg_text, noted = e.code, e.message, e.noted
        except ClientGone:  # the client left while we answered (TLS errors included): the worker ends the session
            raise
        except Exception as e:  # a server bug: report it, keep the session
            self.log.exception("internal error in %s", op.name)
            err, msg_text = Err.UNKNOWN, f"internal server error in {op.name}: {e.__class__.__name__}: {e}"
        self._collect_async_errors()
        if kind == POST:
            if err:
                self._defer(err, msg_text, op.name)
            return
        self._reply(seq, err, msg_text, results, op.name, noted)

    def _reply(self, seq: int, err: int, msg_text: str, results: list[Any], op_name: str, noted: bool = False) -> None:
        if not err and not results and self.deferred:
            err, msg_text = self.deferred  # an asynchronous error surfaces at the next synchronising call
            self.deferred = None
        if err:
            self.log.debug("%s -> error %d: %s", op_name, err, msg_text)
            mapped = self.policy.map_error(err)
            if mapped != err:  # a code the client's runtime does not know
                msg_text = f"{msg_text} (error {err} of the driver, reported as {mapped} to this CUDA client)"
                err = mapped
        note = msg_text if (err in NOTED or noted) and msg_text else None
        out = bytes(self.out) if self.out else None
        self.out.clear()
        self.send([REPLY, seq, err, results, out, note])

    def _defer(self, err: int, text: str, what: str) -> None:
        if err in STICKY:
            if not self.sticky:
                self.sticky = (err, text)
                self.log.warning("sticky error %d (%s) in %s: the context is unusable until cudaDeviceReset",
                                 err, text, what)
        elif not self.deferred:
            self.deferred = (err, text)

    def _collect_async_errors(self) -> None:
        e = self.bs.take_async_error()
        if e:
            self._defer(e[0], e[1], "queued work")

    def progress(self) -> None:
        """Answers every waiting call whose condition now holds. A wait that fails in any way is answered
        with an error and leaves the list: it never blocks the replies queued behind it."""
        waiting, self.waiting = self.waiting, []
        still: list[tuple[int, Wait]] = []
        try:
            while waiting:
                seq, w = waiting.pop(0)
                err, text, results = 0, "", []
                try:
                    if not w.ready():
                        still.append((seq, w))
                        continue
                    self._collect_async_errors()
                    if self.sticky:
                        raise CudaError(*self.sticky)
                    results = w.finish()
                except CudaError as e:
                    err, text = e.code, e.message
                except ClientGone:
                    raise
                except Exception as e:  # a server bug: logged with its traceback, the call gets an error
                    what = w.what or "a waiting call"
                    self.log.exception("internal error completing %s (seq %d)", what, seq)
                    err, text = Err.UNKNOWN, f"internal server error in {what}: {e.__class__.__name__}: {e}"
                self._reply(seq, err, text, results, w.what or "wait")
        finally:
            # calls that arrived while replying (progress re-entered) queue behind the ones still waiting
            self.waiting = still + waiting + self.waiting

    # -- handles -----------------------------------------------------------------------------------------
    def _new_handle(self) -> int:
        self.next_handle += 0x10
        return self.next_handle

    def _dev(self, dev: int) -> int:
        if not isinstance(dev, int) or not 0 <= dev < len(self.info.devices):
            raise CudaError(Err.INVALID_DEVICE, f"invalid device ordinal {dev}")
        return self.info.devices[dev]

    def _client_dev(self, backend_dev: int) -> int:
        return self.info.devices.index(backend_dev) if backend_dev in self.info.devices else -2

    def _stream(self, h: int, dev: int = 0) -> Stream:
        # Handles below HANDLE_BASE name legacy streams: h is the client device whose legacy stream it is
        # (gpushim/protocol.py). `dev` is not consulted: a legacy stream carries its device.
        if h < HANDLE_BASE:
            s = self._legacy.get(h)
            if s is None:
                if not 0 <= h < len(self.info.devices):
                    raise CudaError(Err.INVALID_RESOURCE_HANDLE, f"{h:#x} is not a stream of this session")
                s = self._legacy[h] = self.bs.default_stream(self._dev(h))  # a backend's legacy streams stay
            return s
        s = self.streams.get(h)
        if s is None:
            raise CudaError(Err.INVALID_RESOURCE_HANDLE, f"{h:#x} is not a stream of this session")
        return s

    def _event(self, h: int) -> Event:
        e = self.events.get(h)
        if e is None:
            raise CudaError(Err.INVALID_RESOURCE_HANDLE, f"{h:#x} is not an event of this session")
        return e

    def _sync_point(self, h: int) -> Callable[[], bool]:
        """True once what a synchronisation of stream h issued now waits for has completed (docs/semantics.md:
        a legacy stream waits for its device's blocking streams, never for non-blocking ones)."""
        return self.bs.sync_point(self._stream(h))

    # -- memory ------------------------------------------------------------------------------------------













    # -- streams -----------------------------------------------------------------------------------------









    # -- modules and kernels -----------------------------------------------------------------------------







    # -- session -----------------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        allocs = self.bs.allocations()
        return {
            "session": self.info.session_id,
            "pid": self.info.pid,
            "program": self.info.program,
            "runtime": self.info.runtime,
            "priority": self.info.priority,
            "nice": os.getpriority(os.PRIO_PROCESS, 0),
            "devices": self.info.devices,
            "allocations": len(allocs),
            "allocated_bytes": sum(size for _, _, size in allocs),
            # what the quota counts: every allocation, module variables and device heap included, rounded
            "charged_bytes": self.bs.account.used,
            "module_uploads": self.uploads.count,
            "module_upload_bytes": self.uploads.bytes,
            "streams": len(self.streams),
            "events": len(self.events),
            "calls": self.total_calls(),
            "fast_calls": self.fast_calls(),  # of them, answered by the worker's C loop (fastpath.py)
            "sticky_error": self.sticky[0] if self.sticky else 0,
            **self.bs.stats(),
            "uptime_s": round(time.time() - self.started, 3),
        }

    def total_calls(self) -> int:
        return self.calls + self.fast_calls()

    def op_session_info(self) -> list[Any]:
        return [self.summary()]

    def op_runtime_version(self, runtime: int) -> list[Any]:
        """The client's runtime version, learned after the handshake. Only a newer CUDA 11+ version replaces
        the one recorded; the policy built at the handshake (for the server's driver version when the client
        said 0) stays, as calls were already adapted by it."""
        if not 11000 <= runtime < 100000:
            raise CudaError(Err.INVALID_VALUE, f"RUNTIME_VERSION: {runtime} is no CUDA 11+ runtime version")
        if runtime > self.info.runtime:
            self.log.info("client runtime: CUDA %d (learned after the handshake; it said %d)", runtime,
                          self.info.runtime)
            self.info.runtime = runtime
        return []

    def close(self) -> None:
        self.ipc_close_all()  # before the memory goes: no record may name it after
        self.bs.close()
        for fd in self.received_fds:
            os.close(fd)
        self.host_maps.clear()
