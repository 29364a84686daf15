"""Virtual memory management on the emulator (the driver's cuMemAddressReserve / cuMemCreate / cuMemMap /
cuMemSetAccess / cuMemUnmap / cuMemRelease / cuMemAddressFree).

A device's mapping (memory.py) spans its whole window: allocations live in [0, capacity), and the rest is
the device's virtual address space for reservations. Physical memory made by cuMemCreate comes from a
second memfd per device (the pool, charged to the session like any allocation). cuMemMap maps the pool's
pages over the reserved addresses of the device's mapping (MAP_FIXED, as IPC does), so copies and kernels
that address the range read and write the physical memory in place, and one physical allocation mapped at
two addresses is one set of bytes. A mapped range becomes addressable (memory.track) only once
cuMemSetAccess gives the device read-write access, as CUDA requires; adjacent accessible mappings form one
range, so a copy or kernel may cross the boundary between two mappings, as on a GPU.

Limits: read-only access, access from another device, and mapping one device's physical memory into
another device's reservation are refused with NOT_SUPPORTED; kernels on a device with peer access enabled
do not see its mapped ranges (peers.py maps only the allocator's part).
"""

from __future__ import annotations

import ctypes
import mmap
import os
from dataclasses import dataclass, field

from gpushim.backends.emulator.memory import DeviceMemory
from gpushim.cuda_errors import CudaError, Err

GRANULARITY = 2 << 20  # cuMemGetAllocationGranularity on current GPUs (minimum and recommended)
ACCESS_NONE, ACCESS_READ, ACCESS_READWRITE = 0, 1, 3  # CUmemAccess_flags

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
MAP_FIXED = 0x10


@dataclass
class Physical:
    dev: int
    offset: int  # in the device's pool
    size: int
    released: bool = False
    mappings: int = 0


@dataclass
class Mapping:
    size: int
    handle: int
    access: bool = False


@dataclass
class Reservation:
    dev: int
    addr: int
    size: int
    maps: dict[int, Mapping] = field(default_factory=dict)  # start address -> mapping
    runs: list[int] = field(default_factory=list)  # starts of the ranges tracked in the device memory


def _granular(what: str, value: int) -> None:
    if value <= 0 or value % GRANULARITY:
        raise CudaError(Err.INVALID_VALUE, f"{what}: {value:#x} is not a positive multiple of the allocation "
                        f"granularity ({GRANULARITY:#x})")


class EmuVmm:
    """One session's reservations and physical allocations, over its devices' memories."""

    def __init__(self, memories: list[DeviceMemory]) -> None:
        self.memories = memories
        self.pools: dict[int, DeviceMemory] = {}
        self.reservations: dict[int, Reservation] = {}  # start -> reservation
        self.handles: dict[int, Physical] = {}
        self._next_handle = 1
        # free virtual address space per device: sorted (address, size) holes above the allocator's range
        self._holes: dict[int, list[tuple[int, int]]] = {}

    # -- address space ------------------------------------------------------------------------------------
    def _va_holes(self, dev: int) -> list[tuple[int, int]]:
        if dev not in self._holes:
            m = self.memories[dev]
            lo = -(-m.capacity // GRANULARITY) * GRANULARITY
            self._holes[dev] = [(m.base + lo, m.span - lo)] if m.span > lo else []
        return self._holes[dev]

    def reserve(self, dev: int, size: int, alignment: int, hint: int) -> int:
        _granular("cuMemAddressReserve size", size)
        if alignment & (alignment - 1):
            raise CudaError(Err.INVALID_VALUE, f"cuMemAddressReserve: alignment {alignment:#x} is not a power of two")
        align = max(alignment, GRANULARITY)
        holes = self._va_holes(dev)
        # the requested address when it is free and aligned (CUDA treats it as a hint), else first fit
        picks = ([hint] if hint and hint % align == 0 else []) + [-(-a // align) * align for a, _ in holes]
        for start in picks:
            for i, (a, n) in enumerate(holes):
                if a <= start and start + size <= a + n:
                    del holes[i]
                    rest = [(a, start - a), (start + size, a + n - start - size)]
                    holes[i:i] = [h for h in rest if h[1] > 0]
                    self.reservations[start] = Reservation(dev, start, size)
                    return start
        raise CudaError(Err.MEMORY_ALLOCATION, f"cuMemAddressReserve: no free range of {size:#x} bytes "
                        f"in device {dev}'s virtual address space")

    def address_free(self, ptr: int, size: int) -> None:
        r = self.reservations.get(ptr)
        if r is None or r.size != size:
            raise CudaError(Err.INVALID_VALUE, f"cuMemAddressFree: {size:#x} bytes at {ptr:#x} are not a reservation "
                            "made by cuMemAddressReserve (the size must be the reserved size)")
        if r.maps:
            raise CudaError(Err.INVALID_VALUE, f"cuMemAddressFree: the reservation at {ptr:#x} still has "
                            f"{len(r.maps)} mapping(s); cuMemUnmap them first")
        del self.reservations[ptr]
        holes = self._va_holes(r.dev)
        holes.append((ptr, size))
        holes.sort()
        merged: list[tuple[int, int]] = []
        for a, n in holes:
            if merged and merged[-1][0] + merged[-1][1] == a:
                merged[-1] = (merged[-1][0], merged[-1][1] + n)
            else:
                merged.append((a, n))
        holes[:] = merged

    # -- physical memory ----------------------------------------------------------------------------------
    def create(self, dev: int, size: int) -> int:
        _granular("cuMemCreate size", size)
        mem = self.memories[dev]
        if mem.fd is None:
            raise CudaError(Err.NOT_SUPPORTED, "cuMemCreate: virtual memory management needs device memory in a "
                            "memfd (memfd_create failed)")
        if size > mem.free_bytes:
            raise CudaError(Err.MEMORY_ALLOCATION, f"cuMemCreate: {size} bytes requested, {mem.free_bytes} free")
        pool = self.pools.get(dev)
        if pool is None:
            pool = self.pools[dev] = DeviceMemory(mem.capacity, 0, mem.account, span=mem.capacity)
        offset = pool.alloc(size, kind="physical", align=mmap.PAGESIZE)  # charges the session's account
        mem.used += size  # the device's free memory (cuMemGetInfo, placement) counts it
        if mem.on_change is not None:
            mem.on_change(mem.used)
        handle = self._next_handle
        self._next_handle += 1
        self.handles[handle] = Physical(dev, offset, size)
        return handle

    def release(self, handle: int) -> None:
        p = self.handles.get(handle)
        if p is None or p.released:
            raise CudaError(Err.INVALID_VALUE, f"cuMemRelease: {handle:#x} is not a live allocation handle")
        p.released = True
        self._maybe_free(handle, p)

    def _maybe_free(self, handle: int, p: Physical) -> None:
        # CUDA: the memory is freed once the handle is released and no mapping uses it any more
        if p.released and p.mappings == 0:
            del self.handles[handle]
            self.pools[p.dev].free(p.offset)
            mem = self.memories[p.dev]
            mem.used -= p.size
            if mem.on_change is not None:
                mem.on_change(mem.used)

    # -- mappings -----------------------------------------------------------------------------------------
    def _reservation(self, what: str, ptr: int, size: int) -> Reservation:
        for r in self.reservations.values():
            if r.addr <= ptr and ptr + size <= r.addr + r.size:
                return r
        raise CudaError(Err.INVALID_VALUE, f"{what}: {size:#x} bytes at {ptr:#x} are not inside one reservation "
                        "of cuMemAddressReserve")

    def _whole_mappings(self, what: str, ptr: int, size: int) -> tuple[Reservation, list[int]]:
        """The mappings that exactly tile [ptr, ptr+size)."""
        r = self._reservation(what, ptr, size)
        starts, at = [], ptr
        while at < ptr + size:
            m = r.maps.get(at)
            if m is None:
                raise CudaError(Err.INVALID_VALUE, f"{what}: {at:#x} does not start a mapping (the range must "
                                "consist of whole ranges mapped by cuMemMap)")
            starts.append(at)
            at += m.size
        if at != ptr + size:
            raise CudaError(Err.INVALID_VALUE, f"{what}: the range ends inside the mapping at {starts[-1]:#x}")
        return r, starts

    def _mmap(self, mem: DeviceMemory, addr: int, size: int, fd: int, offset: int) -> None:
        at = int(mem.arena.ctypes.data) + (addr - mem.base)
        got = _libc.mmap(at, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | MAP_FIXED, fd, offset)
        if got != at:
            raise CudaError(Err.MEMORY_ALLOCATION, f"cannot map device memory: {os.strerror(ctypes.get_errno())}")

    def map(self, ptr: int, size: int, offset: int, handle: int) -> None:
        p = self.handles.get(handle)
        if p is None or p.released:
            raise CudaError(Err.INVALID_VALUE, f"cuMemMap: {handle:#x} is not a live allocation handle")
        _granular("cuMemMap size", size)
        if ptr % GRANULARITY or offset % GRANULARITY or offset + size > p.size:
            raise CudaError(Err.INVALID_VALUE, f"cuMemMap: {size:#x} bytes at offset {offset:#x} of a {p.size:#x}-"
                            f"byte allocation to {ptr:#x} (address and offset must be granularity-aligned)")
        r = self._reservation("cuMemMap", ptr, size)
        for a, m in r.maps.items():
            if a < ptr + size and ptr < a + m.size:
                raise CudaError(Err.INVALID_VALUE, f"cuMemMap: {ptr:#x}+{size:#x} overlaps the mapping at {a:#x}")
        if p.dev != r.dev:
            raise CudaError(Err.NOT_SUPPORTED, f"cuMemMap: the emulator maps device {p.dev}'s memory only into "
                            f"ranges reserved while device {p.dev} was current (this one: device {r.dev})")
        mem, pool = self.memories[r.dev], self.pools[p.dev]
        assert pool.fd is not None
        self._mmap(mem, ptr, size, pool.fd, p.offset + offset)
        r.maps[ptr] = Mapping(size, handle)
        p.mappings += 1

    def unmap(self, ptr: int, size: int) -> None:
        r, starts = self._whole_mappings("cuMemUnmap", ptr, size)
        mem = self.memories[r.dev]
        assert mem.fd is not None
        for a in starts:
            m = r.maps.pop(a)
            # the window's own (never used) pages back in place
            self._mmap(mem, a, m.size, mem.fd, a - mem.base)
            p = self.handles[m.handle]
            p.mappings -= 1
            self._maybe_free(m.handle, p)
        self._retrack(r)

    def set_access(self, ptr: int, size: int, dev: int, flags: int) -> None:
        r, starts = self._whole_mappings("cuMemSetAccess", ptr, size)
        if flags not in (ACCESS_NONE, ACCESS_READ, ACCESS_READWRITE):
            raise CudaError(Err.INVALID_VALUE, f"cuMemSetAccess: unknown access flags {flags}")
        if dev != r.dev:
            raise CudaError(Err.NOT_SUPPORTED, f"cuMemSetAccess: access from device {dev} to memory of device "
                            f"{r.dev} is not emulated")
        if flags == ACCESS_READ:
            raise CudaError(Err.NOT_SUPPORTED, "cuMemSetAccess: read-only access (CU_MEM_ACCESS_FLAGS_PROT_READ) "
                            "is not emulated; use PROT_READWRITE")
        for a in starts:
            r.maps[a].access = flags == ACCESS_READWRITE
        self._retrack(r)

    def _retrack(self, r: Reservation) -> None:
        """Registers the reservation's accessible mapped ranges, adjacent ones merged, with its device memory."""
        mem = self.memories[r.dev]
        for a in r.runs:
            mem.untrack(a)
        runs: list[list[int]] = []
        for a in sorted(r.maps):
            m = r.maps[a]
            if not m.access:
                continue
            if runs and runs[-1][0] + runs[-1][1] == a:
                runs[-1][1] += m.size
            else:
                runs.append([a, m.size])
        for a, n in runs:
            mem.track(a, n, "vmm")
        r.runs = [a for a, _ in runs]

    def reset(self, dev: int | None = None) -> None:
        """Unmaps and frees everything of dev (every device when None): cudaDeviceReset, session end."""
        for r in [r for r in self.reservations.values() if dev is None or r.dev == dev]:
            for a in sorted(r.maps):
                self.unmap(a, r.maps[a].size)
            self.address_free(r.addr, r.size)
        for h, p in list(self.handles.items()):
            if dev is None or p.dev == dev:
                p.released = True
                self._maybe_free(h, p)
        if dev is None:
            for pool in self.pools.values():
                pool.close()
            self.pools.clear()
