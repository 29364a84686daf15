"""Virtual memory management for the driver face (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess,
cuMemUnmap, cuMemRelease, cuMemAddressFree). The backend session's `vmm` does the work: the emulator's in
gpushim/backends/emulator/vmm.py, the cuda backend's in gpushim/backends/cuda/vmm.py.
A mixin of gpushim.server.session.Session, like the other ops_* modules."""

from __future__ import annotations

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
