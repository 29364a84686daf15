"""Virtual memory management for the driver face (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess,
cuMemUnmap, cuMemRelease, cuMemAddressFree, cuMemGetAccess, cuMemRetainAllocationHandle, and POSIX-fd
cuMemExportToShareableHandle / cuMemImportFromShareableHandle). The backend session's `vmm` does the work:
the emulator's in gpushim/backends/emulator/vmm.py, the cuda backend's in gpushim/backends/cuda/vmm.py.
A mixin of gpushim.server.session.Session, like the other ops_* modules."""

from __future__ import annotations

import os
from typing import Any

from gpushim.cuda_errors import CudaError, Err


class VmmOps:
    def _vmm(self) -> Any:
        vmm = getattr(self.bs, "vmm", None)
        if vmm is None:
            raise CudaError(Err.NOT_SUPPORTED, "virtual memory management is not available on this server's backend")
        return vmm

    def op_vmm_reserve(self, dev: int, size: int, alignment: int, addr: int) -> list[Any]:
        return [self._vmm().reserve(self._dev(dev), size, alignment, addr)]

    def op_vmm_free(self, what: int, obj: int, size: int) -> list[Any]:
        if what == 0:
            self._vmm().address_free(obj, size)
        else:
            self._vmm().release(obj)
        return []

    def op_vmm_create(self, dev: int, size: int) -> list[Any]:
        return [self._vmm().create(self._dev(dev), size)]

    def op_vmm_map(self, ptr: int, size: int, offset: int, handle: int) -> list[Any]:
        self._vmm().map(ptr, size, offset, handle)
        return []

    def op_vmm_unmap(self, ptr: int, size: int) -> list[Any]:
        self._vmm().unmap(ptr, size)
        return []

    def op_vmm_set_access(self, ptr: int, size: int, dev: int, flags: int) -> list[Any]:
        self._vmm().set_access(ptr, size, self._dev(dev), flags)
        return []

    def op_vmm_create_shareable(self, dev: int, size: int, types: int) -> list[Any]:
        return [self._vmm().create(self._dev(dev), size, types)]

    def op_vmm_retain(self, ptr: int) -> list[Any]:
        handle, p = self._vmm().retain(ptr)
        return [handle, p.dev, p.size, p.types]

    def op_vmm_get_access(self, ptr: int, dev: int) -> list[Any]:
        return [self._vmm().get_access(ptr, self._dev(dev))]

    def op_vmm_export(self, handle: int) -> list[Any]:
        if self.info.transport != "unix":
            raise CudaError(Err.NOT_SUPPORTED, "cuMemExportToShareableHandle: a POSIX file descriptor reaches only a "
                            "client on the server's host (this client connected over TCP)")
        return [os.getpid(), self._vmm().export(handle)]

    def op_vmm_import(self, dev: int) -> list[Any]:
        if not self.received_fds:
            raise CudaError(Err.INVALID_VALUE, "VMM_IMPORT arrived without its file descriptor")
        fd = self.received_fds.pop(0)
        try:
            vmm = self._vmm()
            d = self._dev(dev)
        except BaseException:
            os.close(fd)
            raise
        handle, p = vmm.import_fd(d, fd)  # owns fd from here
        return [handle, p.size]
