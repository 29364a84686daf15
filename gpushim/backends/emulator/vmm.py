"""Virtual memory management on the emulator (the bookkeeping and checks: gpushim/backends/vmm.py).

A device's mapping (memory.py) spans its whole window: allocations live in [0, capacity), and the rest is
the device's virtual address space for reservations. Physical memory made by cuMemCreate comes from a
second memfd per device (the pool, charged to the session like any allocation, and counted as the device's
memory in use). cuMemMap maps the pool's pages over the reserved addresses of the device's mapping
(MAP_FIXED, as IPC does), so copies and kernels that address the range read and write the physical memory
in place, and one physical allocation mapped at two addresses is one set of bytes. A mapped range becomes
addressable (memory.track) only once cuMemSetAccess gives read-write access, as CUDA requires.

Kernels of a device with peer access enabled run over the session's peer span (peers.py); every mapping is
made there too. Access is per range, not per device: a mapped range with access for any device is
addressable from its own device, and from another one whose kernels have peer access to it
(cudaDeviceEnablePeerAccess), which is how CUDA programs that grant peers access (PyTorch does) use it.
Refused with NOT_SUPPORTED: read-only access, and mapping one device's physical memory into a range
reserved on another device.

Shareable allocations (requestedHandleTypes with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) get a memfd of
their own instead of pool pages, sealed against shrinking and growing, so a client holding the exported
descriptor can never make the server's mapping fault. cuMemExportToShareableHandle hands out that file
(the client opens it through /proc, as managed memory's); cuMemImportFromShareableHandle takes such a file
from any session (it comes with the frame, SCM_RIGHTS) and charges it to the importer too, so no session
holds memory its quota does not count.
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
from collections.abc import Callable

from gpushim.backends.emulator.memory import DeviceMemory
from gpushim.backends.emulator.peers import PeerSpace
from gpushim.backends.vmm import ACCESS_READ, GRANULARITY, HANDLE_POSIX_FD, Physical, Reservation, VmmTable
from gpushim.cuda_errors import CudaError, Err

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
MAP_FIXED = 0x10
# the file of a shareable allocation keeps its size for good: no shrink, no growth, no seals removed
SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class EmuVmm(VmmTable):
    """One session's reservations and physical allocations, over its devices' memories."""

    def __init__(self, memories: list[DeviceMemory], peer_space: Callable[[], PeerSpace | None]) -> None:
        super().__init__()
        self.memories = memories
        self.peer_space = peer_space  # the session's, once a peer access was enabled
        self.pools: dict[int, DeviceMemory] = {}
        # free virtual address space per device: sorted (address, size) holes above the allocator's range
        self._holes: dict[int, list[tuple[int, int]]] = {}

    def _va_holes(self, dev: int) -> list[tuple[int, int]]:
        if dev not in self._holes:
            m = self.memories[dev]
            lo = -(-m.capacity // GRANULARITY) * GRANULARITY
            self._holes[dev] = [(m.base + lo, m.span - lo)] if m.span > lo else []
        return self._holes[dev]

    def _va_reserve(self, dev: int, size: int, align: int, hint: int) -> int:
        holes = self._va_holes(dev)
        # the requested address when it is free and aligned (CUDA treats it as a hint), else first fit
        picks = ([hint] if hint and hint % align == 0 else []) + [-(-a // align) * align for a, _ in holes]
        for start in picks:
            for i, (a, n) in enumerate(holes):
                if a <= start and start + size <= a + n:
                    rest = [(a, start - a), (start + size, a + n - start - size)]
                    holes[i:i + 1] = [h for h in rest if h[1] > 0]
                    return start
        raise CudaError(Err.MEMORY_ALLOCATION, f"cuMemAddressReserve: no free range of {size:#x} bytes "
                        f"in device {dev}'s virtual address space")

    def _va_free(self, r: Reservation) -> None:
        holes = self._va_holes(r.dev)
        holes.append((r.addr, r.size))
        holes.sort()
        merged: list[tuple[int, int]] = []
        for a, n in holes:
            if merged and merged[-1][0] + merged[-1][1] == a:
                merged[-1] = (merged[-1][0], merged[-1][1] + n)
            else:
                merged.append((a, n))
        holes[:] = merged

    def _phys_create(self, dev: int, size: int, types: int) -> Physical:
        mem = self.memories[dev]
        if mem.fd is None:
            raise CudaError(Err.NOT_SUPPORTED, "cuMemCreate: virtual memory management needs device memory in a "
                            "memfd (memfd_create failed)")
        if size > mem.free_bytes:
            raise CudaError(Err.MEMORY_ALLOCATION, f"cuMemCreate: {size} bytes requested, {mem.free_bytes} free")
        if types & HANDLE_POSIX_FD:
            return self._own_file(dev, size, types)
        pool = self.pools.get(dev)
        if pool is None:
            pool = self.pools[dev] = DeviceMemory(mem.capacity, 0, mem.account, span=mem.capacity)
        offset = pool.alloc(size, kind="physical", align=mmap.PAGESIZE)  # charges the session's account
        self._used(mem, size)
        return Physical(dev, size, offset, types=types)

    def _own_file(self, dev: int, size: int, types: int) -> Physical:
        mem = self.memories[dev]
        mem.account.charge(size)
        try:
            fd = os.memfd_create("gpushim-vmm", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        except OSError as e:
            mem.account.release(size)
            raise CudaError(Err.MEMORY_ALLOCATION, f"cuMemCreate: memfd_create failed: {e.strerror}") from e
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
        except OSError as e:
            os.close(fd)
            mem.account.release(size)
            raise CudaError(Err.MEMORY_ALLOCATION, f"cuMemCreate: cannot size its file: {e.strerror}") from e
        self._used(mem, size)
        return Physical(dev, size, 0, types=types, fd=fd)

    def _phys_import(self, dev: int, fd: int) -> Physical:
        what = "cuMemImportFromShareableHandle"
        try:
            seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
            size = os.fstat(fd).st_size
        except OSError as e:
            raise CudaError(Err.INVALID_VALUE, f"{what}: the descriptor is not an exported allocation "
                            f"({e.strerror})") from e
        if seals & SEALS != SEALS or seals & (fcntl.F_SEAL_WRITE | getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x10)):
            raise CudaError(Err.INVALID_VALUE, f"{what}: the descriptor is not a file cuMemExportToShareableHandle "
                            "made (its size is not sealed, or it is not writable)")
        if size <= 0 or size % GRANULARITY:
            raise CudaError(Err.INVALID_VALUE, f"{what}: the file's {size} bytes are not a multiple of the "
                            f"allocation granularity ({GRANULARITY:#x})")
        mem = self.memories[dev]
        if size > mem.free_bytes:
            raise CudaError(Err.MEMORY_ALLOCATION, f"{what}: {size} bytes, {mem.free_bytes} free on device {dev}")
        mem.account.charge(size)  # the importer holds the memory too: its quota counts it
        self._used(mem, size)
        return Physical(dev, size, 0, types=HANDLE_POSIX_FD, fd=fd)

    def _phys_free(self, p: Physical) -> None:
        mem = self.memories[p.dev]
        if p.fd is not None:
            os.close(p.fd)
            mem.account.release(p.size)
        else:
            self.pools[p.dev].free(p.obj)
        self._used(mem, -p.size)

    def _backing(self, p: Physical, offset: int) -> tuple[int, int]:
        """The file and file offset of byte `offset` of the physical allocation."""
        if p.fd is not None:
            return p.fd, offset
        pool = self.pools[p.dev]
        assert pool.fd is not None
        return pool.fd, p.obj + offset

    @staticmethod
    def _used(mem: DeviceMemory, delta: int) -> None:
        mem.used += delta  # the device's free memory (cuMemGetInfo, placement) counts physical memory
        if mem.on_change is not None:
            mem.on_change(mem.used)

    def _mmap(self, mem: DeviceMemory, addr: int, size: int, fd: int, offset: int) -> None:
        # MAP_FIXED replaces whatever is there: only ever inside the device's own, still open, mapping
        if mem.arena.size < mem.span or not 0 <= addr - mem.base <= mem.span - size:
            raise CudaError(Err.INVALID_VALUE, f"{size:#x} bytes at {addr:#x} are outside device memory")
        at = int(mem.arena.ctypes.data) + (addr - mem.base)
        got = _libc.mmap(at, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | MAP_FIXED, fd, offset)
        if got != at:
            raise CudaError(Err.MEMORY_ALLOCATION, f"cannot map device memory: {os.strerror(ctypes.get_errno())}")

    def _do_map(self, r: Reservation, ptr: int, size: int, p: Physical, offset: int) -> None:
        if p.dev != r.dev:
            raise CudaError(Err.NOT_SUPPORTED, f"cuMemMap: the emulator maps device {p.dev}'s memory only into "
                            f"ranges reserved while device {p.dev} was current (this one: device {r.dev})")
        fd, at = self._backing(p, offset)
        self._mmap(self.memories[r.dev], ptr, size, fd, at)
        space = self.peer_space()
        if space is not None:
            space.overlay(ptr, size, fd, at)

    def _do_unmap(self, r: Reservation, ptr: int, size: int) -> None:
        mem = self.memories[r.dev]
        assert mem.fd is not None
        self._mmap(mem, ptr, size, mem.fd, ptr - mem.base)  # the window's own (never used) pages back in place
        space = self.peer_space()
        if space is not None:
            space.overlay(ptr, size, mem.fd, ptr - mem.base)

    def replay(self, space: PeerSpace) -> None:
        """A peer span made now gets the mappings made before it."""
        for r in self.reservations.values():
            for a, m in r.maps.items():
                space.overlay(a, m.size, *self._backing(self.handles[m.handle], m.offset))

    def _do_access(self, r: Reservation, ptr: int, size: int, dev: int, flags: int) -> None:
        if not 0 <= dev < len(self.memories):
            raise CudaError(Err.INVALID_DEVICE, f"cuMemSetAccess: device {dev} does not exist")
        if flags == ACCESS_READ:
            raise CudaError(Err.NOT_SUPPORTED, "cuMemSetAccess: read-only access (CU_MEM_ACCESS_FLAGS_PROT_READ) "
                            "is not emulated; use PROT_READWRITE")

    def _track(self, dev: int, addr: int, size: int) -> None:
        self.memories[dev].track(addr, size, "vmm")

    def _untrack(self, dev: int, addr: int) -> None:
        self.memories[dev].untrack(addr)

    def reset(self, dev: int | None = None) -> None:
        super().reset(dev)
        if dev is None:
            for pool in self.pools.values():
                pool.close()
            self.pools.clear()
