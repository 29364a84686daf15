"""The cuda backend's virtual memory management (gpushim/backends/cuda/vmm.py) through the real cuda-python
bindings (which type-check every argument) onto the stand-in driver: the driver calls it makes, the
session's pointer table and quota, aliasing, refusals. A real GPU is checked by tools/gpu_check.sh."""

from __future__ import annotations

import pytest

pytest.importorskip("cuda.bindings.driver")

from gpushim.backends.vmm import GRANULARITY as G  # noqa: E402
from gpushim.cuda_errors import CudaError, Err  # noqa: E402
from tests.cuda_backend.test_session_logic import make_session, pytestmark  # noqa: E402, F401


def test_reserve_create_map_access_copy_unmap() -> None:
    s, drv, _ = make_session()
    va = s.vmm.reserve(1, 4 * G, 0, 0)
    h = s.vmm.create(1, 2 * G)
    assert drv.created == [(1, 2 * G)]  # the physical memory is on the session's device 1
    s.vmm.map(va, G, 0, h)
    s.vmm.map(va + 2 * G, G, G, h)  # the second half of the same allocation, elsewhere
    with pytest.raises(CudaError):  # no access yet: the session's checks refuse the copy
        s.write(None, va, b"x")
    s.vmm.set_access(va, G, 1, 3)
    s.vmm.set_access(va + 2 * G, G, 1, 3)
    assert drv.access == [(va, G, 1, 3), (va + 2 * G, G, 1, 3)]
    s.write(None, va + G - 4, b"abcd")
    assert s.read(None, va + G - 4, 4) == b"abcd"
    with pytest.raises(CudaError) as ei:  # va + G is not mapped: the copy leaves the accessible range
        s.write(None, va + G - 2, b"abcd")
    assert ei.value.code == Err.INVALID_VALUE
    with pytest.raises(CudaError):  # cudaFree is for cudaMalloc's memory
        s.free(va)
    s.vmm.release(h)
    s.vmm.unmap(va, G)
    assert "cuMemRelease" not in drv.calls  # still mapped at va + 2G
    s.vmm.unmap(va + 2 * G, G)
    assert "cuMemRelease" in drv.calls and drv.physical == {}
    with pytest.raises(CudaError):
        s.read(None, va, 1)
    s.vmm.address_free(va, 4 * G)
    assert s.allocations() == []


def test_quota_and_bad_input() -> None:
    s, drv, _ = make_session()
    s.account.quota = 3 * G
    h = s.vmm.create(0, 2 * G)
    with pytest.raises(CudaError) as ei:  # the session's quota counts physical memory
        s.vmm.create(0, 2 * G)
    assert ei.value.code == Err.MEMORY_ALLOCATION and drv.created == [(0, 2 * G)]
    va = s.vmm.reserve(0, 2 * G, 0, 0)
    for bad in (lambda: s.vmm.map(va, G, 0, h + 99), lambda: s.vmm.map(va + 1, G, 0, h),
                lambda: s.vmm.map(va, 4 * G, 0, h), lambda: s.vmm.create(0, G + 1),
                lambda: s.vmm.set_access(va, G, 0, 3), lambda: s.vmm.unmap(va, G),
                lambda: s.vmm.address_free(va, G), lambda: s.vmm.reserve(0, G, 3, 0)):
        with pytest.raises(CudaError) as ei:
            bad()
        assert ei.value.code == Err.INVALID_VALUE
    s.vmm.map(va, G, 0, h)
    s.reset_device(0)  # cudaDeviceReset: unmapped, released, unreserved
    assert s.vmm.reservations == {} and s.vmm.handles == {} and drv.physical == {}


def test_module_unload(fatbin: bytes) -> None:
    """cuModuleUnload (MODULE_UNLOAD): the driver's module on each device it was loaded on, and the session's
    record of its variables, so a copy to one is refused; a later use loads the image again."""
    import hashlib

    s, drv, _ = make_session(layouts={"nothing": []})
    key = hashlib.sha256(fatbin).digest()
    s.load_module(key, fatbin)
    s.function_info(1, key, "nothing")  # loaded on device 1 too
    ptr, _ = s.symbol_info(0, key, "counter")
    s.write(None, ptr, b"\1\0\0\0")
    s.unload_module(key)
    assert len(drv.unloaded) == 2 and not s.has_module(key)
    with pytest.raises(CudaError):
        s.write(None, ptr, b"\1\0\0\0")
    s.unload_module(key)  # nothing left: nothing to do
    assert len(drv.unloaded) == 2


def test_access_retain_and_posix_export() -> None:
    """cuMemGetAccess / cuMemRetainAllocationHandle from the shared bookkeeping; a shareable allocation is
    exported once by the driver (its descriptor is what VMM_EXPORT hands out); import is refused with the
    reason (the driver reports no size for an imported handle)."""
    import os

    s, drv, _ = make_session()
    va = s.vmm.reserve(0, 2 * G, 0, 0)
    h = s.vmm.create(0, 2 * G, 1)
    assert len(drv.exported) == 1 and drv.exported[0][1] == 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    fd = s.vmm.export(h)
    os.fstat(fd)
    s.vmm.map(va, 2 * G, 0, h)
    assert s.vmm.get_access(va + 7, 0) == 0
    s.vmm.set_access(va, 2 * G, 0, 3)
    assert s.vmm.get_access(va + 7, 0) == 3
    assert s.vmm.retain(va + G)[0] == h
    s.vmm.release(h)
    s.vmm.unmap(va, 2 * G)
    assert "cuMemRelease" not in drv.calls  # the retained reference keeps it
    s.vmm.release(h)
    assert "cuMemRelease" in drv.calls and drv.physical == {}
    plain = s.vmm.create(0, 2 * G)
    with pytest.raises(CudaError) as ei:  # not requested as shareable
        s.vmm.export(plain)
    assert ei.value.code == Err.INVALID_VALUE
    r, w = os.pipe()
    os.close(w)
    with pytest.raises(CudaError) as ei:
        s.vmm.import_fd(0, r)
    assert ei.value.code == Err.NOT_SUPPORTED
