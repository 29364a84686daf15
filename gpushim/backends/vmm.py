"""Virtual memory management of the driver face (CUDA Driver API reference, "Virtual Memory Management":
cuMemAddressReserve / cuMemCreate / cuMemMap / cuMemSetAccess / cuMemUnmap / cuMemRelease / cuMemAddressFree),
the bookkeeping both backends share: one session's reservations, physical allocations (by handles of this
session, never the driver's own, with their references: cuMemRetainAllocationHandle adds one) and mappings,
the argument checks, which mapped ranges are accessible (cuMemGetAccess), and the allocations' own files for
POSIX-descriptor sharing (cuMemExportToShareableHandle / cuMemImportFromShareableHandle).

Accessible ranges are registered with the backend session's pointer table (adjacent accessible mappings as
one range), so copies and kernels are checked against them like any allocation and may cross the boundary
between two mappings, as on a GPU. A backend subclasses VmmTable with the hooks at the end: the emulator's
is gpushim/backends/emulator/vmm.py, the cuda backend's gpushim/backends/cuda/vmm.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from gpushim.cuda_errors import CudaError, Err

GRANULARITY = 2 << 20  # cuMemGetAllocationGranularity on current GPUs (minimum and recommended); shim/drv_vmm.c
ACCESS_NONE, ACCESS_READ, ACCESS_READWRITE = 0, 1, 3  # CUmemAccess_flags
HANDLE_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR (CUmemAllocationHandleType)


@dataclass
class Physical:
    dev: int
    size: int
    obj: Any  # the backend's: a pool offset, a driver handle
    refs: int = 1  # cuMemCreate / import: 1; cuMemRetainAllocationHandle +1; cuMemRelease -1
    mappings: int = 0
    types: int = 0  # CUmemAllocationProp.requestedHandleTypes: what it may be exported as
    fd: int | None = None  # its own file (exportable or imported memory), else None


@dataclass
class Mapping:
    size: int
    handle: int
    offset: int = 0  # into the physical allocation
    access: set[int] = field(default_factory=set)  # devices with access (cuMemSetAccess)


@dataclass
class Reservation:
    dev: int
    addr: int
    size: int
    maps: dict[int, Mapping] = field(default_factory=dict)  # start address -> mapping
    runs: list[int] = field(default_factory=list)  # starts of the ranges registered with the pointer table


def granular(what: str, value: int) -> None:
    if value <= 0 or value % GRANULARITY:
        raise CudaError(Err.INVALID_VALUE, f"{what}: {value:#x} is not a positive multiple of the allocation "
                        f"granularity ({GRANULARITY:#x})")


class VmmTable:
    def __init__(self) -> None:
        self.reservations: dict[int, Reservation] = {}  # start -> reservation
        self.handles: dict[int, Physical] = {}
        self._next_handle = 1

    # -- address ranges -----------------------------------------------------------------------------------
    def reserve(self, dev: int, size: int, alignment: int, hint: int) -> int:
        granular("cuMemAddressReserve size", size)
        if alignment & (alignment - 1):
            raise CudaError(Err.INVALID_VALUE, f"cuMemAddressReserve: alignment {alignment:#x} is not a power of two")
        ptr = self._va_reserve(dev, size, max(alignment, GRANULARITY), hint)
        self.reservations[ptr] = Reservation(dev, ptr, size)
        return ptr

    def address_free(self, ptr: int, size: int) -> None:
        r = self.reservations.get(ptr)
        if r is None or r.size != size:
            raise CudaError(Err.INVALID_VALUE, f"cuMemAddressFree: {size:#x} bytes at {ptr:#x} are not a reservation "
                            "made by cuMemAddressReserve (the size must be the reserved size)")
        if r.maps:
            raise CudaError(Err.INVALID_VALUE, f"cuMemAddressFree: the reservation at {ptr:#x} still has "
                            f"{len(r.maps)} mapping(s); cuMemUnmap them first")
        self._va_free(r)
        del self.reservations[ptr]

    # -- physical memory ----------------------------------------------------------------------------------
    def create(self, dev: int, size: int, types: int = 0) -> int:
        granular("cuMemCreate size", size)
        return self._add(self._phys_create(dev, size, types))

    def _add(self, p: Physical) -> int:
        handle = self._next_handle
        self._next_handle += 1
        self.handles[handle] = p
        return handle

    def _live(self, what: str, handle: int) -> Physical:
        p = self.handles.get(handle)
        if p is None or p.refs <= 0:
            raise CudaError(Err.INVALID_VALUE, f"{what}: {handle:#x} is not a live allocation handle of this session")
        return p

    def release(self, handle: int) -> None:
        p = self._live("cuMemRelease", handle)
        p.refs -= 1
        self._maybe_free(handle, p)

    def _maybe_free(self, handle: int, p: Physical) -> None:
        # CUDA: the memory is freed once every reference is released and no mapping uses it any more
        if p.refs <= 0 and p.mappings == 0:
            del self.handles[handle]
            self._phys_free(p)

    # -- queries (CUDA Driver API, "Virtual Memory Management") -------------------------------------------
    def _mapping_at(self, what: str, ptr: int) -> Mapping:
        for r in self.reservations.values():
            for a, m in r.maps.items():
                if a <= ptr < a + m.size:
                    return m
        raise CudaError(Err.INVALID_VALUE, f"{what}: {ptr:#x} is not inside a range mapped by cuMemMap")

    def get_access(self, ptr: int, dev: int) -> int:
        """cuMemGetAccess: the access flags dev has to the mapping that holds ptr."""
        return ACCESS_READWRITE if dev in self._mapping_at("cuMemGetAccess", ptr).access else ACCESS_NONE

    def retain(self, ptr: int) -> tuple[int, Physical]:
        """cuMemRetainAllocationHandle: the handle mapped at ptr (any address in the mapping), one more
        reference that cuMemRelease gives back; valid even after the creator released its own."""
        m = self._mapping_at("cuMemRetainAllocationHandle", ptr)
        p = self.handles[m.handle]
        p.refs += 1
        return m.handle, p

    def export(self, handle: int) -> int:
        """cuMemExportToShareableHandle as a POSIX file descriptor: the descriptor, in this process, of the
        allocation's own file."""
        p = self._live("cuMemExportToShareableHandle", handle)
        if not p.types & HANDLE_POSIX_FD or p.fd is None:
            raise CudaError(Err.INVALID_VALUE, "cuMemExportToShareableHandle: the allocation was not created with "
                            "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR in CUmemAllocationProp.requestedHandleTypes")
        return p.fd

    def import_fd(self, dev: int, fd: int) -> tuple[int, Physical]:
        """cuMemImportFromShareableHandle of a POSIX file descriptor (this process's copy, which it then owns)."""
        try:
            p = self._phys_import(dev, fd)
        except BaseException:
            os.close(fd)
            raise
        return self._add(p), p

    # -- mappings -----------------------------------------------------------------------------------------
    def _reservation(self, what: str, ptr: int, size: int) -> Reservation:
        for r in self.reservations.values():
            if r.addr <= ptr and ptr + size <= r.addr + r.size:
                return r
        raise CudaError(Err.INVALID_VALUE, f"{what}: {size:#x} bytes at {ptr:#x} are not inside one reservation "
                        "of cuMemAddressReserve")

    def _whole_mappings(self, what: str, ptr: int, size: int) -> tuple[Reservation, list[int]]:
        """The mappings that exactly tile [ptr, ptr+size)."""
        if size <= 0:
            raise CudaError(Err.INVALID_VALUE, f"{what}: empty range")
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

    def map(self, ptr: int, size: int, offset: int, handle: int) -> None:
        p = self._live("cuMemMap", handle)
        granular("cuMemMap size", size)
        if ptr % GRANULARITY or offset % GRANULARITY or offset + size > p.size:
            raise CudaError(Err.INVALID_VALUE, f"cuMemMap: {size:#x} bytes at offset {offset:#x} of a {p.size:#x}-"
                            f"byte allocation to {ptr:#x} (address and offset must be granularity-aligned)")
        r = self._reservation("cuMemMap", ptr, size)
        for a, m in r.maps.items():
            if a < ptr + size and ptr < a + m.size:
                raise CudaError(Err.INVALID_VALUE, f"cuMemMap: {ptr:#x}+{size:#x} overlaps the mapping at {a:#x}")
        self._do_map(r, ptr, size, p, offset)
        r.maps[ptr] = Mapping(size, handle, offset)
        p.mappings += 1

    def unmap(self, ptr: int, size: int) -> None:
        r, starts = self._whole_mappings("cuMemUnmap", ptr, size)
        for a in starts:
            m = r.maps[a]
            self._do_unmap(r, a, m.size)
            del r.maps[a]
            p = self.handles[m.handle]
            p.mappings -= 1
            self._maybe_free(m.handle, p)
        self._retrack(r)

    def set_access(self, ptr: int, size: int, dev: int, flags: int) -> None:
        r, starts = self._whole_mappings("cuMemSetAccess", ptr, size)
        if flags not in (ACCESS_NONE, ACCESS_READ, ACCESS_READWRITE):
            raise CudaError(Err.INVALID_VALUE, f"cuMemSetAccess: unknown access flags {flags}")
        self._do_access(r, ptr, size, dev, flags)
        for a in starts:
            if flags == ACCESS_NONE:
                r.maps[a].access.discard(dev)
            else:
                r.maps[a].access.add(dev)
        self._retrack(r)

    def _retrack(self, r: Reservation) -> None:
        """Registers the reservation's accessible mapped ranges, adjacent ones merged."""
        for a in r.runs:
            self._untrack(r.dev, a)
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
            self._track(r.dev, a, n)
        r.runs = [a for a, _ in runs]

    def reset(self, dev: int | None = None) -> None:
        """Unmaps and frees everything of dev (every device when None): cudaDeviceReset, the session's end."""
        for r in [r for r in self.reservations.values() if dev is None or r.dev == dev]:
            for a in sorted(r.maps):
                self.unmap(a, r.maps[a].size)
            self.address_free(r.addr, r.size)
        for h, p in list(self.handles.items()):
            if dev is None or p.dev == dev:
                p.refs = 0
                self._maybe_free(h, p)

    # -- what a backend provides --------------------------------------------------------------------------
    def _va_reserve(self, dev: int, size: int, align: int, hint: int) -> int:
        raise NotImplementedError

    def _va_free(self, r: Reservation) -> None:
        raise NotImplementedError

    def _phys_create(self, dev: int, size: int, types: int) -> Physical:
        raise NotImplementedError

    def _phys_import(self, dev: int, fd: int) -> Physical:
        raise NotImplementedError

    def _phys_free(self, p: Physical) -> None:
        raise NotImplementedError

    def _do_map(self, r: Reservation, ptr: int, size: int, p: Physical, offset: int) -> None:
        raise NotImplementedError

    def _do_unmap(self, r: Reservation, ptr: int, size: int) -> None:
        raise NotImplementedError

    def _do_access(self, r: Reservation, ptr: int, size: int, dev: int, flags: int) -> None:
        raise NotImplementedError

    def _track(self, dev: int, addr: int, size: int) -> None:
        raise NotImplementedError

    def _untrack(self, dev: int, addr: int) -> None:
        raise NotImplementedError
