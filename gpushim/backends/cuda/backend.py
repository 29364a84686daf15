"""The cuda backend: the backend interface (gpushim/backends/base.py) on real NVIDIA GPUs.

The supervisor side (CudaBackend) never initialises CUDA: NVML names the GPUs and the driver version, and a
short-lived child process reads every device attribute (discovery.py). Each session's worker process opens
a CudaSession, which initialises CUDA and uses each device's primary context, as the runtime does.

Nothing in a session ever blocks on a stream: a host function may hold one back until the client answers,
and the worker's main thread must stay free to read that answer. Idle checks use cuStreamQuery and
cuEventQuery; the worker polls them through `tick()` while a reply waits (gpushim/server/worker.py).
"""

from __future__ import annotations

import bisect
import ctypes
import fcntl
import importlib.metadata
import importlib.util
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
import numpy as np

from gpushim.backends.accounting import MemoryAccount
from gpushim.backends.base import Backend, BackendSession, DeviceInfo, Event, Stream
from gpushim.backends.cuda import discovery
from gpushim.backends.cuda.errors import check, cuda_error
from gpushim.backends.cuda.hostfn import TRAMPOLINE_ADDRESS, HostCall, Signals, install_hub
from gpushim.backends.cuda.launch_ex import launch_config
from gpushim.backends.cuda.modules import CudaModule
from gpushim.backends.cuda.params import PackedParams
from gpushim.backends.cuda.staging import CHUNK, StagingPool
from gpushim.backends.cuda.textures import CudaTextures
from gpushim.backends.cuda.vmm import CudaVmm
from gpushim.backends.launch_attrs import PORTABLE_CLUSTER, LaunchAttrs
from gpushim.backends.tensormap import TiledMap
from gpushim.cuda_errors import CudaError, Err

NON_BLOCKING = 0x1
NOT_READY = 600
NOT_FOUND = 500
CU_STREAM_LEGACY = 0x1
DEFAULT_SHARED_LIMIT = 48 * 1024  # dynamic shared memory a kernel may use without opting in


class CudaUnavailable(click.ClickException):
    """The cuda backend cannot be used here; the message says what is missing."""


def bindings_version() -> str | None:
    for dist in ("cuda-bindings", "cuda-python"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _has_bindings() -> bool:
    try:
        return importlib.util.find_spec("cuda.bindings") is not None
    except ModuleNotFoundError:  # no `cuda` package at all
        return False


def check_bindings_for_driver(bindings: str | None, cuda_version: int) -> str | None:
    """Why this cuda-bindings cannot drive this driver, or None. cuda-bindings 13.x needs a CUDA 13 driver
    (>= 580); 12.x works with any driver >= 525 (CUDA-FACTS §6: bindings resolve functions by version)."""
    if bindings is None:
        return "cuda-python is not installed: pip install 'gpushim[cuda]'"
    try:
        major = int(bindings.split(".")[0])
    except ValueError:
        return None
    if cuda_version < 12000:
        return f"the driver supports CUDA {cuda_version // 1000}.x; the cuda backend needs a CUDA 12 driver or newer"
    if major * 1000 > cuda_version:
        d = f"{cuda_version // 1000}.{cuda_version % 1000 // 10}"
        return (f"cuda-bindings {bindings} needs a CUDA {major}.x driver, but this driver supports CUDA {d}: "
                f"pip install 'cuda-bindings>=12.4,<{cuda_version // 1000 + 1}'")
    return None


class CudaBackend(Backend):
    name = "cuda"

    def __init__(self, reason: str = "", nvml: Any = None, driver_devices: dict[str, Any] | None = None) -> None:
        self.reason = reason
        if driver_devices is None and not _has_bindings():
            raise CudaUnavailable("--backend cuda: cuda-python is not installed (pip install 'gpushim[cuda]')")
        try:
            self.nvml = discovery.nvml_snapshot(nvml)
        except Exception as e:  # pynvml.NVMLError or ImportError
            raise CudaUnavailable(f"--backend cuda: NVML cannot describe the GPUs: {e}") from None
        self.bindings = bindings_version()
        problem = check_bindings_for_driver(self.bindings, self.nvml.cuda_version) if driver_devices is None else None
        if problem:
            raise CudaUnavailable(f"--backend cuda: {problem}")
        try:
            raw = driver_devices if driver_devices is not None else discovery.read_driver_devices()
        except RuntimeError as e:
            raise CudaUnavailable(f"--backend cuda: {e}") from None
        self._driver = int(raw["driver_version"])
        devs = raw["devices"]
        self._devices = [discovery.device_info_from_driver(r, g)
                         for r, g in zip(devs, discovery.match_nvml(devs, self.nvml), strict=True)]
        if not self._devices:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            why = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
            raise CudaUnavailable(f"--backend cuda: CUDA sees no GPU{why}")

    def devices(self) -> list[DeviceInfo]:
        return self._devices

    def driver_version(self) -> int:
        return self._driver

    def describe(self) -> str:
        d = self._driver
        names: dict[str, int] = {}
        for dev in self._devices:
            names[dev.name] = names.get(dev.name, 0) + 1
        gpus = ", ".join(f"{n} x {name}" for name, n in names.items())
        cc = {f"sm_{dev.props['major']}{dev.props['minor']}" for dev in self._devices}
        mig = [dev.ordinal for dev in self._devices if dev.extra.get("mig_enabled")]
        why = f" ({self.reason})" if self.reason else ""
        return (f"cuda backend{why}: {gpus} ({', '.join(sorted(cc))}), NVIDIA driver {self.nvml.driver_version}, "
                f"driver API {d // 1000}.{d % 1000 // 10}, cuda-bindings {self.bindings}"
                + (f", MIG enabled on {mig}" if mig else ""))

    def open_session(self, output: Callable[[bytes], None], quota: int | None = None) -> CudaSession:
        s = CudaSession(self, output)
        s.account = MemoryAccount(quota)  # the GPU bounds its own memory; the session's quota is counted here
        return s


# -- session objects --------------------------------------------------------------------------------------
class CudaStream(Stream):
    def __init__(self, device: int, flags: int, priority: int, handle: Any, legacy: bool = False) -> None:
        self.device = device
        self.flags = flags
        self.priority = priority
        self.handle = handle
        self.legacy = legacy
        self.pending_host = 0  # host functions queued and not finished by the client
        self.signal: tuple[int, int] | None = None  # (host, device) address of its slot in Signals
        self.signal_target = 0

    @property
    def blocking(self) -> bool:
        return not self.legacy and not (self.flags & NON_BLOCKING)


class CudaEvent(Event):
    def __init__(self, device: int, flags: int, handle: Any) -> None:
        self.device = device
        self.flags = flags
        self.handle = handle


@dataclass
class _Alloc:
    addr: int
    size: int
    device: int
    kind: str = "device"  # device | pitched | symbol | vmm (an accessible range mapped by cuMemMap: vmm.py)


_FUNC_ATTRS = {
    "maxThreadsPerBlock": "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK",
    "sharedSizeBytes": "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES",
    "constSizeBytes": "CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES",
    "localSizeBytes": "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES",
    "numRegs": "CU_FUNC_ATTRIBUTE_NUM_REGS",
    "ptxVersion": "CU_FUNC_ATTRIBUTE_PTX_VERSION",
    "binaryVersion": "CU_FUNC_ATTRIBUTE_BINARY_VERSION",
    "cacheModeCA": "CU_FUNC_ATTRIBUTE_CACHE_MODE_CA",
    "maxDynamicSharedSizeBytes": "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES",
    "preferredShmemCarveout": "CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT",
    "clusterDimMustBeSet": "CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET",
    "requiredClusterWidth": "CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH",
    "requiredClusterHeight": "CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT",
    "requiredClusterDepth": "CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH",
    "clusterSchedulingPolicyPreference": "CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE",
    "nonPortableClusterSizeAllowed": "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED",
}


class _PrintfCapture:
    """Kernel printf: the driver writes it to the process's stdout when it flushes the device's printf
    buffer (at synchronising calls). The worker's fd 1 becomes an unlinked file opened for appending, read
    after each flush and handed to the session's `output`. A file, not a pipe: the driver writes from our
    own thread, so a full pipe would deadlock."""

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None)
        self.libc.fflush(None)
        with tempfile.TemporaryFile() as f:  # unlinked at once
            self.fd = os.dup(f.fileno())
        fcntl.fcntl(self.fd, fcntl.F_SETFL, fcntl.fcntl(self.fd, fcntl.F_GETFL) | os.O_APPEND)
        os.dup2(self.fd, 1)
        self.pos = 0

    def collect(self) -> bytes:
        self.libc.fflush(None)
        end = os.fstat(self.fd).st_size
        if end <= self.pos:
            return b""
        data = os.pread(self.fd, end - self.pos, self.pos)
        self.pos += len(data)
        if self.pos > (1 << 20):
            os.ftruncate(self.fd, 0)
            self.pos = 0
        return data


class CudaSession(BackendSession):
    """One client's GPUs, in its worker process."""

    def __init__(self, backend: CudaBackend, output: Callable[[bytes], None], driver: Any = None,
                 capture_printf: bool = True) -> None:
        if driver is None:
            from cuda.bindings import driver
        cu = self.cu = driver
        self.backend = backend
        self.output = output
        self.account = MemoryAccount()
        check(cu.cuInit(0), "cuInit")
        self.cudevs = [check(cu.cuDeviceGet(i), "cuDeviceGet") for i in range(len(backend.devices()))]
        self.ctx: dict[int, Any] = {}
        self.current: int | None = None
        self.allocs: dict[int, _Alloc] = {}
        self.starts: list[int] = []
        self.streams: list[CudaStream] = []
        self.legacy: dict[int, CudaStream] = {}
        self.draining: list[tuple[int, Any]] = []  # (device, event) recorded on destroyed busy streams
        self.modules: dict[bytes, CudaModule] = {}
        self.module_symbols: dict[bytes, set[int]] = {}  # module -> addresses of its variables in self.allocs
        self.errors: list[tuple[int, str]] = []
        self.hub = install_hub()
        self.wakeup_fd = self.hub.wake_r  # the worker's select loop watches it (host functions reached)
        self.staging = StagingPool(cu, self._async_error)
        self.signals = Signals(cu, check)
        self.stream_mem_ops: bool | None = None  # cuStreamWaitValue32 usable? (probed at the first host function)
        self.printf_dirty = False
        self.wait_since: float | None = None
        self.printf: _PrintfCapture | None = None
        self.gate: Any = None  # the server scheduler's InflightGate (attach_scheduler), or None
        self.tex = CudaTextures(self)
        self.vmm = CudaVmm(self)  # cuMemAddressReserve / cuMemCreate / cuMemMap (vmm.py)
        if capture_printf:
            try:
                self.printf = _PrintfCapture()
            except OSError:
                pass

    # -- plumbing ----------------------------------------------------------------------------------------
    def _async_error(self, err: int, what: str) -> None:
        e = cuda_error(err, what)
        if not self.errors or self.errors[-1][0] != e.code:
            self.errors.append((e.code, e.message))

    def _dev(self, dev: int) -> int:
        if not isinstance(dev, int) or not 0 <= dev < len(self.cudevs):
            raise CudaError(Err.INVALID_DEVICE, f"device {dev} does not exist")
        return dev

    def _use(self, dev: int) -> None:
        """Makes dev's primary context current (retaining it the first time)."""
        if dev == self.current:
            return
        cu = self.cu
        ctx = self.ctx.get(self._dev(dev))
        if ctx is None:
            ctx = self.ctx[dev] = check(cu.cuDevicePrimaryCtxRetain(self.cudevs[dev]), "cuDevicePrimaryCtxRetain")
            check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
            self.current = dev
            try:
                least, greatest = check(cu.cuCtxGetStreamPriorityRange(), "cuCtxGetStreamPriorityRange")
                self.backend.devices()[dev].priority_range = (int(least), int(greatest))
            except CudaError:
                pass
            return
        check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        self.current = dev

    def _query(self, err: Any, what: str) -> bool:
        """True when a cuStreamQuery/cuEventQuery result says the work completed. A fault in that work is
        recorded for the session (it is sticky in the context) and counts as completed."""
        e = int(err)
        if e == 0:
            return True
        if e == NOT_READY:
            return False
        self._async_error(e, what)
        return True

    def _stream_done(self, s: CudaStream) -> bool:
        return self._query(self.cu.cuStreamQuery(s.handle)[0], "queued work")

    def _flush_printf(self, sync: Callable[[], tuple], everything: bool = False) -> None:
        """After a launch, a synchronising call on completed work makes the driver write kernel printf.
        Only a whole idle device (`everything`) proves no launched kernel can print any more."""
        if not self.printf_dirty or self.printf is None:
            return
        if everything:
            self.printf_dirty = False
        err = int(sync()[0])
        if err not in (0, NOT_READY):
            self._async_error(err, "queued work")
        data = self.printf.collect()
        if data:
            self.output(data)

    # -- the worker's poll ------------------------------------------------------------------------------------
    def tick(self, waiting: bool) -> float | None:
        """Called by the worker before each select: tells the client about host functions its streams
        reached, and returns how long select may sleep (None: until a frame or a host function arrives;
        while a reply waits on GPU work: spin briefly, then poll every 0.2 ms, then every 2 ms)."""
        self.hub.deliver()
        if not waiting:
            self.wait_since = None
            return None
        now = time.monotonic()
        if self.wait_since is None:
            self.wait_since = now
        waited = now - self.wait_since
        return 0.0 if waited < 0.002 else 0.0002 if waited < 0.05 else 0.002

    # -- memory ------------------------------------------------------------------------------------------
    def _find(self, ptr: int) -> _Alloc | None:
        i = bisect.bisect_right(self.starts, ptr) - 1
        if i < 0:
            return None
        a = self.allocs[self.starts[i]]
        return a if ptr < a.addr + max(a.size, 1) else None

    def _add(self, a: _Alloc) -> None:
        if a.addr not in self.allocs:
            bisect.insort(self.starts, a.addr)
        self.allocs[a.addr] = a

    def _remove(self, addr: int) -> None:
        a = self.allocs.pop(addr, None)
        if a is not None:
            del self.starts[bisect.bisect_left(self.starts, addr)]
            if a.kind not in ("symbol", "vmm"):  # physical memory of cuMemCreate is released by vmm.py
                self.account.release(a.size)

    def _check(self, ptr: int, n: int, what: str) -> _Alloc:
        a = self._find(ptr)
        if a is None:
            raise CudaError(Err.INVALID_VALUE, f"{what}: {ptr:#x} is not a device pointer of this session")
        if ptr + n > a.addr + a.size:
            raise CudaError(Err.INVALID_VALUE, f"{what}: {n} bytes at {ptr:#x} run {ptr + n - a.addr - a.size} bytes "
                                               f"past the end of the {a.size}-byte allocation at {a.addr:#x}")
        return a

    def _rows(self, ptr: int, pitch: int, width: int, height: int, what: str) -> _Alloc:
        if width > pitch:
            raise CudaError(Err.INVALID_PITCH_VALUE, f"{what}: width {width} exceeds pitch {pitch}")
        return self._check(ptr, pitch * (height - 1) + width if height else 0, what)

    def malloc(self, dev: int, size: int) -> int:
        if size < 0:
            raise CudaError(Err.INVALID_VALUE, f"negative allocation size {size}")
        self._use(dev)
        self.account.charge(size)
        try:
            ptr = int(check(self.cu.cuMemAlloc(max(size, 1)), "cuMemAlloc"))
        except CudaError:
            self.account.release(size)
            raise
        self._add(_Alloc(ptr, size, dev))
        return ptr

    def malloc_pitch(self, dev: int, width: int, height: int) -> tuple[int, int]:
        self._use(dev)
        if width == 0 or height == 0:
            return 0, max(512, -(-width // 512) * 512)
        ptr, pitch = check(self.cu.cuMemAllocPitch(width, height, 16), "cuMemAllocPitch")
        try:
            self.account.charge(int(pitch) * height)
        except CudaError:
            self.cu.cuMemFree(self.cu.CUdeviceptr(int(ptr)))
            raise
        self._add(_Alloc(int(ptr), int(pitch) * height, dev, "pitched"))
        return int(ptr), int(pitch)

    def free(self, ptr: int) -> None:
        a = self.allocs.get(ptr)
        if a is None or a.kind in ("symbol", "vmm"):
            raise CudaError(Err.INVALID_VALUE, f"{ptr:#x} is not the start of a live allocation (double free?)")
        self._use(a.device)
        check(self.cu.cuMemFree(self.cu.CUdeviceptr(ptr)), "cuMemFree")
        self._remove(ptr)

    def free_async(self, stream: Stream | None, ptr: int) -> None:
        # cuMemFreeAsync frees cuMemAlloc'd memory in stream order too (driver >= 11.2, as the policy requires
        # for stream-ordered allocation).
        a = self.allocs.get(ptr)
        if a is None or a.kind in ("symbol", "vmm"):
            raise CudaError(Err.INVALID_VALUE, f"cudaFreeAsync({ptr:#x}): not the start of a live allocation")
        s = self._stream(stream, a.device)
        check(self.cu.cuMemFreeAsync(self.cu.CUdeviceptr(ptr), s.handle), "cuMemFreeAsync")
        self._remove(ptr)

    def mem_info(self, dev: int) -> tuple[int, int]:
        self._use(dev)
        free, total = check(self.cu.cuMemGetInfo(), "cuMemGetInfo")
        room = self.account.headroom()  # the session's quota
        return int(free) if room is None else min(int(free), room), int(total)

    def pointer_info(self, ptr: int) -> tuple[int, int, int, int]:
        a = self._find(ptr)
        if a is None:
            return 0, -2, 0, 0
        return 2, a.device, a.addr, a.size

    def allocations(self) -> list[tuple[int, int, int]]:
        return [(a.device, a.addr, a.size) for a in (self.allocs[s] for s in self.starts) if a.kind != "symbol"]

    # -- stream-ordered work -------------------------------------------------------------------------------
    def _stream(self, s: Stream | None, dev: int) -> CudaStream:
        st = s if isinstance(s, CudaStream) else self.default_stream(dev)
        self._use(st.device)
        return st

    def write(self, stream: Stream | None, dst: int, data: bytes | memoryview) -> None:
        n = len(data)
        a = self._check(dst, n, "cudaMemcpy to the device")
        s = self._stream(stream, a.device)
        src = np.frombuffer(data, dtype=np.uint8)
        cu = self.cu
        for off in range(0, n, CHUNK):
            c = min(CHUNK, n - off)
            b = self.staging.take(c, s.device)
            try:
                b.view[:c] = src[off : off + c]
                check(cu.cuMemcpyHtoDAsync(cu.CUdeviceptr(dst + off), b.ptr, c, s.handle), "cuMemcpyHtoDAsync")
                self.staging.fence(b, s.device, s.handle)
            finally:
                self.staging.give_back(b)

    def read(self, stream: Stream | None, src: int, n: int) -> bytes:
        a = self._check(src, n, "cudaMemcpy from the device")
        s = self._stream(stream, a.device)
        out = bytearray(n)
        dst = np.frombuffer(out, dtype=np.uint8)
        cu = self.cu
        pending: list[tuple[Any, int, int]] = []
        off = 0
        try:
            while off < n or pending:
                while off < n and len(pending) < 2:  # two chunks in flight: one copies while one is read out
                    c = min(CHUNK, n - off)
                    b = self.staging.take(c, s.device)
                    pending.append((b, off, c))
                    check(cu.cuMemcpyDtoHAsync(b.ptr, cu.CUdeviceptr(src + off), c, s.handle), "cuMemcpyDtoHAsync")
                    self.staging.fence(b, s.device, s.handle)
                    off += c
                b, o, c = pending.pop(0)
                self.staging.wait(b)
                dst[o : o + c] = b.view[:c]
                self.staging.give_back(b)
        finally:
            for b, _, _ in pending:
                self.staging.give_back(b)
        return bytes(out)

    def _host_work(self, s: CudaStream, run: Callable[[], None]) -> None:
        """Runs `run` (no CUDA calls) on the driver's callback thread when s reaches this point."""
        call = self.hub.add_internal(run, s)
        res = self.cu.cuLaunchHostFunc(s.handle, self.cu.CUhostFn(TRAMPOLINE_ADDRESS), call.ident)
        if int(res[0]) != 0:
            self.hub.finished(call)
            check(res, "cuLaunchHostFunc")

    def write_shared(self, stream: Stream | None, dst: int, source: memoryview) -> None:
        """From the client's pinned memory (a mapping shared with this worker). The bytes are read when the
        stream reaches the copy, as CUDA does: a host function of ours moves them into pinned staging in
        stream order, then the DMA copy follows on the same stream."""
        n = len(source)
        a = self._check(dst, n, "cudaMemcpy to the device")
        if n == 0:
            return
        s = self._stream(stream, a.device)
        b = self.staging.take(n, s.device)
        try:
            src = np.frombuffer(source, dtype=np.uint8)
            view = b.view

            def fill() -> None:
                view[:n] = src

            self._host_work(s, fill)
            check(self.cu.cuMemcpyHtoDAsync(self.cu.CUdeviceptr(dst), b.ptr, n, s.handle), "cuMemcpyHtoDAsync")
            self.staging.fence(b, s.device, s.handle)
        finally:
            self.staging.give_back(b)

    def read_into(self, stream: Stream | None, src: int, out: memoryview) -> None:
        """Into the client's pinned memory, queued: DMA into staging, then a host function of ours copies
        the bytes out in stream order (before anything after it on the stream, a client callback included)."""
        n = len(out)
        a = self._check(src, n, "cudaMemcpy from the device")
        if n == 0:
            return
        s = self._stream(stream, a.device)
        b = self.staging.take(n, s.device)
        try:
            dst = np.frombuffer(out, dtype=np.uint8)
            view = b.view
            check(self.cu.cuMemcpyDtoHAsync(b.ptr, self.cu.CUdeviceptr(src), n, s.handle), "cuMemcpyDtoHAsync")

            def drain() -> None:
                dst[:] = view[:n]

            self._host_work(s, drain)
            self.staging.fence(b, s.device, s.handle)
        finally:
            self.staging.give_back(b)

    def copy(self, stream: Stream | None, dst: int, src: int, n: int) -> None:
        d = self._check(dst, n, "cudaMemcpy destination")
        self._check(src, n, "cudaMemcpy source")
        s = self._stream(stream, d.device)
        cu = self.cu
        check(cu.cuMemcpyDtoDAsync(cu.CUdeviceptr(dst), cu.CUdeviceptr(src), n, s.handle), "cuMemcpyDtoDAsync")

    def _memcpy2d(self, s: CudaStream, width: int, height: int, *, src_host: int = 0, src_dev: int = 0,
                  spitch: int, dst_host: int = 0, dst_dev: int = 0, dpitch: int) -> None:
        cu = self.cu
        p = cu.CUDA_MEMCPY2D()
        host, device = cu.CUmemorytype.CU_MEMORYTYPE_HOST, cu.CUmemorytype.CU_MEMORYTYPE_DEVICE
        if src_host:
            p.srcMemoryType, p.srcHost = host, src_host
        else:
            p.srcMemoryType, p.srcDevice = device, cu.CUdeviceptr(src_dev)
        if dst_host:
            p.dstMemoryType, p.dstHost = host, dst_host
        else:
            p.dstMemoryType, p.dstDevice = device, cu.CUdeviceptr(dst_dev)
        p.srcPitch, p.dstPitch, p.WidthInBytes, p.Height = spitch, dpitch, width, height
        check(cu.cuMemcpy2DAsync(p, s.handle), "cuMemcpy2DAsync")

    def write_2d(self, stream: Stream | None, dst: int, dpitch: int, width: int, height: int, data: bytes) -> None:
        a = self._rows(dst, dpitch, width, height, "cudaMemcpy2D destination")
        if len(data) != width * height:
            raise CudaError(Err.INVALID_VALUE, "cudaMemcpy2D: data size does not match width x height")
        if width == 0 or height == 0:
            return
        s = self._stream(stream, a.device)
        b = self.staging.take(len(data), s.device)
        try:
            b.view[: len(data)] = np.frombuffer(data, dtype=np.uint8)
            self._memcpy2d(s, width, height, src_host=b.ptr, spitch=width, dst_dev=dst, dpitch=dpitch)
            self.staging.fence(b, s.device, s.handle)
        finally:
            self.staging.give_back(b)

    def read_2d(self, stream: Stream | None, src: int, spitch: int, width: int, height: int) -> bytes:
        a = self._rows(src, spitch, width, height, "cudaMemcpy2D source")
        n = width * height
        if n == 0:
            return b""
        s = self._stream(stream, a.device)
        b = self.staging.take(n, s.device)
        try:
            self._memcpy2d(s, width, height, src_dev=src, spitch=spitch, dst_host=b.ptr, dpitch=width)
            self.staging.fence(b, s.device, s.handle)
            self.staging.wait(b)
            return b.view[:n].tobytes()
        finally:
            self.staging.give_back(b)

    def copy_2d(self, stream: Stream | None, dst: int, dpitch: int, src: int, spitch: int, width: int,
                height: int) -> None:
        d = self._rows(dst, dpitch, width, height, "cudaMemcpy2D destination")
        self._rows(src, spitch, width, height, "cudaMemcpy2D source")
        if width == 0 or height == 0:
            return
        s = self._stream(stream, d.device)
        self._memcpy2d(s, width, height, src_dev=src, spitch=spitch, dst_dev=dst, dpitch=dpitch)

    def memset(self, stream: Stream | None, dst: int, value: int, n: int) -> None:
        a = self._check(dst, n, "cudaMemset")
        s = self._stream(stream, a.device)
        check(self.cu.cuMemsetD8Async(self.cu.CUdeviceptr(dst), value & 0xFF, n, s.handle), "cuMemsetD8Async")

    def wait_value(self, stream: Stream | None, addr: int, value: int, cmp: int, width: int) -> None:
        """cuStreamWaitValue32/64 for the driver face (cmp: CU_STREAM_WAIT_VALUE_GEQ/EQ/AND/NOR)."""
        a = self._check(addr, width, "cuStreamWaitValue")
        s = self._stream(stream, a.device)
        fn = self.cu.cuStreamWaitValue32 if width == 4 else self.cu.cuStreamWaitValue64
        check(fn(s.handle, self.cu.CUdeviceptr(addr), value, cmp), f"cuStreamWaitValue{8 * width}")

    def memset_2d(self, stream: Stream | None, dst: int, pitch: int, value: int, width: int, height: int) -> None:
        a = self._rows(dst, pitch, width, height, "cudaMemset2D")
        if width == 0 or height == 0:
            return
        s = self._stream(stream, a.device)
        check(self.cu.cuMemsetD2D8Async(self.cu.CUdeviceptr(dst), pitch, value & 0xFF, width, height, s.handle),
              "cuMemsetD2D8Async")

    # -- streams and events ------------------------------------------------------------------------------
    def default_stream(self, dev: int) -> Stream:
        s = self.legacy.get(self._dev(dev))
        if s is None:
            s = self.legacy[dev] = CudaStream(dev, 0, 0, self.cu.CUstream(CU_STREAM_LEGACY), legacy=True)
        return s

    def stream_create(self, dev: int, flags: int, priority: int) -> Stream:
        self._use(dev)
        cu = self.cu
        h = check(cu.cuStreamCreateWithPriority(flags, priority), "cuStreamCreateWithPriority")
        try:
            priority = int(check(cu.cuStreamGetPriority(h), "cuStreamGetPriority"))  # clamped to the range
        except CudaError:
            pass
        s = CudaStream(dev, flags, priority, h)
        self.streams.append(s)
        return s

    def stream_destroy(self, s: Stream) -> None:
        assert isinstance(s, CudaStream)
        if s.legacy:
            return
        self._use(s.device)
        cu = self.cu
        # CUDA: queued work still completes after the handle is gone; device_idle waits for it by an event.
        if not self._stream_done(s):
            ev = check(cu.cuEventCreate(0x2), "cuEventCreate")
            check(cu.cuEventRecord(ev, s.handle), "cuEventRecord")
            self.draining.append((s.device, ev))
        check(cu.cuStreamDestroy(s.handle), "cuStreamDestroy")
        if s.signal is not None and not s.pending_host:
            self.signals.give_back(s.device, s.signal)  # its waits are satisfied: the value only grows
            s.signal = None
        if s in self.streams:
            self.streams.remove(s)

    def stream_idle(self, s: Stream) -> bool:
        assert isinstance(s, CudaStream)
        if s.device not in self.ctx:
            return True
        self._use(s.device)
        if not self._stream_done(s):
            return False
        if s.blocking:
            # New work on a blocking stream waits for the legacy stream; when that is held back by a host
            # function, a synchronous copy queued on s now would block this thread: wait for it too.
            leg = self.legacy.get(s.device)
            if leg is not None and leg.pending_host and not self._stream_done(leg):
                return False
        self._flush_printf(lambda: self.cu.cuStreamSynchronize(s.handle))
        return True

    def sync_point(self, s: Stream) -> Callable[[], bool]:
        assert isinstance(s, CudaStream)
        if not s.legacy:
            return lambda: self.stream_idle(s)
        # The legacy stream: also the blocking streams of its device (as a command issued to it would wait).
        return lambda: self.stream_idle(s) and all(self.stream_idle(o) for o in list(self.streams)
                                                   if o.device == s.device and o.blocking)

    def device_idle(self, dev: int) -> bool:
        if dev not in self.ctx:
            return True
        self._use(dev)
        leg = self.legacy.get(dev)
        if leg is not None and not self._stream_done(leg):
            return False
        for s in self.streams:
            if s.device == dev and not self._stream_done(s):
                return False
        keep = []
        busy = False
        for d, ev in self.draining:
            if d == dev and not busy and self._query(self.cu.cuEventQuery(ev)[0], "queued work"):
                self.cu.cuEventDestroy(ev)
                continue
            if d == dev:
                busy = True
            keep.append((d, ev))
        self.draining = keep
        if busy:
            return False
        self._flush_printf(self.cu.cuCtxSynchronize, everything=True)
        return True

    def stream_wait_event(self, s: Stream, e: Event) -> None:
        assert isinstance(s, CudaStream) and isinstance(e, CudaEvent)
        self._use(s.device)
        check(self.cu.cuStreamWaitEvent(s.handle, e.handle, 0), "cuStreamWaitEvent")

    def _wait_signal(self, s: CudaStream, target: int) -> int:
        """Queues on s a wait until its signal reaches target; returns the CUresult."""
        cu = self.cu
        assert s.signal is not None
        geq = int(cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)
        return int(cu.cuStreamWaitValue32(s.handle, cu.CUdeviceptr(s.signal[1]), cu.cuuint32_t(target), geq)[0])

    def host_func(self, s: Stream, notify: Callable[[], None]) -> Callable[[], None]:
        assert isinstance(s, CudaStream)
        self._use(s.device)
        if self.stream_mem_ops is not False and s.signal is None:
            try:
                s.signal = self.signals.take(s.device)
                s.signal_target = Signals.value(s.signal)
                if self.stream_mem_ops is None:  # probe with a wait that already holds
                    self.stream_mem_ops = self._wait_signal(s, s.signal_target) == 0
            except CudaError:
                self.stream_mem_ops = False
        call: HostCall = self.hub.add(notify, s)
        signal = s.signal if self.stream_mem_ops else None
        if signal is None:
            call.blocking = True  # no stream memory operations: the callback holds the stream itself
        else:
            s.signal_target += 1
            target = s.signal_target
            call.on_done = lambda: Signals.write(signal, target)
        res = self.cu.cuLaunchHostFunc(s.handle, self.cu.CUhostFn(TRAMPOLINE_ADDRESS), call.ident)
        if int(res[0]) != 0:
            call.done()
            check(res, "cuLaunchHostFunc")
        if signal is not None:
            err = self._wait_signal(s, target)
            if err != 0:  # the host function is queued and will notify; nothing holds the stream after it
                self._async_error(err, "cuStreamWaitValue32 behind a host function")
        return call.done

    def event_create(self, dev: int, flags: int) -> Event:
        self._use(dev)
        return CudaEvent(dev, flags, check(self.cu.cuEventCreate(flags), "cuEventCreate"))

    def event_record(self, e: Event, s: Stream) -> None:
        assert isinstance(e, CudaEvent) and isinstance(s, CudaStream)
        self._use(s.device)
        check(self.cu.cuEventRecord(e.handle, s.handle), "cuEventRecord")

    def event_idle(self, e: Event) -> bool:
        assert isinstance(e, CudaEvent)
        if e.device not in self.ctx:
            return True
        self._use(e.device)
        if not self._query(self.cu.cuEventQuery(e.handle)[0], "queued work"):
            return False
        self._flush_printf(lambda: self.cu.cuEventSynchronize(e.handle))
        return True

    def event_elapsed_ms(self, start: Event, end: Event) -> float:
        assert isinstance(start, CudaEvent) and isinstance(end, CudaEvent)
        self._use(end.device)
        return float(check(self.cu.cuEventElapsedTime(start.handle, end.handle), "cudaEventElapsedTime"))

    def event_destroy(self, e: Event) -> None:
        assert isinstance(e, CudaEvent)
        self._use(e.device)
        check(self.cu.cuEventDestroy(e.handle), "cuEventDestroy")

    # -- modules and kernels -------------------------------------------------------------------------------
    def _arch(self, dev: int) -> int:
        p = self.backend.devices()[dev].props
        return int(p["major"]) * 10 + int(p["minor"])

    def load_module(self, key: bytes, fatbin: bytes) -> None:
        mod = self.modules.get(key)
        if mod is None:
            mod = self.modules[key] = CudaModule(self.cu, bytes(fatbin))
        dev = self.current if self.current is not None else 0
        self._use(dev)
        try:
            mod.load(dev, self._arch(dev), self.backend.driver_version())  # errors surface at upload
        except CudaError:
            del self.modules[key]
            raise

    def has_module(self, key: bytes) -> bool:
        return key in self.modules

    def unload_module(self, key: bytes) -> None:
        """cuModuleUnload: the driver's module on each device, and the variables the session knew of it."""
        mod = self.modules.pop(key, None)
        if mod is None:
            return
        for dev, h in list(mod.handles.items()):
            self._use(dev)
            check(self.cu.cuModuleUnload(h), "cuModuleUnload")
            mod.forget(dev)
        for ptr in self.module_symbols.pop(key, set()):
            self._remove(ptr)

    def _module(self, dev: int, key: bytes) -> CudaModule:
        mod = self.modules.get(key)
        if mod is None:
            raise CudaError(Err.INVALID_KERNEL_IMAGE, "the module was not loaded in this session")
        self._use(dev)
        mod.load(dev, self._arch(dev), self.backend.driver_version())
        return mod

    def function_info(self, dev: int, key: bytes, name: str) -> tuple[list[list[int]], int, dict[str, Any]]:
        mod = self._module(self._dev(dev), key)
        fn = mod.function(dev, name, self._arch(dev), self.backend.driver_version())
        cu = self.cu
        attrs: dict[str, Any] = {}
        for field_name, enum_name in _FUNC_ATTRS.items():
            member = getattr(cu.CUfunction_attribute, enum_name, None)
            err, value = cu.cuFuncGetAttribute(member, fn.handle) if member is not None else (1, 0)
            attrs[field_name] = int(value) if int(err) == 0 else 0
        return [[o, s] for o, s in fn.layout], fn.param_bytes, attrs

    def _check_launch(self, dev: int, grid: list[int], block: list[int], shared: int) -> None:
        p = self.backend.devices()[dev].props
        if len(grid) != 3 or len(block) != 3 or min(grid) < 1 or min(block) < 1:
            raise CudaError(Err.INVALID_CONFIGURATION, f"grid {grid} / block {block}: every dimension must be >= 1")
        if any(b > m for b, m in zip(block, p["maxThreadsDim"], strict=True)) or \
                block[0] * block[1] * block[2] > p["maxThreadsPerBlock"]:
            raise CudaError(Err.INVALID_CONFIGURATION, f"block {block} exceeds the device's limits")
        if any(g > m for g, m in zip(grid, p["maxGridSize"], strict=True)):
            raise CudaError(Err.INVALID_CONFIGURATION, f"grid {grid} exceeds the device's limits")
        if shared > p["sharedMemPerBlockOptin"]:
            raise CudaError(Err.INVALID_CONFIGURATION, f"{shared} bytes of dynamic shared memory exceed the "
                                                       f"device's {p['sharedMemPerBlockOptin']}")

    def launch(self, dev: int, key: bytes, name: str, grid: list[int], block: list[int], shared: int,
               stream: Stream | None, params: bytes, attrs: LaunchAttrs | None = None) -> None:
        dev = self._dev(dev)
        self._check_launch(dev, grid, block, shared)
        mod = self._module(dev, key)
        fn = mod.function(dev, name, self._arch(dev), self.backend.driver_version())
        s = self._stream(stream, dev)
        if s.device != dev:
            raise CudaError(Err.INVALID_RESOURCE_HANDLE, f"the stream belongs to device {s.device}, not {dev}")
        cu = self.cu
        if shared > DEFAULT_SHARED_LIMIT and shared > fn.dynamic_shared_limit:
            # Above 48 KiB a kernel must opt in (cudaFuncSetAttribute); the emulator allows up to the
            # device's opt-in limit, so the cuda backend opts in for the application.
            attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(cu.cuFuncSetAttribute(fn.handle, attr, shared), "cuFuncSetAttribute")
            fn.dynamic_shared_limit = shared
        packed = PackedParams(params, fn.layout)
        if self.gate is not None:
            self.gate.before(dev)
        if self.tex.mirrors:  # CUDA arrays of texture objects: their CUarrays take the arrays' contents
            self.tex.before_launch(dev, s.handle)
        if attrs is not None and attrs.attrs:  # cuLaunchKernelEx with the application's launch attributes
            dims = attrs.cluster
            if attrs.non_portable and dims and dims[0] * dims[1] * dims[2] > PORTABLE_CLUSTER:
                # the application allowed it (FUNC_SET_ATTR told the driver too): opt in, as for shared memory
                attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
                check(cu.cuFuncSetAttribute(fn.handle, attr, 1), "cuFuncSetAttribute")
            cfg = launch_config(cu, attrs, grid, block, shared, s.handle)
            check(cu.cuLaunchKernelEx(cfg, fn.handle, packed.address, 0), f"launching kernel {name}")
        else:
            check(cu.cuLaunchKernel(fn.handle, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared,
                                    s.handle, packed.address, 0), f"launching kernel {name}")
        if self.tex.mirrors:  # and surface writes go back to the arrays
            self.tex.after_launch(dev, s.handle)
        if self.gate is not None:
            self.gate.after(dev, s)
        self.printf_dirty = True

    def func_set_attr(self, dev: int, key: bytes, name: str, attr: int, value: int) -> None:
        """cudaFuncSetAttribute / cuFuncSetAttribute: the driver sets it on the kernel's function (the two
        APIs number the attributes alike) and refuses what it does not take, with its own error."""
        dev = self._dev(dev)
        cu = self.cu
        fn = self._module(dev, key).function(dev, name, self._arch(dev), self.backend.driver_version())
        try:
            which = cu.CUfunction_attribute(attr)
        except ValueError:
            raise CudaError(Err.INVALID_VALUE, f"cudaFuncSetAttribute: unknown attribute {attr}") from None
        check(cu.cuFuncSetAttribute(fn.handle, which, value), "cuFuncSetAttribute")
        if which == cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
            fn.dynamic_shared_limit = value  # launches up to it need no opt-in of ours

    def tensor_map_encode(self, dev: int, m: TiledMap) -> bytes:
        """The device's driver encodes the descriptor (its layout is its own); the global address is a device
        pointer, the same here as in the application."""
        self._dev(dev)
        cu = self.cu
        tm = check(cu.cuTensorMapEncodeTiled(
            cu.CUtensorMapDataType(m.dtype), m.rank, m.address, [cu.cuuint64_t(x) for x in m.dims],
            [cu.cuuint64_t(x) for x in m.strides], [cu.cuuint32_t(x) for x in m.box],
            [cu.cuuint32_t(x) for x in m.element_strides],
            cu.CUtensorMapInterleave(m.interleave), cu.CUtensorMapSwizzle(m.swizzle),
            cu.CUtensorMapL2promotion(m.l2_promotion), cu.CUtensorMapFloatOOBfill(m.oob_fill)),
            "cuTensorMapEncodeTiled")
        return b"".join(int(w).to_bytes(8, "little") for w in tm.opaque)

    def tensor_map_replace_address(self, dev: int, address: int, tensormap: bytes) -> bytes:
        self._dev(dev)
        cu = self.cu
        tm = cu.CUtensorMap()
        tm.opaque = [cu.cuuint64_t(int.from_bytes(tensormap[i:i + 8], "little")) for i in range(0, 128, 8)]
        check(cu.cuTensorMapReplaceAddress(tm, address), "cuTensorMapReplaceAddress")
        return b"".join(int(w).to_bytes(8, "little") for w in tm.opaque)

    # -- textures and surfaces (textures.py) -------------------------------------------------------------
    def texture_create(self, dev: int, surface: bool, fields: list[int]) -> int:
        return self.tex.create(self._dev(dev), surface, fields)

    def texture_check(self, handle: int) -> None:
        self.tex.check(handle)

    def texture_destroy(self, handle: int) -> None:
        self.tex.destroy(handle)

    def attach_scheduler(self, arbiter: Any, slot: int) -> None:
        """Launches are gated by the server's scheduler (gpushim/server/scheduler.py, InflightGate): while a
        higher-priority session has work in flight on a device, this one keeps little of its own queued there.
        Not exercised on a GPU yet (developed without one)."""
        from gpushim.server.scheduler import InflightGate

        arbiter.bind(slot)
        cu = self.cu

        def record(dev: int, stream: CudaStream) -> Any:
            ev = check(cu.cuEventCreate(0x2), "cuEventCreate")  # CU_EVENT_DISABLE_TIMING
            check(cu.cuEventRecord(ev, stream.handle), "cuEventRecord")
            return ev

        self.gate = InflightGate(arbiter, slot, record, lambda ev: self._query(cu.cuEventQuery(ev)[0], "queued work"),
                                 lambda ev: cu.cuEventSynchronize(ev), lambda ev: cu.cuEventDestroy(ev))

    def symbol_info(self, dev: int, key: bytes, name: str) -> tuple[int, int]:
        dev = self._dev(dev)
        mod = self._module(dev, key)
        ptr, size = mod.symbol(dev, name)
        if self._find(ptr) is None:
            self._add(_Alloc(ptr, size, dev, "symbol"))
            self.module_symbols.setdefault(key, set()).add(ptr)
        return ptr, size

    # -- faults in asynchronous work ---------------------------------------------------------------------
    def take_async_error(self) -> tuple[int, str] | None:
        while self.hub.failures:
            self.errors.append((Err.UNKNOWN, f"internal error in a queued copy: {self.hub.failures.popleft()}"))
        if self.errors:
            err = self.errors[0]
            self.errors.clear()
            return err
        return None

    # -- lifetime ----------------------------------------------------------------------------------------
    def reset_device(self, dev: int) -> None:
        dev = self._dev(dev)
        self.hub.release(dev)
        self.vmm.reset(dev)
        for a in [a for a in self.allocs.values() if a.device == dev]:
            self._remove(a.addr)
        for mod in self.modules.values():
            mod.forget(dev)
        self.streams = [s for s in self.streams if s.device != dev]
        self.draining = [(d, ev) for d, ev in self.draining if d != dev]
        self.errors.clear()
        self.tex.forget_device(dev)
        if dev not in self.ctx:
            return
        cu = self.cu
        self.staging.forget_device(dev)
        self.signals.forget_device(dev)
        for st in [*self.streams, *self.legacy.values()]:
            if st.device == dev:
                st.signal, st.signal_target = None, 0
        check(cu.cuDevicePrimaryCtxReset(self.cudevs[dev]), "cuDevicePrimaryCtxReset")
        cu.cuDevicePrimaryCtxRelease(self.cudevs[dev])
        del self.ctx[dev]
        if self.current == dev:
            self.current = None
            cu.cuCtxSetCurrent(cu.CUcontext(0))

    def close(self) -> None:
        self.hub.close()
        cu = self.cu
        if self.gate is not None:
            self.gate.close()
        for dev in list(self.ctx):
            # The worker's process ends with the session; resetting frees the device at once anyway.
            cu.cuDevicePrimaryCtxReset(self.cudevs[dev])
            cu.cuDevicePrimaryCtxRelease(self.cudevs[dev])
        self.ctx.clear()
        self.allocs.clear()
        self.starts.clear()
        self.current = None
