"""Peer access for kernels (cudaDeviceEnablePeerAccess): a kernel on one device reading and writing another
device's memory of the same session.

Kernels address memory as `arena[addr - base]` with one arena. Each device's memory is its own memfd in its
own window (memory.DEVICE_WINDOW apart), so `PeerSpace` maps every device's memfd into one reserved span at
the windows' relative offsets: one array covers all devices (every access is checked against live
allocations first). Ranges mapped by cuMemMap (vmm.py) are overlaid here as in each device's own mapping.
`PeerView` is what a launch then sees: the launching device's memory plus the allocations of the peers it
may access; anything else (the device heap, printf's reads) is the launching device's.
"""

from __future__ import annotations

import ctypes
import mmap
from typing import Any

import numpy as np

from gpushim.backends.emulator.memory import MAP_NORESERVE, Allocation, DeviceMemory, fits
from gpushim.cuda_errors import CudaError, Err

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
MAP_FIXED = 0x10
MAP_FAILED = ctypes.c_void_p(-1).value


class PeerSpace:
    """Every device memory of a session in one span of this process's address space."""

    def __init__(self, memories: list[DeviceMemory]) -> None:
        self.base = min(m.base for m in memories)
        self.size = max(m.base + m.span for m in memories) - self.base
        if any(m.fd is None for m in memories):
            raise CudaError(Err.NOT_SUPPORTED, "peer access needs device memory in memfds (memfd_create failed)")
        p = _libc.mmap(None, self.size, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        if p in (None, MAP_FAILED):
            raise CudaError(Err.MEMORY_ALLOCATION, f"peer access: cannot reserve {self.size} bytes of address space")
        self.addr = p
        for m in memories:
            q = _libc.mmap(p + (m.base - self.base), m.span, mmap.PROT_READ | mmap.PROT_WRITE,
                           mmap.MAP_SHARED | MAP_FIXED | MAP_NORESERVE, m.fd, 0)
            if q != p + (m.base - self.base):
                self.close()
                raise CudaError(Err.MEMORY_ALLOCATION, "peer access: cannot map a device's memory")
        self.arena = np.ctypeslib.as_array((ctypes.c_uint8 * self.size).from_address(p))

    def overlay(self, addr: int, size: int, fd: int, offset: int) -> None:
        """Maps fd's pages from offset at device address addr (vmm.py keeps this span like the devices')."""
        if not self.addr or not 0 <= addr - self.base <= self.size - size:
            raise CudaError(Err.INVALID_VALUE, f"peer access: {size:#x} bytes at {addr:#x} are outside the span")
        at = self.addr + (addr - self.base)
        if _libc.mmap(at, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | MAP_FIXED, fd, offset) != at:
            raise CudaError(Err.MEMORY_ALLOCATION, "peer access: cannot map a device's memory")

    def close(self) -> None:
        if self.addr:
            self.arena = np.empty(0, np.uint8)
            _libc.munmap(self.addr, self.size)
            self.addr = 0


class PeerView:
    """The memory a kernel on `own`'s device sees while peer access to `peers` is enabled."""

    version = None  # no single allocation version: the JIT compares the allocations themselves

    def __init__(self, space: PeerSpace, own: DeviceMemory, peers: list[DeviceMemory]) -> None:
        self.own = own
        self.mems = [own, *peers]
        self.base = space.base
        self.arena = space.arena

    def __getattr__(self, name: str) -> Any:  # the device heap, accounting, ...: the launching device's
        return getattr(self.own, name)

    def allocations(self) -> list[Allocation]:
        # live, not a snapshot: the device heap may allocate while the kernel runs
        return sorted((a for m in self.mems for a in m.allocations()), key=lambda a: a.addr)

    def find(self, addr: int) -> Allocation | None:
        for m in self.mems:
            if m.owns(addr):
                return m.find(addr)
        return None

    def read(self, addr: int, nbytes: int) -> memoryview:
        for m in self.mems:
            if m.owns(addr):
                return m.read(addr, nbytes)
        raise CudaError(Err.INVALID_VALUE, f"read: {addr:#x} is not inside a device allocation")

    def check_addresses(self, addrs: np.ndarray, nbytes: int, what: str = "kernel access") -> np.ndarray:
        addrs = np.asarray(addrs, dtype=np.uint64)
        ok = np.zeros(addrs.shape, bool)
        for a in self.allocations():
            ok |= fits(addrs, nbytes, np.uint64(a.addr), np.uint64(a.addr + a.size))
        if not ok.all():
            bad = int(addrs[np.argmax(~ok)])
            raise CudaError(Err.ILLEGAL_ADDRESS, f"{what}: {nbytes} bytes at {bad:#x} outside every allocation")
        return (addrs - np.uint64(self.base)).view(np.int64)

    def __repr__(self) -> str:
        return f"PeerView(devices at {[hex(m.base) for m in self.mems]})"
