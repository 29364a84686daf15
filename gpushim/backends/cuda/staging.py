"""Pinned staging buffers for copies between the client's bytes and device memory.

Data arrives from the client in pageable Python buffers; the DMA engines copy asynchronously only from
page-locked memory. A host-to-device copy is cut into chunks, each copied into a pinned buffer and queued
(cuMemcpyHtoDAsync) on the application's stream, so filling chunk i+1 overlaps the transfer of chunk i.
Each buffer carries a fence event recorded after the copy that uses it; it is reused once that event has
completed, so nothing ever waits for a stream (which a host function in the client may be holding back).
When every buffer is still in flight a new one is allocated; beyond POOL_MAX buffers the extra ones are
freed again as soon as their copies complete.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from gpushim.backends.cuda.errors import check

CHUNK = 4 << 20
POOL_MAX = 8
MEMHOSTALLOC_PORTABLE = 0x1  # pinned for every context of the process, not only the current one
EVENT_DISABLE_TIMING = 0x2


class Pinned:
    def __init__(self, ptr: int, size: int, owner: int, temporary: bool) -> None:
        self.ptr = ptr
        self.size = size
        self.owner = owner  # the device whose context allocated it (cuDevicePrimaryCtxReset frees it)
        self.temporary = temporary
        self.view = np.ctypeslib.as_array((ctypes.c_ubyte * size).from_address(ptr))
        self.fences: dict[int, Any] = {}  # device -> CUevent in that device's context
        self.last: tuple[int, Any] | None = None  # (device, event) of the latest copy using it
        self.busy = False  # taken by a copy whose data has not been consumed yet (reads)


class StagingPool:
    def __init__(self, cu: Any, on_error: Any) -> None:
        self.cu = cu
        self.on_error = on_error  # records an asynchronous error found by a fence query
        self.buffers: list[Pinned] = []

    def _complete(self, b: Pinned) -> bool:
        if b.last is None:
            return True
        err = int(self.cu.cuEventQuery(b.last[1])[0])
        if err == 600:  # CUDA_ERROR_NOT_READY
            return False
        if err != 0:
            self.on_error(err, "a copy through a staging buffer")
        b.last = None
        return True

    def take(self, n: int, device: int) -> Pinned:
        """A pinned buffer of at least n bytes that no queued copy uses; `device` is the current one."""
        self.sweep()
        for b in self.buffers:
            if not b.busy and b.size >= n and self._complete(b):
                b.busy = True
                return b
        temporary = len(self.buffers) >= POOL_MAX or n > CHUNK
        size = n if temporary else CHUNK
        ptr = int(check(self.cu.cuMemHostAlloc(max(size, 1), MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc"))
        b = Pinned(ptr, max(size, 1), device, temporary)
        b.busy = True
        self.buffers.append(b)
        return b

    def fence(self, b: Pinned, device: int, stream: Any) -> None:
        """Records b's fence on `stream` (of `device`, whose context is current) after the copy using b."""
        ev = b.fences.get(device)
        if ev is None:
            ev = b.fences[device] = check(self.cu.cuEventCreate(EVENT_DISABLE_TIMING), "cuEventCreate")
        check(self.cu.cuEventRecord(ev, stream), "cuEventRecord")
        b.last = (device, ev)

    def give_back(self, b: Pinned) -> None:
        b.busy = False

    def wait(self, b: Pinned) -> None:
        """Blocks until b's latest copy completed (reads: the stream was idle when the copy was queued)."""
        if b.last is not None:
            check(self.cu.cuEventSynchronize(b.last[1]), "cuEventSynchronize")
            b.last = None

    def sweep(self) -> None:
        keep = []
        for b in self.buffers:
            if b.temporary and not b.busy and self._complete(b):
                self._free(b)
            else:
                keep.append(b)
        self.buffers = keep

    def _free(self, b: Pinned) -> None:
        for ev in b.fences.values():
            self.cu.cuEventDestroy(ev)
        self.cu.cuMemFreeHost(b.ptr)

    def forget_device(self, device: int) -> None:
        """After cuDevicePrimaryCtxReset(device): its buffers and events are gone with its context."""
        keep = []
        for b in self.buffers:
            b.fences.pop(device, None)
            if b.last is not None and b.last[0] == device:
                b.last = None
            if b.owner != device:
                keep.append(b)
        self.buffers = keep
