"""CUDA IPC memory handles between sessions of one server, on the emulator.

Each session's device memory is a memfd in its worker process (memory.py). Exporting an allocation writes a
record (the worker's pid, the memfd, its inode, the allocation's offset and size) to the server's IPC
directory, under a random 128-bit name; the handle carries that name, so a handle cannot be forged and
names (server directory, session, allocation). Opening a handle in another session maps the exporter's
pages over a page-aligned region of the importer's own arena (MAP_FIXED): kernels and copies of the
importer read and write the exporter's memory in place. Closing maps the importer's own pages back.

Event handles: an event created with cudaEventInterprocess keeps its record and completion generations in a
file of the IPC directory once exported; the importing session's event is backed by the same file.

A record is removed when its exporting session ends. Memory the exporter frees while another session has it
open reads as zeros there (CUDA leaves this undefined too).
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import secrets
from pathlib import Path

from gpushim.backends.emulator.memory import DeviceMemory
from gpushim.backends.emulator.streams import EmuEvent
from gpushim.cuda_errors import CudaError, Err

MAGIC = b"GSIPCMEM"
HANDLE_SIZE = 64  # cudaIpcMemHandle_t
PAGE = mmap.PAGESIZE

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
MAP_FIXED = 0x10


def _arena_address(mem: DeviceMemory) -> int:
    return int(mem.arena.ctypes.data)


def _map_over(mem: DeviceMemory, region: int, span: int, fd: int, offset: int) -> None:
    addr = _arena_address(mem) + (region - mem.base)
    got = _libc.mmap(addr, span, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | MAP_FIXED, fd, offset)
    if got != addr:
        err = ctypes.get_errno()
        raise CudaError(Err.MEMORY_ALLOCATION, f"cannot map IPC memory: {os.strerror(err)}")


class IpcTable:
    """One session's exports and imports."""

    def __init__(self, memories: list[DeviceMemory], directory: Path) -> None:
        self.memories = memories
        self.dir = directory
        self.exports: dict[tuple[int, int], str] = {}  # (address, size) of an allocation or (0, id(event)) -> record
        self.imports: dict[int, tuple[DeviceMemory, int, int]] = {}  # pointer -> (memory, region, span)
        self.event_exports: dict[int, str] = {}  # id(event) -> record name

    def export(self, ptr: int) -> bytes:
        mem = next((m for m in self.memories if m.owns(ptr)), None)
        a = mem.find(ptr) if mem else None
        if mem is None or a is None or a.kind not in ("device", "pitched"):
            raise CudaError(Err.INVALID_VALUE, f"{ptr:#x} is not in a device allocation of this session")
        if mem.fd is None:
            raise CudaError(Err.NOT_SUPPORTED, "IPC needs device memory in a memfd (Linux)")
        name = self.exports.get((a.addr, a.size))  # the same handle again for the same allocation
        if name is None:
            name = secrets.token_hex(16)
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            record = {"pid": os.getpid(), "fd": mem.fd, "ino": os.fstat(mem.fd).st_ino,
                      "offset": a.addr - mem.base, "size": a.size}
            tmp = self.dir / f".{name}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(record, f)
            os.rename(tmp, self.dir / name)
            self.exports[(a.addr, a.size)] = name
        return MAGIC + bytes.fromhex(name) + bytes(HANDLE_SIZE - len(MAGIC) - 16)

    def open(self, dev: int, handle: bytes) -> tuple[int, int]:
        mem = self.memories[dev]
        if len(handle) != HANDLE_SIZE or handle[:len(MAGIC)] != MAGIC:
            raise CudaError(Err.INVALID_VALUE, "not an IPC memory handle of gpushim")
        name = handle[len(MAGIC):len(MAGIC) + 16].hex()
        try:
            record = json.loads((self.dir / name).read_text())
        except (OSError, ValueError):
            raise CudaError(Err.INVALID_VALUE, "unknown IPC memory handle (its session ended, or another "
                            "server made it)") from None
        if record["pid"] == os.getpid():
            # CUDA: a handle cannot be opened in the process that made it
            raise CudaError(Err.INVALID_CONTEXT, "an IPC memory handle cannot be opened by the session that made it")
        try:
            fd = os.open(f"/proc/{record['pid']}/fd/{record['fd']}", os.O_RDWR)
        except OSError as e:
            raise CudaError(Err.INVALID_VALUE, f"the exporting session is gone: {e}") from None
        try:
            if os.fstat(fd).st_ino != record["ino"]:
                raise CudaError(Err.INVALID_VALUE, "the exporting session is gone")
            offset, size = record["offset"], record["size"]
            lo, hi = offset // PAGE * PAGE, -(-(offset + size) // PAGE) * PAGE
            span = max(hi - lo, PAGE)
            region = mem.alloc(span, kind="ipc", align=PAGE)
            try:
                _map_over(mem, region, span, fd, lo)
            except CudaError:
                mem.free(region)
                raise
        finally:
            os.close(fd)
        ptr = region + (offset - lo)
        self.imports[ptr] = (mem, region, span)
        return ptr, size

    def close(self, ptr: int) -> None:
        entry = self.imports.pop(ptr, None)
        if entry is None:
            raise CudaError(Err.INVALID_VALUE, f"{ptr:#x} is not an opened IPC memory handle")
        mem, region, span = entry
        if mem.fd is not None:
            _map_over(mem, region, span, mem.fd, region - mem.base)  # the importer's own pages again
        mem.free(region)

    def export_event(self, e: EmuEvent) -> bytes:
        return export_event(self, e)

    def open_event(self, dev: int, handle: bytes) -> EmuEvent:
        return open_event(self, dev, handle)

    def close_all(self) -> None:
        for name in self.exports.values():
            try:
                (self.dir / name).unlink()
            except OSError:
                pass
        self.exports.clear()


# -- event handles ----------------------------------------------------------------------------------------

EVENT_MAGIC = b"GSIPCEVT"
EVENT_INTERPROCESS, EVENT_DISABLE_TIMING = 0x4, 0x2


class SharedEmuEvent(EmuEvent):
    """An event whose record and completion generations live in a file shared by the sessions that hold it."""

    _shm: mmap.mmap

    @property
    def recorded(self) -> int:  # type: ignore[override]
        return int.from_bytes(self._shm[0:8], "little")

    @recorded.setter
    def recorded(self, v: int) -> None:
        self._shm[0:8] = v.to_bytes(8, "little")

    @property
    def completed(self) -> int:  # type: ignore[override]
        return int.from_bytes(self._shm[8:16], "little")

    @completed.setter
    def completed(self, v: int) -> None:
        self._shm[8:16] = v.to_bytes(8, "little")


def _share(e: EmuEvent, path: Path, create: bool) -> None:
    if create:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, mmap.PAGESIZE)
    else:
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            raise CudaError(Err.INVALID_VALUE, "unknown IPC event handle (its session ended, or another server "
                            "made it)") from None
    try:
        shm = mmap.mmap(fd, mmap.PAGESIZE, flags=mmap.MAP_SHARED)
    finally:
        os.close(fd)
    recorded, completed = e.__dict__.pop("recorded", 0), e.__dict__.pop("completed", 0)
    e._shm = shm  # type: ignore[attr-defined]
    e.__class__ = SharedEmuEvent
    if create:
        e.recorded, e.completed = recorded, completed


def export_event(table: IpcTable, e: EmuEvent) -> bytes:
    # CUDA: only events created with cudaEventInterprocess | cudaEventDisableTiming have handles
    if not (e.flags & EVENT_INTERPROCESS and e.flags & EVENT_DISABLE_TIMING):
        raise CudaError(Err.INVALID_RESOURCE_HANDLE, "the event was not created with cudaEventInterprocess and "
                        "cudaEventDisableTiming")
    name = table.event_exports.get(id(e))
    if name is None:
        name = secrets.token_hex(16)
        table.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        _share(e, table.dir / f"{name}.event", create=True)
        table.event_exports[id(e)] = name
        table.exports[(0, id(e))] = f"{name}.event"  # removed with the session's other records
    return EVENT_MAGIC + bytes.fromhex(name) + bytes(HANDLE_SIZE - len(EVENT_MAGIC) - 16)


def open_event(table: IpcTable, dev: int, handle: bytes) -> EmuEvent:
    if len(handle) != HANDLE_SIZE or handle[:len(EVENT_MAGIC)] != EVENT_MAGIC:
        raise CudaError(Err.INVALID_VALUE, "not an IPC event handle of gpushim")
    name = handle[len(EVENT_MAGIC):len(EVENT_MAGIC) + 16].hex()
    if name in table.event_exports.values():
        raise CudaError(Err.INVALID_CONTEXT, "an IPC event handle cannot be opened by the session that made it")
    e = EmuEvent(dev, EVENT_INTERPROCESS | EVENT_DISABLE_TIMING)
    _share(e, table.dir / f"{name}.event", create=False)
    return e
