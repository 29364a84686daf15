"""Virtual memory management on a real GPU: the driver's own cuMemAddressReserve / cuMemCreate / cuMemMap /
cuMemSetAccess / cuMemUnmap / cuMemRelease / cuMemAddressFree through cuda.bindings.driver, with the shared
bookkeeping and checks of gpushim/backends/vmm.py (clients see handles of their session, never the
driver's). Physical memory is charged to the session's quota; accessible ranges join the session's pointer
table, so copies and launches check them like any allocation."""

from __future__ import annotations

import os
from typing import Any

from gpushim.backends.cuda.errors import check
from gpushim.backends.vmm import HANDLE_POSIX_FD, Physical, Reservation, VmmTable
from gpushim.cuda_errors import CudaError, Err


class CudaVmm(VmmTable):
    def __init__(self, session: Any) -> None:
        super().__init__()
        self.s = session

    def _va_reserve(self, dev: int, size: int, align: int, hint: int) -> int:
        cu = self.s.cu
        self.s._use(dev)
        return int(check(cu.cuMemAddressReserve(size, align, cu.CUdeviceptr(hint), 0), "cuMemAddressReserve"))

    def _va_free(self, r: Reservation) -> None:
        cu = self.s.cu
        check(cu.cuMemAddressFree(cu.CUdeviceptr(r.addr), r.size), "cuMemAddressFree")

    def _phys_create(self, dev: int, size: int, types: int) -> Physical:
        cu = self.s.cu
        self.s._use(dev)
        prop = cu.CUmemAllocationProp()
        prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = int(self.s.cudevs[dev])
        prop.requestedHandleTypes = cu.CUmemAllocationHandleType(types & HANDLE_POSIX_FD)
        self.s.account.charge(size)
        try:
            obj = check(cu.cuMemCreate(size, prop, 0), "cuMemCreate")
        except Exception:
            self.s.account.release(size)
            raise
        if not types & HANDLE_POSIX_FD:
            return Physical(dev, size, obj, types=types)
        try:  # the driver's descriptor, made once: what export hands out (the client opens it through /proc)
            fd = check(cu.cuMemExportToShareableHandle(obj, cu.CUmemAllocationHandleType(HANDLE_POSIX_FD), 0),
                       "cuMemExportToShareableHandle")
        except Exception:
            check(cu.cuMemRelease(obj), "cuMemRelease")
            self.s.account.release(size)
            raise
        return Physical(dev, size, obj, types=types, fd=int(fd))

    def _phys_import(self, dev: int, fd: int) -> Physical:
        # The driver would import it (cuMemImportFromShareableHandle), but reports no size for the handle it
        # gives, and the session's quota and cuMemMap's bounds check need one: refused rather than guessed.
        raise CudaError(Err.NOT_SUPPORTED, "cuMemImportFromShareableHandle is not available on the cuda backend: "
                        "the driver does not report the imported allocation's size, which the session's quota needs")

    def _phys_free(self, p: Physical) -> None:
        check(self.s.cu.cuMemRelease(p.obj), "cuMemRelease")
        if p.fd is not None:
            os.close(p.fd)
        self.s.account.release(p.size)

    def _do_map(self, r: Reservation, ptr: int, size: int, p: Physical, offset: int) -> None:
        cu = self.s.cu
        check(cu.cuMemMap(cu.CUdeviceptr(ptr), size, offset, p.obj, 0), "cuMemMap")

    def _do_unmap(self, r: Reservation, ptr: int, size: int) -> None:
        cu = self.s.cu
        check(cu.cuMemUnmap(cu.CUdeviceptr(ptr), size), "cuMemUnmap")

    def _do_access(self, r: Reservation, ptr: int, size: int, dev: int, flags: int) -> None:
        cu = self.s.cu
        desc = cu.CUmemAccessDesc()
        desc.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        desc.location.id = int(self.s.cudevs[self.s._dev(dev)])
        desc.flags = cu.CUmemAccess_flags(flags)
        check(cu.cuMemSetAccess(cu.CUdeviceptr(ptr), size, [desc], 1), "cuMemSetAccess")

    def _track(self, dev: int, addr: int, size: int) -> None:
        from gpushim.backends.cuda.backend import _Alloc

        self.s._add(_Alloc(addr, size, dev, "vmm"))

    def _untrack(self, dev: int, addr: int) -> None:
        self.s._remove(addr)
