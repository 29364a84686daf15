"""CUDA IPC memory handles between sessions of one server. A mixin of gpushim.server.session.Session.

The server owns the memory, so a handle names (server, session, allocation): on the emulator a record in
the server's IPC directory (gpushim/backends/emulator/ipc.py), on the cuda backend the driver's own handle
(gpushim/backends/cuda/ipc.py; each session is its own process there too).
"""

from __future__ import annotations

from typing import Any

from gpushim.cuda_errors import CudaError, Err

IPC_FLAG_LAZY_ENABLE_PEER_ACCESS = 1


class IpcOps:
    def _ipc(self) -> Any:
        table = getattr(self, "ipc_table", None)
        if table is None:
            from gpushim.backends.emulator.backend import EmulatorSession

            if isinstance(self.bs, EmulatorSession):
                from gpushim.backends.emulator.ipc import IpcTable

                table = IpcTable(self.bs.memories, self.store.dir / "ipc")
            elif hasattr(self.bs, "cu"):
                from gpushim.backends.cuda.ipc import CudaIpc

                table = CudaIpc(self.bs)
            else:
                raise CudaError(Err.NOT_SUPPORTED, "this backend has no IPC")
            self.ipc_table = table
        return table

    def op_ipc_get_mem_handle(self, ptr: int) -> list[Any]:
        if self.info.transport != "unix":
            raise CudaError(Err.NOT_SUPPORTED, "CUDA IPC needs the client on the server's host (a Unix socket)")
        return [self._ipc().export(ptr)]

    def op_ipc_open_mem_handle(self, dev: int, handle: bytes, flags: int) -> list[Any]:
        if flags & ~IPC_FLAG_LAZY_ENABLE_PEER_ACCESS:
            raise CudaError(Err.INVALID_VALUE, f"invalid cudaIpcOpenMemHandle flags {flags:#x}")
        ptr, size = self._ipc().open(self._dev(dev), bytes(handle))
        return [ptr, size]

    def op_ipc_close_mem_handle(self, ptr: int) -> list[Any]:
        self._ipc().close(ptr)
        return []

    def op_ipc_get_event_handle(self, event: int) -> list[Any]:
        return [self._ipc().export_event(self._event(event))]

    def op_ipc_open_event_handle(self, dev: int, handle: bytes) -> list[Any]:
        e = self._ipc().open_event(self._dev(dev), bytes(handle))
        h = self._new_handle()
        self.events[h] = e
        return [h]

    def ipc_close_all(self) -> None:
        table = getattr(self, "ipc_table", None)
        if table is not None:
            table.close_all()
