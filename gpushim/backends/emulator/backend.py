"""The emulator backend: devices modelled on real GPUs, memory in host RAM, CUDA's stream semantics, and
kernels run by the PTX engine (gpushim.ptx). No GPU or driver is needed."""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from gpushim.backends.accounting import HostLedger, MemoryAccount, default_memory_cap, mem_available
from gpushim.backends.base import Backend, BackendSession, DeviceInfo, Event, Stream
from gpushim.backends.emulator import textures
from gpushim.backends.emulator.memory import ARENA_BASE, DEVICE_WINDOW, DeviceMemory
from gpushim.backends.emulator.models import DEFAULT_MODEL, device_attributes, find_model, make_device
from gpushim.backends.emulator.peers import PeerSpace, PeerView
from gpushim.backends.emulator.streams import EVENT_DISABLE_TIMING, EmuEvent, EmuStream, Scheduler
from gpushim.backends.emulator.vmm import EmuVmm
from gpushim.backends.launch_attrs import LaunchAttrs, check_cluster
from gpushim.compat.policy import Policy, driver_features
from gpushim.cuda_errors import CudaError, Err
from gpushim.lazy import lazy_import
from gpushim.ptx.heap import heap_used, set_heap_limit

if TYPE_CHECKING:
    from gpushim.backends.emulator.kernels import EmuModule
# the PTX engine: loaded by preload() once the server listens, or on first use
devrt = lazy_import("gpushim.ptx.devrt")

log = logging.getLogger("gpushim.emulator")
PITCH_ALIGNMENT = 512
LIMIT_MALLOC_HEAP_SIZE = 2  # cudaLimitMallocHeapSize: the device heap of kernels' malloc()
LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT = 4  # outstanding device-side launches (gpushim/ptx/devrt.py)


ARENA_LIMIT = 0x7000_0000_0000  # arenas stay below this (managed memory is mapped at the same address in clients)


def check_arena_base(base: int, count: int) -> None:
    """--arena-base: device addresses start there, one DEVICE_WINDOW per device."""
    if base % DEVICE_WINDOW or base < ARENA_BASE or base + count * DEVICE_WINDOW > ARENA_LIMIT:
        raise ValueError(f"--arena-base {base:#x}: it must be a multiple of {DEVICE_WINDOW:#x} from {ARENA_BASE:#x}, "
                         f"with {count} device window(s) ending by {ARENA_LIMIT:#x}")


def parse_driver_version(text: str) -> int:
    """'12.4' -> 12040; '13000' -> 13000."""
    if "." in text:
        major, minor = text.split(".", 1)
        return int(major) * 1000 + int(minor) * 10
    return int(text)


class EmulatorBackend(Backend):
    name = "emulator"

    def __init__(self, model: str = DEFAULT_MODEL, count: int = 1, driver: str = "13.0",
                 memory_limit: int | None = None, reason: str = "", memory_cap: int | None = None,
                 arena_base: int = ARENA_BASE) -> None:
        if not 1 <= count <= 16:
            raise ValueError("the emulator presents 1 to 16 devices")
        check_arena_base(arena_base, count)
        self.arena_base = arena_base
        self.model = find_model(model)
        self.count = count
        self._driver = parse_driver_version(driver)
        # Device memory is host RAM: all sessions together may hold `memory_cap` bytes (a shared ledger), and
        # no device presents more than that, so the emulator never promises memory the host cannot back.
        # The arena reserves address space only; pages exist once touched.
        # (0: no cap, the operator's explicit choice)
        self.memory_cap = (memory_cap or None) if memory_cap is not None else default_memory_cap()
        self.ledger = HostLedger(self.memory_cap) if self.memory_cap is not None else None
        avail = mem_available()
        if memory_cap and avail is not None and memory_cap > avail:
            log.warning("--memory-cap %d exceeds the %d bytes of RAM available now: sessions together may run the "
                        "host out of memory", memory_cap, avail)
        self.capacity = memory_limit or self.model.total_mem
        if self.memory_cap is not None:
            self.capacity = min(self.capacity, self.memory_cap)
        self._devices = [make_device(self.model, i, self.capacity) for i in range(count)]
        if arena_base != ARENA_BASE:
            # servers meant to be used together (GPUSHIM_SERVER=a,b) have distinct arenas: their devices get
            # distinct UUIDs too, so a client can tell them apart
            for d in self._devices:
                d.uuid = d.props["uuid"] = hashlib.sha256(d.uuid + arena_base.to_bytes(8, "little")).digest()[:16]
        # Present what a driver of that version has (gpushim/compat's table): e.g. no memory pools before 11.2.
        self.features = driver_features(self._driver)
        if not self.features.get("memory_pools", True):
            for d in self._devices:
                d.props["memoryPoolsSupported"] = 0
                d.props["memoryPoolSupportedHandleTypes"] = 0
                d.attributes = device_attributes(d.props)
        self.reason = reason

    def devices(self) -> list[DeviceInfo]:
        return self._devices

    def preload(self) -> None:
        import gpushim.backends.emulator.kernels  # noqa: F401 - the PTX engine, for the sessions to inherit

        devrt.Pending  # noqa: B018 - runs the lazily imported module

    def driver_version(self) -> int:
        return self._driver

    def arena(self) -> tuple[int, int]:
        """The device addresses this server hands out: [start, end)."""
        return self.arena_base, self.arena_base + self.count * DEVICE_WINDOW

    def describe(self) -> str:
        d = self._driver
        why = f" ({self.reason})" if self.reason else ""
        cap = f", device memory {self.capacity} bytes" + (
            f" (host RAM cap {self.memory_cap} bytes for all sessions)" if self.memory_cap is not None else "")
        return (f"emulator backend{why}: {self.count} x {self.model.name} (sm_{self.model.major}{self.model.minor}), "
                f"driver API {d // 1000}.{d % 1000 // 10}, kernels run on the CPU{cap}")

    def open_session(self, output: Callable[[bytes], None], quota: int | None = None) -> EmulatorSession:
        return EmulatorSession(self, output, quota)


class EmulatorSession(BackendSession):
    def __init__(self, backend: EmulatorBackend, output: Callable[[bytes], None], quota: int | None = None) -> None:
        self.backend = backend
        self.output = output
        self.account = MemoryAccount(quota, backend.ledger)  # shared by this session's devices
        self.memories = [DeviceMemory(backend.capacity, backend.arena_base + i * DEVICE_WINDOW, self.account,
                                      span=DEVICE_WINDOW) for i in range(backend.count)]
        for i, m in enumerate(self.memories):
            devrt.set_device(m, i, len(self.memories))  # cudaGetDevice in device code
        self.sched = Scheduler()
        self.peers: dict[int, set[int]] = {}  # device -> the devices its kernels may access (peer access)
        self.peer_space: PeerSpace | None = None
        self.vmm = EmuVmm(self.memories, lambda: self.peer_space)  # cuMemCreate / cuMemMap ... (vmm.py)
        self.pid = os.getpid()
        self.modules: dict[bytes, EmuModule] = {}
        # launch() per (module, kernel, device, grid, block, dynamic shared bytes, parameter bytes) that passed
        # its checks: [module, engine, module variables' addresses, device memory, and once an empty kernel ran
        # with it, the whole launch (_count_empty)], valid while the module and its variables are the same objects
        self._launches: dict[tuple, list[Any]] = {}
        self.policy: Policy | None = None  # set by the session: what the emulated driver accepts
        self.launches = 0
        self.thread_instructions = 0
        self.kernel_wall_s = 0.0
        self.gate: Callable[[int], AbstractContextManager[dict[str, float]]] = lambda dev: nullcontext({})
        self.note_kernel: Callable[..., None] = lambda dev, n=1: None  # kernels that ran without the gate
        # (launches, thread-instructions) the worker's C loop counted (gpushim/server/fastpath.py)
        self.fast_counts: Callable[[], tuple[int, int]] = lambda: (0, 0)

    def attach_scheduler(self, arbiter: Any, slot: int) -> None:
        """Kernels take their device's token from the server's scheduler (gpushim/server/scheduler.py)
        while they execute: one session's kernel at a time per device, as a GPU time-slices contexts."""
        arbiter.bind(slot)
        for dev, mem in enumerate(self.memories):  # placement sees each device's memory in use
            mem.on_change = lambda used, d=dev: arbiter.note_memory(slot, d, used)
            arbiter.note_memory(slot, dev, mem.used)

        used = [(lambda m=mem: m.used) for mem in self.memories]  # the device memory held, reported at release

        def gate(dev: int) -> AbstractContextManager[dict[str, float]]:
            queued = 1 + sum([len(s.queue) for s in self.sched.streams if s.device == dev])
            return arbiter.hold(slot, dev, queued, used[dev])

        self.gate = gate
        self.note_kernel = arbiter.kernel_counter(slot)

    # -- memory ------------------------------------------------------------------------------------------
    def _mem(self, dev: int) -> DeviceMemory:
        if not 0 <= dev < len(self.memories):
            raise CudaError(Err.INVALID_DEVICE, f"device {dev} does not exist")
        return self.memories[dev]

    def memory_of(self, ptr: int) -> DeviceMemory:
        for m in self.memories:
            if m.base <= ptr < m.base + m.span:  # m.owns(ptr), written out: every memory operation asks
                return m
        raise CudaError(Err.INVALID_VALUE, f"{ptr:#x} is not a device pointer of this session")

    def malloc(self, dev: int, size: int) -> int:
        return self._mem(dev).alloc(size)

    def malloc_managed(self, dev: int, size: int) -> tuple[int, int, int, int]:
        mem = self._mem(dev)
        if mem.fd is None:
            return super().malloc_managed(dev, size)
        # whole pages, so the client's mapping of them covers nothing else
        ptr = mem.alloc(size, kind="managed", align=mmap.PAGESIZE)
        return ptr, os.getpid(), mem.fd, mem.base

    def malloc_pitch(self, dev: int, width: int, height: int) -> tuple[int, int]:
        pitch = max(PITCH_ALIGNMENT, -(-width // PITCH_ALIGNMENT) * PITCH_ALIGNMENT)
        if width == 0 or height == 0:
            return 0, pitch
        return self._mem(dev).alloc(pitch * height, kind="pitched"), pitch

    def free(self, ptr: int) -> None:
        mem = self.memory_of(ptr)
        a = mem.find(ptr)
        # symbols belong to their module, IPC memory is closed with cudaIpcCloseMemHandle, arrays with cudaFreeArray
        if a is None or a.addr != ptr or a.kind in ("symbol", "ipc", "vmm", textures.KIND):
            raise CudaError(Err.INVALID_VALUE, f"{ptr:#x} is not the start of a live allocation (double free?)")
        # cudaFree waits for the device: work queued behind a host function still uses the memory.
        mem.free(ptr)

    def free_async(self, stream: Stream | None, ptr: int) -> None:
        mem = self.memory_of(ptr)
        a = mem.find(ptr)
        if a is None or a.addr != ptr or a.kind in ("symbol", "ipc", "vmm"):
            raise CudaError(Err.INVALID_VALUE, f"cudaFreeAsync({ptr:#x}): not the start of a live allocation")
        self.sched.work(self._stream(stream, self.memories.index(mem)), lambda: mem.free(ptr))

    def texture_create(self, dev: int, surface: bool, fields: list[int]) -> int:
        return textures.create(self._mem(dev), surface, fields)

    def texture_check(self, handle: int) -> None:
        a = self.memory_of(handle).find(handle)
        if a is None or a.addr != handle or a.kind != textures.KIND:
            raise CudaError(Err.INVALID_VALUE, f"{handle:#x} is not a texture or surface object")

    def texture_destroy(self, handle: int) -> None:
        textures.destroy(self.memory_of(handle), handle)

    def set_limit(self, dev: int, limit: int, value: int) -> None:
        if limit == LIMIT_MALLOC_HEAP_SIZE:
            # The heap's blocks are charged to the session as kernels allocate them; a heap that could never
            # be backed is refused now (cudaDeviceSetLimit documents cudaErrorMemoryAllocation).
            room = self.account.headroom()
            mem = self._mem(dev)
            if value > min(mem.free_bytes, room if room is not None else mem.free_bytes) + heap_used(mem):
                raise CudaError(Err.MEMORY_ALLOCATION,
                                f"a {value}-byte device heap exceeds the memory this session may still allocate")
            set_heap_limit(mem, value)
        elif limit == LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT:
            devrt.set_pending_limit(self._mem(dev), value)

    def mem_info(self, dev: int) -> tuple[int, int]:
        m = self._mem(dev)
        room = self.account.headroom()
        return (m.free_bytes if room is None else min(m.free_bytes, room)), m.capacity

    def pointer_info(self, ptr: int) -> tuple[int, int, int, int]:
        for dev, m in enumerate(self.memories):
            a = m.find(ptr)
            if a is not None:
                return 2, dev, a.addr, a.size
        return 0, -2, 0, 0

    def allocations(self) -> list[tuple[int, int, int]]:
        return [(dev, a.addr, a.size) for dev, m in enumerate(self.memories) for a in m.allocations()
                if a.kind != "symbol"]

    # -- stream-ordered work -------------------------------------------------------------------------------
    def _stream(self, s: Stream | None, dev: int = 0) -> EmuStream:
        return s if isinstance(s, EmuStream) else self.sched.legacy_stream(dev)

    def _check(self, ptr: int, n: int, what: str) -> DeviceMemory:
        mem = self.memory_of(ptr)
        mem.check_range(ptr, n, what)
        return mem

    def write(self, stream: Stream | None, dst: int, data: bytes | memoryview) -> None:
        mem = self._check(dst, len(data), "cudaMemcpy to the device")
        s = self._stream(stream)
        # The client may reuse its buffer as soon as the call returns: copy straight into device memory when
        # the stream runs the copy now, else keep a snapshot for when it does.
        payload = data if self.sched.runs_now(s) else bytes(data)
        self.sched.work(s, lambda: mem.write(dst, payload))

    def wait_value(self, stream: Stream | None, addr: int, value: int, cmp: int, width: int) -> None:
        """cuStreamWaitValue32/64: the stream's later work waits until the value at addr satisfies cmp
        (0: (signed)(*addr - value) >= 0, 1: ==, 2: *addr & value != 0, 3: ~(*addr | value) != 0)."""
        mem = self._check(addr, width, "cuStreamWaitValue")
        mask = (1 << (8 * width)) - 1

        def ready() -> bool:
            cur = int.from_bytes(mem.read(addr, width), "little")
            if cmp == 0:
                return ((cur - value) & mask) < 1 << (8 * width - 1)
            if cmp == 1:
                return cur == value
            if cmp == 2:
                return cur & value != 0
            return ~(cur | value) & mask != 0

        self.sched.submit_wait(self._stream(stream), ready)

    def write_shared(self, stream: Stream | None, dst: int, source: memoryview) -> None:
        mem = self._check(dst, len(source), "cudaMemcpy to the device")
        self.sched.work(self._stream(stream), lambda: mem.write(dst, source))

    def read_into(self, stream: Stream | None, src: int, out: memoryview) -> None:
        mem = self._check(src, len(out), "cudaMemcpy from the device")

        def run() -> None:
            out[:] = mem.read(src, len(out))

        self.sched.work(self._stream(stream), run)

    def read(self, stream: Stream | None, src: int, n: int) -> memoryview:
        mem = self._check(src, n, "cudaMemcpy from the device")
        return mem.read(src, n)  # a view of the arena: the worker sends it before anything else runs

    def _ordered(self, stream: Stream, take: Callable[[], Any]) -> tuple[Callable[[], bool], Callable[[], Any]]:
        """Runs take() in stream order; when that is now, its result (a view of the arena) is sent at once."""
        s = self._stream(stream)
        if self.sched.runs_now(s):
            s.submitted += 1
            s.completed += 1
            data = take()
            return (lambda: True), (lambda: data)
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["data"] = bytes(take())  # a snapshot: later work may change the memory before the reply
            except Exception as e:  # noqa: BLE001 - a bug too is answered to this call (by its Wait), not raised in the pump
                box["error"] = e

        def result() -> Any:
            if "error" in box:
                raise box["error"]
            return box["data"]

        return self.sched.work_done(s, run), result

    def read_ordered(self, stream: Stream, src: int, n: int) -> tuple[Callable[[], bool], Callable[[], Any]]:
        mem = self._check(src, n, "cudaMemcpy from the device")
        return self._ordered(stream, lambda: mem.read(src, n))

    def read_2d_ordered(self, stream: Stream, src: int, spitch: int, width: int,
                        height: int) -> tuple[Callable[[], bool], Callable[[], Any]]:
        self._rows(src, spitch, width, height, "cudaMemcpy2D source")
        return self._ordered(stream, lambda: self.read_2d(stream, src, spitch, width, height))

    def copy_peer(self, stream: Stream, dst: int, src: int, n: int, devices: list[int]) -> None:
        dmem = self._check(dst, n, "cudaMemcpyPeer destination")
        smem = self._check(src, n, "cudaMemcpyPeer source")
        self.sched.fence(self._stream(stream), devices, lambda: dmem.write(dst, bytes(smem.read(src, n))))

    def copy(self, stream: Stream | None, dst: int, src: int, n: int) -> None:
        dmem = self._check(dst, n, "cudaMemcpy destination")
        smem = self._check(src, n, "cudaMemcpy source")
        self.sched.work(self._stream(stream), lambda: dmem.write(dst, bytes(smem.read(src, n))))

    def _rows(self, ptr: int, pitch: int, width: int, height: int, what: str) -> DeviceMemory:
        if min(pitch, width, height) < 0:
            raise CudaError(Err.INVALID_VALUE, f"{what}: negative pitch, width or height ({pitch}, {width}, {height})")
        if width == 0 or height == 0:
            return self.memory_of(ptr)  # nothing to touch
        if width > pitch:
            raise CudaError(Err.INVALID_PITCH_VALUE, f"{what}: width {width} exceeds pitch {pitch}")
        return self._check(ptr, pitch * (height - 1) + width, what)

    def write_2d(self, stream: Stream | None, dst: int, dpitch: int, width: int, height: int, data: bytes) -> None:
        mem = self._rows(dst, dpitch, width, height, "cudaMemcpy2D destination")
        if len(data) != width * height:
            raise CudaError(Err.INVALID_VALUE, "cudaMemcpy2D: data size does not match width x height")
        if width == 0 or height == 0:
            return
        payload = bytes(data)

        def run() -> None:
            off = dst - mem.base
            rows = mem.arena[off : off + dpitch * height].reshape(-1)
            for y in range(height):
                rows[y * dpitch : y * dpitch + width] = memoryview(payload)[y * width : (y + 1) * width]

        self.sched.work(self._stream(stream), run)

    def read_2d(self, stream: Stream | None, src: int, spitch: int, width: int, height: int) -> bytes:
        mem = self._rows(src, spitch, width, height, "cudaMemcpy2D source")
        if width == 0 or height == 0:
            return b""
        off = src - mem.base
        out = bytearray(width * height)
        for y in range(height):
            out[y * width : (y + 1) * width] = mem.arena[off + y * spitch : off + y * spitch + width].tobytes()
        return bytes(out)

    def copy_2d(self, stream: Stream | None, dst: int, dpitch: int, src: int, spitch: int, width: int,
                height: int) -> None:
        dmem = self._rows(dst, dpitch, width, height, "cudaMemcpy2D destination")
        smem = self._rows(src, spitch, width, height, "cudaMemcpy2D source")
        if width == 0 or height == 0:
            return

        def run() -> None:
            for y in range(height):
                d, s = dst - dmem.base + y * dpitch, src - smem.base + y * spitch
                dmem.arena[d : d + width] = smem.arena[s : s + width].copy()

        self.sched.work(self._stream(stream), run)

    def graph_conditional(self, stream: Stream | None, handle: int, kind: int, nbodies: int,
                          run_body: Callable[[int], None]) -> None:
        """A conditional graph node on stream (docs/graphs.md): when the stream reaches it, reads the 4-byte
        condition at handle (set by cudaGraphSetConditional in the graph's kernels) and runs body
        run_body(i) at once, in stream order: IF (kind 0) body 0 when non-zero, else body 1 if there is one;
        WHILE (1) body 0 as long as it is non-zero; SWITCH (2) body value if value < nbodies. A failed kernel
        of a body ends a WHILE loop, and so does the kernel watchdog's time limit (LAUNCH_TIMEOUT)."""
        mem = self._check(handle, 4, "conditional node handle")
        s = self._stream(stream)

        def value() -> int:
            return int.from_bytes(bytes(mem.read(handle, 4)), "little")

        def run() -> None:
            nested = s in self.sched.inline  # a conditional node in a body
            self.sched.inline.add(s)
            try:
                v = value()
                if kind == 0:
                    if v or nbodies > 1:
                        run_body(0 if v else 1)
                elif kind == 1:
                    errors = len(self.sched.errors)
                    # a loop that never ends would hold the session forever: the kernel watchdog's limit
                    limit = time.monotonic() + float(os.environ.get("GPUSHIM_PTX_WATCHDOG_S", "120"))
                    while v and len(self.sched.errors) == errors:
                        if time.monotonic() > limit:
                            raise CudaError(Err.LAUNCH_TIMEOUT, "conditional WHILE graph node: still looping "
                                            "after the watchdog's limit ($GPUSHIM_PTX_WATCHDOG_S)")
                        run_body(0)
                        v = value()
                elif v < nbodies:
                    run_body(v)
            finally:
                if not nested:
                    self.sched.inline.discard(s)

        self.sched.work(s, run)

    def memset(self, stream: Stream | None, dst: int, value: int, n: int) -> None:
        mem = self.memory_of(dst)
        off = mem.check_range(dst, n, "cudaMemset")
        s = self._stream(stream)
        if self.sched.runs_now(s):  # just checked: fill the arena directly (the hot path of small memsets)
            s.submitted += 1
            mem.arena[off : off + n].fill(value & 0xFF)  # fill: 0.4 µs for 4 KiB against 0.65 for a slice store
            s.completed += 1
        else:  # checked again when it runs: the allocation may be freed by then
            self.sched.work(s, lambda: mem.fill(dst, value, n))

    def memset_2d(self, stream: Stream | None, dst: int, pitch: int, value: int, width: int, height: int) -> None:
        mem = self._rows(dst, pitch, width, height, "cudaMemset2D")
        if width == 0 or height == 0:
            return  # CUDA: an empty 2D memset does nothing

        def run() -> None:
            for y in range(height):
                mem.fill(dst + y * pitch, value, width)

        self.sched.work(self._stream(stream), run)

    # -- streams and events ------------------------------------------------------------------------------
    def default_stream(self, dev: int) -> Stream:
        return self.sched.legacy_stream(dev)

    def stream_create(self, dev: int, flags: int, priority: int) -> Stream:
        self._mem(dev)
        least, greatest = self.backend.devices()[dev].priority_range
        priority = min(max(priority, greatest), least)  # CUDA clamps to the device's range
        return self.sched.create(dev, flags, priority)

    def stream_destroy(self, s: Stream) -> None:
        self.sched.destroy(s)  # type: ignore[arg-type]

    def stream_idle(self, s: Stream) -> bool:
        return self.sched.idle(self._stream(s))

    def device_idle(self, dev: int) -> bool:
        return self.sched.device_idle(dev)

    def sync_point(self, s: Stream) -> Callable[[], bool]:
        return self.sched.sync_point(self._stream(s))

    def stream_wait_event(self, s: Stream, e: Event) -> None:
        self.sched.wait_event(self._stream(s), e)  # type: ignore[arg-type]

    def host_func(self, s: Stream, notify: Callable[[], None]) -> Callable[[], None]:
        return self.sched.host_func(self._stream(s), notify)

    def event_create(self, dev: int, flags: int) -> Event:
        self._mem(dev)
        return EmuEvent(dev, flags)

    def event_record(self, e: Event, s: Stream) -> None:
        self.sched.record(e, self._stream(s, e.device))  # type: ignore[arg-type]

    def event_idle(self, e: Event) -> bool:
        return self.sched.event_idle(e)  # type: ignore[arg-type]

    def event_elapsed_ms(self, start: Event, end: Event) -> float:
        for e in (start, end):
            assert isinstance(e, EmuEvent)
            if e.flags & EVENT_DISABLE_TIMING:
                raise CudaError(Err.INVALID_RESOURCE_HANDLE, "an event created with cudaEventDisableTiming has no time")
            if e.recorded == 0:
                raise CudaError(Err.INVALID_RESOURCE_HANDLE, "the event was never recorded")
            if e.completed < e.recorded or e.time_ns is None:
                raise CudaError(Err.NOT_READY, "the event has not completed yet")
        return (end.time_ns - start.time_ns) / 1e6  # type: ignore[union-attr,operator]

    def event_destroy(self, e: Event) -> None:
        pass

    # -- modules and kernels -------------------------------------------------------------------------------
    def load_module(self, key: bytes, fatbin: bytes) -> None:
        if key not in self.modules:
            from gpushim.backends.emulator.kernels import EmuModule  # the engine: see preload

            m = self.backend.model
            mod = EmuModule.from_fatbin(fatbin, (m.major, m.minor), self.policy)
            self.modules[key] = mod
            what = mod.choice or (f"refused: {mod.load_error.message}" if mod.load_error else "")
            if what:  # the image the emulated driver takes, and how (native, re-labelled, decompressed)
                log.info("module %s: %s", key.hex()[:12], what)

    def has_module(self, key: bytes) -> bool:
        return key in self.modules

    def unload_module(self, key: bytes) -> None:
        """cuModuleUnload: the module and its variables are gone (a later use loads the image afresh)."""
        mod = self.modules.pop(key, None)
        for dev, syms in (mod.symbols if mod else {}).items():
            for addr in syms.values():
                self.memories[dev].free(addr)

    def _module(self, key: bytes) -> EmuModule:
        mod = self.modules.get(key)
        if mod is None:
            raise CudaError(Err.INVALID_KERNEL_IMAGE, "the module was not loaded in this session")
        return mod

    def function_info(self, dev: int, key: bytes, name: str) -> tuple[list[list[int]], int, dict[str, Any]]:
        self._mem(dev)
        mod = self._module(key)
        info = mod.kernel(name)
        return [[p.offset, p.size] for p in info.params], info.param_bytes, mod.function_attributes(name)

    def launch(self, dev: int, key: bytes, name: str, grid: list[int], block: list[int], shared: int,
               stream: Stream | None, params: bytes, attrs: LaunchAttrs | None = None) -> None:
        g, b = tuple(grid), tuple(block)
        ck = (key, name, dev, g, b, shared, len(params))
        hit = self._launches.get(ck) if attrs is None else None  # launches with attributes check them each time
        # a configuration that passed the checks before, of the same module object with the same variables
        if hit is not None and self.modules.get(key) is hit[0] and hit[0].symbols.get(dev) is hit[2]:
            if hit[4] is not None:  # an empty kernel this configuration already ran: only the counting is left
                self.sched.work(self._stream(stream, dev), hit[4])
                return
            mod, eng, symbols, mem, _ = hit
        else:
            mem = self._mem(dev)
            mod = self._module(key)
            info = mod.kernel(name, launch=True)
            self._check_launch(dev, grid, block, shared, info.static_shared_bytes)
            if attrs is not None:
                # the cluster shape is checked as CUDA does; the other attributes shape scheduling and caching
                # on a GPU, not results, and are ignored here (gpushim/backends/launch_attrs.py)
                check_cluster(attrs, grid, bool(self.backend.devices()[dev].props.get("clusterLaunch")),
                              mod.function_attributes(name))
            symbols = mod.place_symbols(dev, mem)
            eng = mod.engine(name)
            if len(self._launches) >= 256:
                self._launches.clear()
            hit = self._launches[ck] = [mod, eng, symbols, mem, None]
        args = (g, b, shared, bytes(params))
        entry = hit
        in_graph = getattr(self, "graph_segment", False)  # a host graph's kernel: its tail launches wait for it

        def run() -> None:
            if name in eng.trivial:
                # An empty kernel (gpushim/ptx/module.py: every thread returns at once) does no work and touches
                # nothing: it runs without taking the device's token, and is counted as the session's kernel.
                stats = eng.launch(name, *args, self._kernel_memory(dev, mem), symbols, self.output)
                self.note_kernel(dev)
                if not self.peers.get(dev):  # it passed the engine's checks: later launches only count
                    entry[4] = self._count_empty(dev, stats.thread_instructions)
            else:
                with self.gate(dev) as charge:
                    devrt.set_graph_kernel(in_graph)
                    try:
                        stats = eng.launch(name, *args, self._kernel_memory(dev, mem), symbols, self.output)
                    finally:
                        devrt.set_graph_kernel(False)
                    charge["work"] = stats.thread_instructions  # fair share charges work, not the host's noise
            self.launches += 1
            self.thread_instructions += stats.thread_instructions
            self.kernel_wall_s += stats.wall_s
            if log.isEnabledFor(logging.DEBUG):
                log.debug("launch %s grid %s block %s: %d blocks, %d thread-instructions in %.3f ms (%.3g/s)",
                          name, args[0], args[1], stats.blocks, stats.thread_instructions, stats.wall_s * 1e3,
                          stats.thread_instructions / stats.wall_s if stats.wall_s else 0.0)

        self.sched.work(self._stream(stream, dev), run)

    def _count_empty(self, dev: int, threads: int) -> Callable[[], None]:
        """The whole launch of an empty kernel whose configuration the engine accepted before (the same module,
        variables and device memory: launch() checks): what PtxModule.launch would count, nothing else."""
        note = self.note_kernel

        def run() -> None:
            note(dev)
            self.launches += 1
            self.thread_instructions += threads

        run.threads = threads  # type: ignore[attr-defined]  # what the worker's C loop counts (fastpath.py)
        return run

    def device_graph(self, handle: int, items: list[tuple] | None) -> None:
        """A graph a kernel may launch with cudaGraphLaunch(handle) (gpushim/ptx/devrt.py), or None to forget
        it: ("kernel", dev, module key, name, grid, block, shared, params), ("set", dst, byte, n) and
        ("copy", dst, src, n), in order. Its kernels must be in one module, on one device."""
        if items is None:
            for mem in self.memories:
                devrt.set_device_graph(mem, handle, None)
            return
        mods, emus, devs, pend = set(), {}, set(), []
        for it in items:
            if it[0] == "kernel":
                _, dev, key, name, grid, block, shared, params = it
                mod = self._module(key)
                mod.kernel(name)
                mods.add(mod.engine(name))
                emus[id(mod)] = mod
                devs.add(dev)
                pend.append(devrt.Pending(name, tuple(grid), tuple(block), shared, bytes(params)))
            else:
                pend.append(devrt.Pending("", (1, 1, 1), (1, 1, 1), 0, b"", tuple(it)))
        if len(mods) > 1 or len(devs) > 1:
            raise CudaError(Err.NOT_SUPPORTED, "device graph launch of a graph whose kernels are in several "
                            "modules or on several devices")
        dev = devs.pop() if devs else 0
        devrt.set_device_graph(self._mem(dev), handle, (mods.pop() if mods else None, pend,
                                                        (next(iter(emus.values()), None), dev)))

    def flush_device_tails(self, stream: Stream | None) -> None:
        """At the end of a host-launched graph, in its stream's order: the device graphs its kernels tail-launched
        (CUDA runs a tail launch once the launching graph is complete)."""

        def run() -> None:
            for mem in self.memories:
                for rec in devrt.take_deferred(mem):
                    emu, dev = rec[2]
                    symbols = emu.place_symbols(dev, mem) if emu is not None else {}
                    with self.gate(dev):
                        devrt.run_graph(self._kernel_memory(dev, mem), symbols, self.output, rec)

        self.sched.work(self._stream(stream, 0), run)

    def set_peer_access(self, dev: int, peer: int, enable: bool) -> None:
        """cudaDeviceEnablePeerAccess / DisablePeerAccess: whether kernels on dev may access peer's memory
        (CUDA: without it, such an access is an error)."""
        self._mem(dev), self._mem(peer)  # both exist
        self._launches.clear()  # kernels now see another memory (PeerView): their launches are checked afresh
        if enable and self.peer_space is None:
            self.peer_space = PeerSpace(self.memories)
            self.vmm.replay(self.peer_space)
        s = self.peers.setdefault(dev, set())
        if enable:
            s.add(peer)
        else:
            s.discard(peer)

    def _kernel_memory(self, dev: int, mem: DeviceMemory) -> DeviceMemory | PeerView:
        peers = self.peers.get(dev)
        if not peers or self.peer_space is None:
            return mem
        return PeerView(self.peer_space, mem, [self.memories[p] for p in sorted(peers)])

    def _check_launch(self, dev: int, grid: list[int], block: list[int], shared: int, static_shared: int) -> None:
        p = self.backend.devices()[dev].props
        if len(grid) != 3 or len(block) != 3 or min(grid) < 1 or min(block) < 1:
            raise CudaError(Err.INVALID_CONFIGURATION, f"grid {grid} / block {block}: every dimension must be >= 1")
        (bx, by, bz), (gx, gy, gz) = block, grid  # written out: this runs on every launch
        tx, ty, tz = p["maxThreadsDim"]
        if bx > tx or by > ty or bz > tz or bx * by * bz > p["maxThreadsPerBlock"]:
            raise CudaError(Err.INVALID_CONFIGURATION, f"block {block} exceeds the device's limits")
        mx, my, mz = p["maxGridSize"]
        if gx > mx or gy > my or gz > mz:
            raise CudaError(Err.INVALID_CONFIGURATION, f"grid {grid} exceeds the device's limits")
        if static_shared + shared > p["sharedMemPerBlockOptin"]:
            raise CudaError(Err.INVALID_CONFIGURATION,
                            f"{static_shared + shared} bytes of shared memory exceed the device's "
                            f"{p['sharedMemPerBlockOptin']}")

    def symbol_info(self, dev: int, key: bytes, name: str) -> tuple[int, int]:
        mod = self._module(key)
        eng = mod.engine()
        g = eng.globals.get(name)
        if g is None:
            raise CudaError(Err.INVALID_SYMBOL, f"module variable {name} is not in its module")
        return mod.place_symbols(dev, self._mem(dev))[name], g.size

    def stats(self) -> dict[str, Any]:
        launches, instructions = self.fast_counts()
        return {"launches": self.launches + launches, "thread_instructions": self.thread_instructions + instructions,
                "kernel_seconds": round(self.kernel_wall_s, 6)}

    def take_async_error(self) -> tuple[int, str] | None:
        if self.sched.errors:
            err = self.sched.errors[0]
            self.sched.errors.clear()
            return err
        return None

    # -- lifetime ----------------------------------------------------------------------------------------
    def reset_device(self, dev: int) -> None:
        mem = self._mem(dev)
        self.vmm.reset(dev)
        for a in list(mem.allocations()):
            mem.free(a.addr)

    def close(self) -> None:
        self.vmm.reset()  # before the peer span goes: unmapping restores pages there too
        if self.peer_space is not None:
            self.peer_space.close()
            self.peer_space = None
        for m in self.memories:
            for a in list(m.allocations()):
                m.free(a.addr)
        self.account.close()
