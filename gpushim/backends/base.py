"""The backend interface (DESIGN decision 8): what the adaptation layer needs from a GPU, real or emulated.

A `Backend` describes the hardware and is created in the supervisor without touching CUDA; each session's
worker process calls `open_session()`, which is where a backend may initialise CUDA. Streams and events
are backend objects with CUDA's ordering rules; the session maps the client's handles onto them.
Every method raises `gpushim.cuda_errors.CudaError` for failures a CUDA program would see.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpushim.backends.launch_attrs import LaunchAttrs
from gpushim.backends.tensormap import TiledMap
from gpushim.cuda_errors import CudaError, Err


@dataclass
class DeviceInfo:
    ordinal: int
    name: str
    props: dict[str, Any]  # cudaDeviceProp field name -> value, every field any runtime version has
    attributes: dict[int, int]  # cudaDeviceAttr value -> value
    uuid: bytes = b""
    pci_bus_id: str = ""
    priority_range: tuple[int, int] = (0, -5)  # (least, greatest)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class LaunchResult:
    thread_instructions: int = 0
    wall_s: float = 0.0


class Stream(ABC):
    """A backend stream."""

    device: int
    flags: int
    priority: int


class Event(ABC):
    device: int
    flags: int


class BackendSession(ABC):
    """One client's view of the backend, living in that client's worker process."""

    policy: Any = None  # the session's adaptation policy (gpushim.compat.policy.Policy), set by the session

    # -- memory ----------------------------------------------------------------------------------------
    @abstractmethod
    def malloc(self, dev: int, size: int) -> int: ...
    @abstractmethod
    def malloc_pitch(self, dev: int, width: int, height: int) -> tuple[int, int]: ...
    def malloc_managed(self, dev: int, size: int) -> tuple[int, int, int, int]:
        """(ptr, pid, fd, base): managed memory the client maps from /proc/pid/fd/fd at offset ptr - base."""
        raise CudaError(Err.NOT_SUPPORTED, "managed memory needs the emulator backend on the client's host")

    @abstractmethod
    def free(self, ptr: int) -> None: ...
    @abstractmethod
    def free_async(self, stream: Stream | None, ptr: int) -> None:
        """Frees ptr when the stream reaches this point (stream-ordered allocation)."""
    @abstractmethod
    def mem_info(self, dev: int) -> tuple[int, int]: ...
    @abstractmethod
    def pointer_info(self, ptr: int) -> tuple[int, int, int, int]:
        """(memory type, device, allocation base, allocation size); type 0 when unknown."""
    @abstractmethod
    def allocations(self) -> list[tuple[int, int, int]]:
        """(device, ptr, size) of every live allocation, for status and leak checks."""

    # -- work in stream order (the callable runs when the stream reaches it) ------------------------------
    @abstractmethod
    def write(self, stream: Stream | None, dst: int, data: bytes | memoryview) -> None: ...
    @abstractmethod
    def read(self, stream: Stream | None, src: int, n: int) -> bytes:
        """Synchronous: waits for the stream, then copies."""
    @abstractmethod
    def write_shared(self, stream: Stream | None, dst: int, source: memoryview) -> None:
        """Host memory shared with the client (pinned): read when the stream reaches the copy, no snapshot."""
    @abstractmethod
    def read_into(self, stream: Stream | None, src: int, out: memoryview) -> None:
        """Queued device-to-host copy into host memory shared with the client."""
    @abstractmethod
    def copy(self, stream: Stream | None, dst: int, src: int, n: int) -> None: ...
    @abstractmethod
    def write_2d(self, stream: Stream | None, dst: int, dpitch: int, width: int, height: int, data: bytes) -> None: ...
    @abstractmethod
    def read_2d(self, stream: Stream | None, src: int, spitch: int, width: int, height: int) -> bytes: ...
    @abstractmethod
    def copy_2d(self, stream: Stream | None, dst: int, dpitch: int, src: int, spitch: int, width: int,
                height: int) -> None: ...
    @abstractmethod
    def memset(self, stream: Stream | None, dst: int, value: int, n: int) -> None: ...

    # Synchronous reads answer later (docs/semantics.md): `ready()` says when the copy, queued in stream order
    # now, has happened, `result()` then gives the bytes. These defaults wait for the stream, then copy.
    def read_ordered(self, stream: Stream, src: int, n: int) -> tuple[Callable[[], bool], Callable[[], Any]]:
        return self.sync_point(stream), lambda: self.read(stream, src, n)

    def read_2d_ordered(self, stream: Stream, src: int, spitch: int, width: int,
                        height: int) -> tuple[Callable[[], bool], Callable[[], Any]]:
        return self.sync_point(stream), lambda: self.read_2d(stream, src, spitch, width, height)

    def set_peer_access(self, dev: int, peer: int, enable: bool) -> None:  # noqa: B027 (optional: a no-op)
        """cudaDeviceEnablePeerAccess / DisablePeerAccess for this session's kernels. This default does nothing:
        a backend on real GPUs has the driver's peer access."""

    def copy_peer(self, stream: Stream, dst: int, src: int, n: int, devices: list[int]) -> None:
        """cudaMemcpyPeer: serialised with all pending and later work of `devices`. This default only orders
        the copy on `stream` (the current device's legacy stream)."""
        self.copy(stream, dst, src, n)
    @abstractmethod
    def memset_2d(self, stream: Stream | None, dst: int, pitch: int, value: int, width: int, height: int) -> None: ...

    # -- streams and events ------------------------------------------------------------------------------
    @abstractmethod
    def default_stream(self, dev: int) -> Stream: ...
    @abstractmethod
    def stream_create(self, dev: int, flags: int, priority: int) -> Stream: ...
    @abstractmethod
    def stream_destroy(self, s: Stream) -> None: ...
    @abstractmethod
    def stream_idle(self, s: Stream) -> bool: ...
    @abstractmethod
    def device_idle(self, dev: int) -> bool: ...
    def sync_point(self, s: Stream) -> Callable[[], bool]:
        """A predicate that is true once what cudaStreamSynchronize(s) issued now waits for has completed (for
        a legacy stream: also earlier work of its device's blocking streams, never non-blocking ones)."""
        return lambda: self.stream_idle(s)
    @abstractmethod
    def stream_wait_event(self, s: Stream, e: Event) -> None: ...
    @abstractmethod
    def host_func(self, s: Stream, notify: Callable[[], None]) -> Callable[[], None]:
        """Queues a host function: `notify()` is called when the stream reaches it; the stream then waits
        until the returned `done()` is called (the client ran the function)."""
    @abstractmethod
    def event_create(self, dev: int, flags: int) -> Event: ...
    @abstractmethod
    def event_record(self, e: Event, s: Stream) -> None: ...
    @abstractmethod
    def event_idle(self, e: Event) -> bool: ...
    @abstractmethod
    def event_elapsed_ms(self, start: Event, end: Event) -> float: ...
    @abstractmethod
    def event_destroy(self, e: Event) -> None: ...

    # -- modules and kernels (a module is a client's fat binary, named by its SHA-256) ---------------------
    @abstractmethod
    def load_module(self, key: bytes, fatbin: bytes) -> None: ...
    @abstractmethod
    def has_module(self, key: bytes) -> bool: ...
    @abstractmethod
    def function_info(self, dev: int, key: bytes, name: str) -> tuple[list[list[int]], int, dict[str, Any]]:
        """([[offset, size], ...], parameter bytes, cudaFuncAttributes fields) of a kernel."""
    @abstractmethod
    def launch(self, dev: int, key: bytes, name: str, grid: list[int], block: list[int], shared: int,
               stream: Stream | None, params: bytes, attrs: LaunchAttrs | None = None) -> None:
        """Checks the configuration at once (CudaError INVALID_CONFIGURATION), then queues the kernel.
        attrs: cuLaunchKernelEx's launch attributes (gpushim/backends/launch_attrs.py), events taken out."""
    @abstractmethod
    def symbol_info(self, dev: int, key: bytes, name: str) -> tuple[int, int]:
        """(device address, size) of a module variable."""

    def tensor_map_encode(self, dev: int, m: TiledMap) -> bytes:
        """cuTensorMapEncodeTiled's 128-byte descriptor, as the device's driver encodes it."""
        raise CudaError(Err.NOT_SUPPORTED, "cuTensorMapEncodeTiled: this backend cannot encode TMA descriptors "
                                           "(their layout is the driver's own; the emulator does not run TMA)")

    def tensor_map_replace_address(self, dev: int, address: int, tensormap: bytes) -> bytes:
        """cuTensorMapReplaceAddress on a descriptor from tensor_map_encode."""
        raise CudaError(Err.NOT_SUPPORTED, "cuTensorMapReplaceAddress: this backend cannot change TMA descriptors "
                                           "(their layout is the driver's own; the emulator does not run TMA)")

    # -- textures and surfaces -------------------------------------------------------------------------------
    def texture_create(self, dev: int, surface: bool, fields: list[int]) -> int:
        raise CudaError(Err.NOT_SUPPORTED, "texture and surface objects are not supported by this backend yet")

    def texture_check(self, handle: int) -> None:
        raise CudaError(Err.INVALID_VALUE, f"{handle:#x} is not a texture or surface object")

    def texture_destroy(self, handle: int) -> None:
        self.texture_check(handle)

    def set_limit(self, dev: int, limit: int, value: int) -> None:  # noqa: B027 - most limits need no action
        """Applies a cudaLimit the backend acts on (the session keeps the values); by default none."""

    def stats(self) -> dict[str, Any]:
        """Counters for status and logs (kernel launches and the like); backends add what they measure."""
        return {}

    # -- faults in asynchronous work ---------------------------------------------------------------------
    @abstractmethod
    def take_async_error(self) -> tuple[int, str] | None:
        """The first error raised by queued work since the last call, if any."""

    # -- lifetime ----------------------------------------------------------------------------------------
    @abstractmethod
    def reset_device(self, dev: int) -> None: ...
    @abstractmethod
    def close(self) -> None:
        """Frees everything the session holds."""


class Backend(ABC):
    name: str

    @abstractmethod
    def devices(self) -> list[DeviceInfo]: ...
    def preload(self) -> None:
        """Imports what sessions need and the server did not need to start; the server calls it once it listens,
        before it forks any session's worker (which then inherit it). Nothing by default."""
        return None
    @abstractmethod
    def driver_version(self) -> int:
        """CUDA driver API version, e.g. 13000."""
    @abstractmethod
    def describe(self) -> str:
        """One line for the server's log: what this backend is and why it was chosen."""
    @abstractmethod
    def open_session(self, output: Callable[[bytes], None], quota: int | None = None) -> BackendSession:
        """`output` receives kernel printf text, in order; `quota` bounds the device memory the session may
        hold (its `account`, a gpushim.backends.accounting.MemoryAccount, counts every allocation)."""
