"""Memory: allocation, copies and memsets in stream order, host memory shared with the client (one host). A mixin
of gpushim.server.session.Session: the methods use the session's backend session (`self.bs`), handle tables and
helpers (`_dev`, `_stream`, ...)."""

from __future__ import annotations

import mmap
import os
from typing import Any

from gpushim.cuda_errors import CudaError, Err
from gpushim.server.wait import Wait


class MemoryOps:
    def op_malloc(self, dev: int, size: int) -> list[Any]:
        # the quota and the host's cap are charged by the backend session's account, for every kind of allocation
        return [self.bs.malloc(self._dev(dev), size)]

    def op_malloc_managed(self, dev: int, size: int) -> list[Any]:
        if self.info.transport != "unix":
            raise CudaError(Err.NOT_SUPPORTED, "managed memory needs the client on the server's host (a Unix socket)")
        ptr, pid, fd, base = self.bs.malloc_managed(self._dev(dev), size)
        return [ptr, pid, fd, base]

    def op_free_async(self, ptr: int, stream: int) -> list[Any]:
        s = self._stream(stream)
        self.bs.free_async(s, ptr)
        return []

    def op_malloc_pitch(self, dev: int, width: int, height: int) -> list[Any]:
        ptr, pitch = self.bs.malloc_pitch(self._dev(dev), width, height)
        return [ptr, pitch]

    def op_free(self, ptr: int) -> Wait:
        # cudaFree implicitly synchronises the device; a bad pointer fails at once, without waiting.
        def idle() -> bool:
            return all([self.bs.device_idle(d) for d in self.info.devices])

        if not self.waiting and idle():  # nothing to wait for: what progress() would do at once, without the Wait
            self._collect_async_errors()
            if self.sticky:
                self._check_free(ptr)  # a bad pointer is reported before the sticky error
                raise CudaError(*self.sticky)
            self.bs.free(ptr)  # which refuses a bad pointer itself: one lookup
            return []
        self._check_free(ptr)
        return Wait(idle, lambda: self.bs.free(ptr) or [])

    def _check_free(self, ptr: int) -> None:
        kind, _, base, _ = self.bs.pointer_info(ptr)
        if kind != 2 or base != ptr:
            raise CudaError(Err.INVALID_VALUE, f"cudaFree({ptr:#x}): not the start of a live device allocation")

    def op_memcpy_h2d(self, dst: int, stream: int, data: bytes) -> list[Any]:
        self.bs.write(self._stream(stream), dst, data)
        return []

    def op_memcpy_d2h(self, src: int, nbytes: int, stream: int) -> Wait:
        # queued in stream order now (after what the stream must wait for), answered once it has run
        ready, result = self.bs.read_ordered(self._stream(stream), src, nbytes)
        return Wait(ready, lambda: [result()])

    def op_memcpy_d2d(self, dst: int, src: int, nbytes: int, stream: int) -> list[Any]:
        self.bs.copy(self._stream(stream), dst, src, nbytes)
        return []

    def op_memcpy2d_h2d(self, dst: int, dpitch: int, width: int, height: int, stream: int, data: bytes) -> list[Any]:
        self.bs.write_2d(self._stream(stream), dst, dpitch, width, height, data)
        return []

    def op_memcpy2d_d2h(self, src: int, spitch: int, width: int, height: int, stream: int) -> Wait:
        ready, result = self.bs.read_2d_ordered(self._stream(stream), src, spitch, width, height)
        return Wait(ready, lambda: [result()])

    def op_memcpy2d_d2d(self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int,
                        stream: int) -> list[Any]:
        self.bs.copy_2d(self._stream(stream), dst, dpitch, src, spitch, width, height)
        return []

    def op_memset(self, dst: int, value: int, nbytes: int, stream: int) -> list[Any]:
        self.bs.memset(self._stream(stream), dst, value, nbytes)
        return []

    def op_memset2d(self, dst: int, pitch: int, value: int, width: int, height: int, stream: int) -> list[Any]:
        self.bs.memset_2d(self._stream(stream), dst, pitch, value, width, height)
        return []

    def op_host_map(self, shm: int, size: int) -> list[Any]:
        if not self.received_fds:
            raise CudaError(Err.INVALID_VALUE, "HOST_MAP arrived without its file descriptor")
        fd = self.received_fds.pop(0)
        try:
            if os.fstat(fd).st_size < size or size <= 0:
                raise CudaError(Err.INVALID_VALUE, f"shared memory {shm}: the file is smaller than {size} bytes")
            self.host_maps[shm] = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            self.log.debug("mapped %d bytes of the client's pinned memory (shared memory %d)", size, shm)
        finally:
            os.close(fd)
        return []

    def op_host_unmap(self, shm: int) -> list[Any]:
        if self.host_maps.pop(shm, None) is None:
            raise CudaError(Err.INVALID_VALUE, f"no shared memory {shm} in this session")
        return []

    def _shared(self, shm: int, offset: int, nbytes: int) -> memoryview:
        m = self.host_maps.get(shm)
        if m is None:
            raise CudaError(Err.INVALID_HOST_POINTER, f"no shared memory {shm} in this session")
        if offset < 0 or nbytes < 0 or offset + nbytes > len(m):
            raise CudaError(Err.INVALID_VALUE, f"{nbytes} bytes at offset {offset} run past shared memory {shm}")
        return memoryview(m)[offset : offset + nbytes]

    def op_memcpy_h2d_shm(self, dst: int, stream: int, shm: int, offset: int, nbytes: int) -> list[Any]:
        self.bs.write_shared(self._stream(stream), dst, self._shared(shm, offset, nbytes))
        return []

    def op_memcpy_h2d_staged(self, dst: int, stream: int, shm: int, offset: int, nbytes: int) -> list[Any]:
        self.bs.write(self._stream(stream), dst, self._shared(shm, offset, nbytes))
        return []

    def op_memcpy_d2h_shm(self, src: int, stream: int, shm: int, offset: int, nbytes: int) -> Wait:
        self.bs.read_into(self._stream(stream), src, self._shared(shm, offset, nbytes))
        return Wait(self._sync_point(stream))  # the copy just queued is the stream's last work

    def op_memcpy_peer(self, dst: int, dst_dev: int, src: int, src_dev: int, nbytes: int, dev: int) -> list[Any]:
        # cudaMemcpyPeer: serialised with all pending and later work of the current, source and destination
        # devices (on the current device's legacy stream); asynchronous with respect to the host.
        devices = sorted({self._dev(dev), self._dev(dst_dev), self._dev(src_dev)})
        for ptr, d, what in ((dst, dst_dev, "destination"), (src, src_dev, "source")):
            kind, owner, _, _ = self.bs.pointer_info(ptr)
            if kind != 2 or owner != self._dev(d):
                raise CudaError(Err.INVALID_VALUE, f"cudaMemcpyPeer: the {what} {ptr:#x} is not memory of device {d}")
        self.bs.copy_peer(self._stream(dev), dst, src, nbytes, devices)
        return []

    def op_pointer_info(self, ptr: int) -> list[Any]:
        kind, dev, base, size = self.bs.pointer_info(ptr)
        return [kind, self._client_dev(dev) if kind else -2, base, size]
