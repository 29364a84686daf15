"""Emulated device memory: one flat arena in host RAM, addressed by the device pointers handed to clients.

The arena is a single anonymous mapping reserved with MAP_NORESERVE, so an 80 GiB device costs only the
pages a session touches. Device addresses are `base + offset`; `base` sits in a part of the 47-bit user
address space that host mappings rarely use, so pointers never look like the application's own.
Every access is bounds-checked against live allocations: a copy or a kernel access that leaves an
allocation is an error, never a silent overrun.
"""

from __future__ import annotations

import bisect
import ctypes
import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpushim.backends.accounting import MemoryAccount
from gpushim.cuda_errors import CudaError, Err

MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)  # Linux value; Python's mmap lacks the name
ALLOC_ALIGNMENT = 512  # cudaMalloc returns 512-byte aligned pointers on current GPUs
ARENA_BASE = 0x3000_0000_0000  # 48 TiB; each device gets its own 1 TiB window above it
DEVICE_WINDOW = 0x0100_0000_0000


_libc = ctypes.CDLL(None, use_errno=True)
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 0x01, 0x02
_fallocate = _libc.fallocate
_fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]  # declared once, not per call


def fits(addrs: np.ndarray, nbytes: int, start, end) -> np.ndarray:
    """Where [a, a+nbytes) lies inside [start, end), for uint64 addresses a: without computing a + nbytes,
    which wraps around to a small number at the top of the address space (2**64 - 8 with 8 bytes)."""
    return (addrs >= start) & (addrs < end) & (end - addrs >= np.uint64(nbytes))


def _memfd(capacity: int) -> int | None:
    try:
        fd = os.memfd_create("gpushim-device-memory", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        return None
    os.ftruncate(fd, capacity)
    return fd


def _punch_hole(fd: int, offset: int, length: int) -> None:
    """Gives freed pages back (for a shared mapping, madvise would only drop this process's view of them)."""
    _fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length)


@dataclass(slots=True)
class Allocation:
    addr: int
    size: int  # what the client asked for; bounds checks use this, not the rounded size
    reserved: int  # size rounded up to the alignment, what the allocator holds
    kind: str = "device"  # device | pitched | symbol | managed | ipc | vmm (vmm.py: mapped, accessible VA)


class DeviceMemory:
    """The memory of one emulated device inside one session's worker."""

    def __init__(self, capacity: int, base: int = ARENA_BASE, account: MemoryAccount | None = None,
                 span: int | None = None) -> None:
        self.base = base
        self.capacity = capacity
        # The mapping may cover more than the capacity (a session's devices: their whole window): allocations use
        # [0, capacity), virtual address ranges of cuMemAddressReserve the rest (vmm.py maps physical memory over
        # them). Untouched pages cost nothing.
        self.span = max(capacity, span or 0)
        # every allocation of every kind is charged here (the session's quota and the host's RAM cap)
        self.account = account or MemoryAccount()
        # A memfd, so that managed allocations can be mapped into the client at the same address (one host);
        # its pages exist only once touched, and freeing punches them out of the file.
        self.fd = _memfd(self.span)
        if self.fd is not None:
            self._map = mmap.mmap(self.fd, self.span, flags=mmap.MAP_SHARED | MAP_NORESERVE)
        else:
            self._map = mmap.mmap(-1, self.span, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE)
        self.arena = np.frombuffer(self._map, dtype=np.uint8)
        self._starts: list[int] = []  # sorted allocation addresses
        self._allocs: dict[int, Allocation] = {}
        self.version = 0  # bumped by every change of the allocations (the JIT's launch reuses its table until then;
        # the worker's C fast path rebuilds its copy: gpushim/server/fastpath.py)
        self._free: list[tuple[int, int]] = [(0, capacity)]  # sorted (offset, size) holes
        self.used = 0
        self.on_change: Callable[[int], None] | None = None  # told `used` after each change (the scheduler)

    # -- allocation -------------------------------------------------------------------------------------
    def alloc(self, size: int, kind: str = "device", align: int = ALLOC_ALIGNMENT) -> int:
        """First fit; `align` (a multiple of ALLOC_ALIGNMENT) also rounds the reserved size, so a page-aligned
        allocation owns whole pages."""
        if size < 0:
            raise CudaError(Err.INVALID_VALUE, f"negative allocation size {size}")
        reserved = -(-size // align) * align or align
        if reserved > self.capacity - self.used:
            raise CudaError(
                Err.MEMORY_ALLOCATION, f"out of device memory: {size} bytes requested, {self.free_bytes} free"
            )
        self.account.charge(reserved)
        free = self._free
        for i, (off, hole) in enumerate(free):
            start = -(-off // align) * align
            end = start + reserved
            if end <= off + hole:
                if start == off:  # the common case: the hole's start is aligned; it shrinks, or goes
                    if off + hole > end:
                        free[i] = (end, off + hole - end)
                    else:
                        del free[i]
                else:
                    del free[i]
                    if off + hole > end:
                        free.insert(i, (end, off + hole - end))
                    free.insert(i, (off, start - off))
                addr = self.base + start
                bisect.insort(self._starts, addr)
                self._allocs[addr] = Allocation(addr, size, reserved, kind)
                self.version += 1
                self.used += reserved
                if self.on_change is not None:
                    self.on_change(self.used)
                return addr
        self.account.release(reserved)
        raise CudaError(
            Err.MEMORY_ALLOCATION, f"out of device memory: {size} bytes requested, {self.free_bytes} free"
        )

    def free(self, addr: int) -> Allocation:
        a = self._allocs.get(addr)
        if a is None or a.kind == "vmm":
            raise CudaError(Err.INVALID_VALUE, f"{addr:#x} is not the start of a live device allocation")
        del self._allocs[addr]
        del self._starts[bisect.bisect_left(self._starts, addr)]
        self.version += 1
        off = addr - self.base
        # Give the pages back to the host; the range reads as zeros if reused, as fresh cudaMalloc may.
        page = mmap.PAGESIZE
        lo, hi = -(-off // page) * page, (off + a.reserved) // page * page
        if hi > lo:
            if self.fd is not None:
                _punch_hole(self.fd, lo, hi - lo)
            else:
                self._map.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        self._release(off, a.reserved)
        self.used -= a.reserved
        self.account.release(a.reserved)
        if self.on_change is not None:
            self.on_change(self.used)
        return a

    def _release(self, off: int, size: int) -> None:
        """[off, off+size) is a hole again, coalesced with the holes just before and after it."""
        free = self._free
        i = bisect.bisect_left(free, (off, 0))
        joins_next = i < len(free) and free[i][0] == off + size
        if i > 0 and free[i - 1][0] + free[i - 1][1] == off:  # joins the previous hole
            start, n = free[i - 1]
            if joins_next:
                free[i - 1] = (start, n + size + free[i][1])
                del free[i]
            else:
                free[i - 1] = (start, n + size)
        elif joins_next:
            free[i] = (off, size + free[i][1])
        else:
            free.insert(i, (off, size))

    def track(self, addr: int, size: int, kind: str) -> None:
        """Makes [addr, addr+size) outside the allocator's range accessible like an allocation (vmm.py's
        mapped ranges); nothing is charged."""
        bisect.insort(self._starts, addr)
        self._allocs[addr] = Allocation(addr, size, size, kind)
        self.version += 1

    def untrack(self, addr: int) -> None:
        del self._allocs[addr]
        del self._starts[bisect.bisect_left(self._starts, addr)]
        self.version += 1

    @property
    def free_bytes(self) -> int:
        return self.capacity - self.used

    def allocations(self) -> list[Allocation]:
        return [self._allocs[a] for a in self._starts]

    # -- lookup and checks --------------------------------------------------------------------------------
    def owns(self, addr: int) -> bool:
        """True when addr lies inside this device's window (allocated or not)."""
        return self.base <= addr < self.base + self.span

    def find(self, addr: int) -> Allocation | None:
        """The live allocation containing addr, if any."""
        i = bisect.bisect_right(self._starts, addr) - 1
        if i < 0:
            return None
        a = self._allocs[self._starts[i]]
        return a if addr < a.addr + max(a.size, 1) else None

    def check_range(self, addr: int, nbytes: int, what: str = "access") -> int:
        """Offset into the arena of [addr, addr+nbytes) when that lies inside one live allocation."""
        a = self.find(addr)
        if a is None:
            raise CudaError(Err.INVALID_VALUE, f"{what}: {addr:#x} is not inside a device allocation")
        if addr + nbytes > a.addr + a.size:
            raise CudaError(
                Err.INVALID_VALUE,
                f"{what}: {nbytes} bytes at {addr:#x} run {addr + nbytes - a.addr - a.size} bytes past the "
                f"end of the {a.size}-byte allocation at {a.addr:#x}",
            )
        return addr - self.base

    def check_addresses(self, addrs: np.ndarray, nbytes: int, what: str = "kernel access") -> np.ndarray:
        """Vectorised check for kernels: arena offsets of every address, each [a, a+nbytes) inside a live
        allocation; raises CudaError(ILLEGAL_ADDRESS) naming the first offender otherwise."""
        addrs = np.asarray(addrs, dtype=np.uint64)
        if addrs.size == 0:
            return addrs.astype(np.int64)
        starts = np.asarray(self._starts, dtype=np.uint64)
        if starts.size == 0:
            self._illegal(addrs, np.ones(addrs.shape, bool), nbytes, what)
        idx = np.searchsorted(starts, addrs, side="right").astype(np.int64) - 1
        ok = idx >= 0
        safe = np.where(ok, idx, 0)
        ends = np.asarray([self._allocs[s].addr + self._allocs[s].size for s in self._starts], dtype=np.uint64)
        ok &= fits(addrs, nbytes, starts[safe], ends[safe])
        if not ok.all():
            self._illegal(addrs, ~ok, nbytes, what)
        return (addrs - np.uint64(self.base)).astype(np.int64)

    @staticmethod
    def _illegal(addrs: np.ndarray, bad: np.ndarray, nbytes: int, what: str) -> None:
        first = int(addrs[np.argmax(bad)])
        raise CudaError(Err.ILLEGAL_ADDRESS, f"{what}: {nbytes} bytes at {first:#x} are outside every allocation")

    # -- data ---------------------------------------------------------------------------------------------
    def read(self, addr: int, nbytes: int) -> memoryview:
        off = self.check_range(addr, nbytes, "read")
        return memoryview(self._map)[off : off + nbytes]

    def write(self, addr: int, data: bytes | memoryview) -> None:
        n = len(data)
        off = self.check_range(addr, n, "write")
        self._map[off : off + n] = data

    def fill(self, addr: int, value: int, nbytes: int) -> None:
        off = self.check_range(addr, nbytes, "memset")
        self.arena[off : off + nbytes] = value & 0xFF

    def view(self, addr: int, nbytes: int) -> np.ndarray:
        """A writable uint8 view of a checked range (no copy)."""
        off = self.check_range(addr, nbytes)
        return self.arena[off : off + nbytes]

    def close(self) -> None:
        self.arena = np.empty(0, np.uint8)
        self._map.close()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
