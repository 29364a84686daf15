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
from dataclasses import dataclass, field
from typing import Any

from gpushim.backends.base import Backend, Event, Stream
from gpushim.compat.policy import Policy, build_policy
from gpushim.cuda_errors import STICKY, CudaError, Err
from gpushim.protocol import CALLBACK, HANDLE_BASE, OPS_BY_ID, POST, REPLY, Op, check_args
from gpushim.server.modules import ModuleStore

# Errors whose reason the shim prints for a person to act on (others are ordinary API results).
# The runtime API an operation serves, for the policy's per-API verdicts.
OP_API = {
    "DEVICE_PROPS": "cudaGetDeviceProperties", "DEVICE_ATTR": "cudaDeviceGetAttribute", "MALLOC": "cudaMalloc",
    "MALLOC_PITCH": "cudaMallocPitch", "MALLOC_MANAGED": "cudaMallocManaged", "FREE": "cudaFree",
    "FREE_ASYNC": "cudaFreeAsync", "MEMCPY_H2D": "cudaMemcpy",
    "MEMCPY_D2H": "cudaMemcpy",
    "MEMCPY_D2D": "cudaMemcpy", "MEMSET": "cudaMemset", "STREAM_CREATE": "cudaStreamCreateWithPriority",
    "STREAM_WAIT_EVENT": "cudaStreamWaitEvent", "STREAM_HOST_FUNC": "cudaLaunchHostFunc",
    "EVENT_CREATE": "cudaEventCreateWithFlags", "EVENT_RECORD": "cudaEventRecord",
    "EVENT_ELAPSED": "cudaEventElapsedTime", "LAUNCH": "cudaLaunchKernel", "FUNC_INFO": "cudaFuncGetAttributes",
    "FUNC_SET_ATTR": "cudaFuncSetAttribute", "SYMBOL_INFO": "cudaGetSymbolAddress",
}

NOTED = frozenset({Err.NOT_SUPPORTED, Err.UNKNOWN, Err.INSUFFICIENT_DRIVER, Err.UNSUPPORTED_PTX_VERSION,
                   Err.NO_KERNEL_IMAGE_FOR_DEVICE, Err.INVALID_KERNEL_IMAGE, Err.NOT_PERMITTED} | STICKY)


UNSUPPORTED_LIMIT = 215
# cudaLimit defaults of current GPUs: stack, printf FIFO, malloc heap, runtime sync depth, pending launches,
# L2 fetch granularity, persisting L2 cache size
LIMIT_DEFAULTS = {0: 1024, 1: 1 << 20, 2: 8 << 20, 3: 2, 4: 2048, 5: 64, 6: 0}


class ProtocolError(Exception):
    """The client broke the protocol; the session ends."""


@dataclass
class Wait:
    """A reply that must wait until `ready()`; `finish()` then gives the results (or raises CudaError)."""

    ready: Callable[[], bool]
    finish: Callable[[], list[Any]] = field(default=lambda: [])


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


class Session:
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
        self.bs = backend.open_session(self.out.extend)
        self.bs.policy = self.policy
        self.streams: dict[int, Stream] = {}
        self.events: dict[int, Event] = {}
        self.callbacks: dict[int, Callable[[], None]] = {}
        self.waiting: list[tuple[int, Wait]] = []
        self.next_handle = HANDLE_BASE
        self.sticky: tuple[int, str] | None = None
        self.deferred: tuple[int, str] | None = None
        self.device_flags: dict[int, int] = {}
        self.limits: dict[int, dict[int, int]] = {}  # device -> cudaLimit -> value
        self.received_fds: list[int] = []  # descriptors that came with frames (SCM_RIGHTS), in order
        self.host_maps: dict[int, mmap.mmap] = {}
        self.calls = 0
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
        if type(msg) is not list or len(msg) != 4 or msg[0] not in (1, POST):
            raise ProtocolError(f"expected [CALL|POST, seq, op, args], got {_describe(msg)}")
        kind, seq, op_id, args = msg
        if type(seq) is not int or type(args) is not list:
            raise ProtocolError("CALL fields have the wrong types")
        route = self.routes.get(op_id) if type(op_id) is int else None
        if route is None:
            raise ProtocolError(f"unknown operation {op_id}")
        op, handler, refusal = route
        problem = check_args(op, args)
        if problem:
            raise ProtocolError(problem)
        self.calls += 1
        err, msg_text, results = 0, "", []
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
                self.waiting.append((seq, result))
                self.progress()
                return
            results = result or []
        except CudaError as e:
            err, msg_text = e.code, e.message
        except Exception as e:  # a server bug: report it, keep the session
            self.log.exception("internal error in %s", op.name)
            err, msg_text = Err.UNKNOWN, f"internal server error in {op.name}: {e.__class__.__name__}: {e}"
        self._collect_async_errors()
        if kind == POST:
            if err:
                self._defer(err, msg_text, op.name)
            return
        self._reply(seq, err, msg_text, results, op.name)

    def _reply(self, seq: int, err: int, msg_text: str, results: list[Any], op_name: str) -> None:
        if not err and not results and self.deferred:
            err, msg_text = self.deferred  # an asynchronous error surfaces at the next synchronising call
            self.deferred = None
        if err:
            self.log.debug("%s -> error %d: %s", op_name, err, msg_text)
            mapped = self.policy.map_error(err)
            if mapped != err:  # a code the client's runtime does not know
                msg_text = f"{msg_text} (error {err} of the driver, reported as {mapped} to this CUDA client)"
                err = mapped
        note = msg_text if err in NOTED and msg_text else None
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
        """Answers every waiting call whose condition now holds."""
        still: list[tuple[int, Wait]] = []
        for seq, w in self.waiting:
            if w.ready():
                err, text, results = 0, "", []
                try:
                    self._collect_async_errors()
                    if self.sticky:
                        raise CudaError(*self.sticky)
                    results = w.finish()
                except CudaError as e:
                    err, text = e.code, e.message
                self._reply(seq, err, text, results, "wait")
            else:
                still.append((seq, w))
        self.waiting = still

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

    def _stream(self, h: int, dev: int = 0) -> Stream | None:
        if h == 0:
            return self.bs.default_stream(self._dev(dev))
        s = self.streams.get(h)
        if s is None:
            raise CudaError(Err.INVALID_RESOURCE_HANDLE, f"{h:#x} is not a stream of this session")
        return s

    def _event(self, h: int) -> Event:
        e = self.events.get(h)
        if e is None:
            raise CudaError(Err.INVALID_RESOURCE_HANDLE, f"{h:#x} is not an event of this session")
        return e

    def _stream_idle(self, h: int) -> Callable[[], bool]:
        if h == 0:  # the legacy stream waits for every blocking stream: wait for the whole device
            return lambda: all(self.bs.device_idle(d) for d in self.info.devices)
        s = self._stream(h)
        return lambda: self.bs.stream_idle(s)

    # -- devices -----------------------------------------------------------------------------------------
    def op_device_count(self) -> list[Any]:
        return [len(self.info.devices)]

    def op_device_props(self, dev: int) -> list[Any]:
        return [self.backend.devices()[self._dev(dev)].props]

    def op_device_attr(self, attr: int, dev: int) -> list[Any]:
        attrs = self.backend.devices()[self._dev(dev)].attributes
        if attr not in attrs:
            raise CudaError(Err.INVALID_VALUE, f"device attribute {attr} is unknown to this server")
        return [attrs[attr]]

    def op_device_sync(self, dev: int) -> Wait:
        d = self._dev(dev)
        return Wait(lambda: self.bs.device_idle(d))

    def op_device_reset(self, dev: int) -> list[Any]:
        d = self._dev(dev)
        for h, s in list(self.streams.items()):
            if s.device == d:
                self.bs.stream_destroy(s)
                del self.streams[h]
        for h, e in list(self.events.items()):
            if e.device == d:
                del self.events[h]
        self.bs.reset_device(d)
        self.sticky = None
        self.deferred = None
        self.device_flags.pop(d, None)
        self.limits.pop(d, None)
        return []

    def op_device_limit(self, dev: int, limit: int, value: int, set: int) -> list[Any]:
        d = self._dev(dev)
        limits = self.limits.setdefault(d, dict(LIMIT_DEFAULTS))
        if limit not in limits:
            raise CudaError(UNSUPPORTED_LIMIT, f"cudaLimit {limit} is not supported")
        if set:
            if limit == 6 and value > self.backend.devices()[d].props.get("persistingL2CacheMaxSize", 0):
                raise CudaError(Err.INVALID_VALUE, "persisting L2 cache size above the device's maximum")
            self.bs.set_limit(d, limit, value)
            limits[limit] = value
        return [limits[limit]]

    def op_driver_version(self) -> list[Any]:
        return [self.backend.driver_version()]

    def op_mem_info(self, dev: int) -> list[Any]:
        free, total = self.bs.mem_info(self._dev(dev))
        if self.info.memory_quota is not None:
            used = sum(size for _, _, size in self.bs.allocations())
            free = max(0, min(free, self.info.memory_quota - used))
        return [free, total]

    def op_stream_priority_range(self, dev: int) -> list[Any]:
        least, greatest = self.backend.devices()[self._dev(dev)].priority_range
        return [least, greatest]

    def op_device_pci_bus_id(self, dev: int) -> list[Any]:
        return [self.backend.devices()[self._dev(dev)].pci_bus_id]

    def op_device_by_pci_bus_id(self, bus_id: str) -> list[Any]:
        want = bus_id.lower().strip()
        for client_dev, d in enumerate(self.info.devices):
            full = self.backend.devices()[d].pci_bus_id.lower()
            if want in (full, full.split(":", 1)[1], full.removeprefix("0000:")):
                return [client_dev]
        raise CudaError(Err.INVALID_DEVICE, f"no device at PCI bus id '{bus_id}'")

    def op_can_access_peer(self, dev: int, peer: int) -> list[Any]:
        return [int(self._dev(dev) != self._dev(peer))]

    def op_set_device_flags(self, dev: int, flags: int) -> list[Any]:
        if flags & ~0x1F:
            raise CudaError(Err.INVALID_VALUE, f"invalid device flags {flags:#x}")
        self.device_flags[self._dev(dev)] = flags
        return []

    def op_get_device_flags(self, dev: int) -> list[Any]:
        return [self.device_flags.get(self._dev(dev), 0)]

    # -- memory ------------------------------------------------------------------------------------------
    def op_malloc(self, dev: int, size: int) -> list[Any]:
        d = self._dev(dev)
        quota = self.info.memory_quota
        if quota is not None and sum(s for _, _, s in self.bs.allocations()) + size > quota:
            raise CudaError(Err.MEMORY_ALLOCATION, f"session memory quota of {quota} bytes exceeded")
        return [self.bs.malloc(d, size)]

    def op_malloc_managed(self, dev: int, size: int) -> list[Any]:
        if self.info.transport != "unix":
            raise CudaError(Err.NOT_SUPPORTED, "managed memory needs the client on the server's host (a Unix socket)")
        ptr, pid, fd, base = self.bs.malloc_managed(self._dev(dev), size)
        return [ptr, pid, fd, base]

    def op_free_async(self, ptr: int, stream: int) -> list[Any]:
        s = self._stream(stream)
        self.bs.free_async(s, ptr)
        return []

    def op_malloc_pitch(self, dev: int, width: int, height: int) -> list[Any]:
        ptr, pitch = self.bs.malloc_pitch(self._dev(dev), width, height)
        return [ptr, pitch]

    def op_free(self, ptr: int) -> Wait:
        # cudaFree implicitly synchronises the device; a bad pointer fails at once, without waiting.
        kind, _, base, _ = self.bs.pointer_info(ptr)
        if kind != 2 or base != ptr:
            raise CudaError(Err.INVALID_VALUE, f"cudaFree({ptr:#x}): not the start of a live device allocation")
        return Wait(lambda: all(self.bs.device_idle(d) for d in self.info.devices),
                    lambda: self.bs.free(ptr) or [])

    def op_memcpy_h2d(self, dst: int, stream: int, data: bytes) -> list[Any]:
        self.bs.write(self._stream(stream), dst, data)
        return []

    def op_memcpy_d2h(self, src: int, nbytes: int, stream: int) -> Wait:
        s = self._stream(stream)
        self.bs.pointer_info(src)  # a bad pointer fails at once
        return Wait(self._stream_idle(stream), lambda: [self.bs.read(s, src, nbytes)])

    def op_memcpy_d2d(self, dst: int, src: int, nbytes: int, stream: int) -> list[Any]:
        self.bs.copy(self._stream(stream), dst, src, nbytes)
        return []

    def op_memcpy2d_h2d(self, dst: int, dpitch: int, width: int, height: int, stream: int, data: bytes) -> list[Any]:
        self.bs.write_2d(self._stream(stream), dst, dpitch, width, height, data)
        return []

    def op_memcpy2d_d2h(self, src: int, spitch: int, width: int, height: int, stream: int) -> Wait:
        s = self._stream(stream)
        return Wait(self._stream_idle(stream), lambda: [self.bs.read_2d(s, src, spitch, width, height)])

    def op_memcpy2d_d2d(self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int,
                        stream: int) -> list[Any]:
        self.bs.copy_2d(self._stream(stream), dst, dpitch, src, spitch, width, height)
        return []

    def op_memset(self, dst: int, value: int, nbytes: int, stream: int) -> list[Any]:
        self.bs.memset(self._stream(stream), dst, value, nbytes)
        return []

    def op_memset2d(self, dst: int, pitch: int, value: int, width: int, height: int, stream: int) -> list[Any]:
        self.bs.memset_2d(self._stream(stream), dst, pitch, value, width, height)
        return []

    # -- host memory shared with the client (same host, Unix socket) --------------------------------------
    def op_host_map(self, shm: int, size: int) -> list[Any]:
        if not self.received_fds:
            raise CudaError(Err.INVALID_VALUE, "HOST_MAP arrived without its file descriptor")
        fd = self.received_fds.pop(0)
        try:
            if os.fstat(fd).st_size < size or size <= 0:
                raise CudaError(Err.INVALID_VALUE, f"shared memory {shm}: the file is smaller than {size} bytes")
            self.host_maps[shm] = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            self.log.debug("mapped %d bytes of the client's pinned memory (shared memory %d)", size, shm)
        finally:
            os.close(fd)
        return []

    def op_host_unmap(self, shm: int) -> list[Any]:
        if self.host_maps.pop(shm, None) is None:
            raise CudaError(Err.INVALID_VALUE, f"no shared memory {shm} in this session")
        return []

    def _shared(self, shm: int, offset: int, nbytes: int) -> memoryview:
        m = self.host_maps.get(shm)
        if m is None:
            raise CudaError(Err.INVALID_HOST_POINTER, f"no shared memory {shm} in this session")
        if offset < 0 or nbytes < 0 or offset + nbytes > len(m):
            raise CudaError(Err.INVALID_VALUE, f"{nbytes} bytes at offset {offset} run past shared memory {shm}")
        return memoryview(m)[offset : offset + nbytes]

    def op_memcpy_h2d_shm(self, dst: int, stream: int, shm: int, offset: int, nbytes: int) -> list[Any]:
        self.bs.write_shared(self._stream(stream), dst, self._shared(shm, offset, nbytes))
        return []

    def op_memcpy_h2d_staged(self, dst: int, stream: int, shm: int, offset: int, nbytes: int) -> list[Any]:
        self.bs.write(self._stream(stream), dst, self._shared(shm, offset, nbytes))
        return []

    def op_memcpy_d2h_shm(self, src: int, stream: int, shm: int, offset: int, nbytes: int) -> Wait:
        self.bs.read_into(self._stream(stream), src, self._shared(shm, offset, nbytes))
        return Wait(self._stream_idle(stream))

    def op_pointer_info(self, ptr: int) -> list[Any]:
        kind, dev, base, size = self.bs.pointer_info(ptr)
        return [kind, self._client_dev(dev) if kind else -2, base, size]

    # -- streams -----------------------------------------------------------------------------------------
    def op_stream_create(self, dev: int, flags: int, priority: int) -> list[Any]:
        if flags & ~1:
            raise CudaError(Err.INVALID_VALUE, f"invalid stream flags {flags:#x}")
        h = self._new_handle()
        self.streams[h] = self.bs.stream_create(self._dev(dev), flags, priority)
        return [h]

    def op_stream_destroy(self, stream: int) -> list[Any]:
        s = self.streams.pop(stream, None)
        if s is None:
            raise CudaError(Err.INVALID_RESOURCE_HANDLE, f"{stream:#x} is not a stream of this session")
        self.bs.stream_destroy(s)
        return []

    def op_stream_sync(self, stream: int) -> Wait:
        return Wait(self._stream_idle(stream))

    def op_stream_query(self, stream: int) -> list[Any]:
        if not self._stream_idle(stream)():
            raise CudaError(Err.NOT_READY, "work is pending")
        return []

    def op_stream_wait_event(self, stream: int, event: int, flags: int) -> list[Any]:
        self.bs.stream_wait_event(self._stream(stream), self._event(event))
        return []

    def op_stream_get_priority(self, stream: int) -> list[Any]:
        return [0 if stream == 0 else self._stream(stream).priority]  # type: ignore[union-attr]

    def op_stream_get_flags(self, stream: int) -> list[Any]:
        return [0 if stream == 0 else self._stream(stream).flags]  # type: ignore[union-attr]

    def op_stream_host_func(self, stream: int, callback_id: int) -> list[Any]:
        s = self._stream(stream)
        self.callbacks[callback_id] = self.bs.host_func(s, lambda: self.send([CALLBACK, stream, callback_id]))
        return []

    def op_callback_done(self, callback_id: int) -> list[Any]:
        done = self.callbacks.pop(callback_id, None)
        if done is None:
            raise CudaError(Err.INVALID_VALUE, f"unknown host callback {callback_id}")
        done()
        self.progress()
        return []

    # -- events ------------------------------------------------------------------------------------------
    def op_event_create(self, dev: int, flags: int) -> list[Any]:
        if flags & ~0x0F:
            raise CudaError(Err.INVALID_VALUE, f"invalid event flags {flags:#x}")
        h = self._new_handle()
        self.events[h] = self.bs.event_create(self._dev(dev), flags)
        return [h]

    def op_event_record(self, event: int, stream: int, flags: int) -> list[Any]:
        e = self._event(event)
        self.bs.event_record(e, self._stream(stream, self._client_dev(e.device)))
        return []

    def op_event_sync(self, event: int) -> Wait:
        e = self._event(event)
        return Wait(lambda: self.bs.event_idle(e))

    def op_event_query(self, event: int) -> list[Any]:
        if not self.bs.event_idle(self._event(event)):
            raise CudaError(Err.NOT_READY, "the event has not completed")
        return []

    def op_event_elapsed(self, start: int, end: int) -> list[Any]:
        return [self.bs.event_elapsed_ms(self._event(start), self._event(end))]

    def op_event_destroy(self, event: int) -> list[Any]:
        e = self.events.pop(event, None)
        if e is None:
            raise CudaError(Err.INVALID_RESOURCE_HANDLE, f"{event:#x} is not an event of this session")
        self.bs.event_destroy(e)
        return []

    # -- modules and kernels -----------------------------------------------------------------------------
    def _ensure_module(self, key: bytes) -> None:
        if not self.bs.has_module(key):
            self.bs.load_module(key, self.store.get(key))

    def op_module_query(self, hash: bytes) -> list[Any]:
        return [int(self.bs.has_module(hash) or self.store.has(hash))]

    def op_module_load(self, hash: bytes, fatbin: bytes) -> list[Any]:
        self.store.put(hash, fatbin)
        self.bs.load_module(hash, fatbin)
        return []

    def op_func_info(self, dev: int, hash: bytes, name: str) -> list[Any]:
        self._ensure_module(hash)
        params, nbytes, attrs = self.bs.function_info(self._dev(dev), hash, name)
        return [params, nbytes, attrs]

    def op_launch(self, dev: int, hash: bytes, name: str, grid: list[int], block: list[int], shared: int,
                  stream: int, params: bytes) -> list[Any]:
        verdict = self.policy.check_kernel_params(len(params))
        if not verdict.ok:
            raise CudaError(verdict.error, f"kernel {name}: {verdict.reason}")
        self._ensure_module(hash)
        self.bs.launch(self._dev(dev), hash, name, grid, block, shared, self._stream(stream, dev), params)
        return []

    def op_symbol_info(self, dev: int, hash: bytes, name: str) -> list[Any]:
        self._ensure_module(hash)
        ptr, size = self.bs.symbol_info(self._dev(dev), hash, name)
        return [ptr, size]

    def op_func_set_attr(self, dev: int, hash: bytes, name: str, attr: int, value: int) -> list[Any]:
        self._ensure_module(hash)
        self.bs.function_info(self._dev(dev), hash, name)  # the kernel must exist
        return []

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
            "streams": len(self.streams),
            "events": len(self.events),
            "calls": self.calls,
            "sticky_error": self.sticky[0] if self.sticky else 0,
            "uptime_s": round(time.time() - self.started, 3),
        }

    def op_session_info(self) -> list[Any]:
        return [self.summary()]

    def close(self) -> None:
        self.bs.close()
        for fd in self.received_fds:
            os.close(fd)
        self.host_maps.clear()


def _describe(msg: Any) -> str:
    text = repr(msg)
    return text if len(text) < 80 else text[:77] + "..."
