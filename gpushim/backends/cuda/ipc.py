"""CUDA IPC memory handles on the cuda backend: each session is its own worker process, so the driver's own
cuIpcGetMemHandle / cuIpcOpenMemHandle connect two sessions of one server, as two processes.

Written against cuda-python's driver bindings like the rest of this backend; not exercised without a GPU
(`make gpu-check` runs tests/e2e/test_ipc.py on one).
"""

from __future__ import annotations

from typing import Any

from gpushim.backends.cuda.errors import check
from gpushim.cuda_errors import CudaError, Err

HANDLE_SIZE = 64
LAZY_ENABLE_PEER_ACCESS = 1  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS


class CudaIpc:
    def __init__(self, session: Any) -> None:
        self.s = session
        self.imports: dict[int, int] = {}  # pointer -> device

    def export(self, ptr: int) -> bytes:
        a = self.s._find(ptr)
        if a is None or a.kind not in ("device", "pitched"):
            raise CudaError(Err.INVALID_VALUE, f"{ptr:#x} is not in a device allocation of this session")
        self.s._use(a.device)
        cu = self.s.cu
        handle = check(cu.cuIpcGetMemHandle(cu.CUdeviceptr(a.addr)), "cuIpcGetMemHandle")
        return bytes(handle.reserved)

    def open(self, dev: int, handle: bytes) -> tuple[int, int]:
        if len(handle) != HANDLE_SIZE:
            raise CudaError(Err.INVALID_VALUE, "not an IPC memory handle")
        self.s._use(dev)
        cu = self.s.cu
        h = cu.CUipcMemHandle()
        h.reserved = handle
        ptr = int(check(cu.cuIpcOpenMemHandle(h, LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle"))
        _, size = check(cu.cuMemGetAddressRange(cu.CUdeviceptr(ptr)), "cuMemGetAddressRange")
        self.imports[ptr] = dev
        return ptr, int(size)

    def close(self, ptr: int) -> None:
        dev = self.imports.pop(ptr, None)
        if dev is None:
            raise CudaError(Err.INVALID_VALUE, f"{ptr:#x} is not an opened IPC memory handle")
        self.s._use(dev)
        check(self.s.cu.cuIpcCloseMemHandle(self.s.cu.CUdeviceptr(ptr)), "cuIpcCloseMemHandle")

    def export_event(self, e: Any) -> bytes:
        self.s._use(e.device)
        handle = check(self.s.cu.cuIpcGetEventHandle(e.handle), "cuIpcGetEventHandle")
        return bytes(handle.reserved)

    def open_event(self, dev: int, handle: bytes) -> Any:
        from gpushim.backends.cuda.backend import CudaEvent

        if len(handle) != HANDLE_SIZE:
            raise CudaError(Err.INVALID_VALUE, "not an IPC event handle")
        self.s._use(dev)
        cu = self.s.cu
        h = cu.CUipcEventHandle()
        h.reserved = handle
        ev = check(cu.cuIpcOpenEventHandle(h), "cuIpcOpenEventHandle")
        return CudaEvent(dev, 0x4 | 0x2, ev)  # cudaEventInterprocess | cudaEventDisableTiming

    def close_all(self) -> None:
        pass  # the driver forgets a process's exports when it exits
