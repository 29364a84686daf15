"""The host side of printf, assert, malloc and free in compiled kernels (the native side: ops_sys.py).

A workspace of a kernel that makes such calls owns one HostCalls: a ctypes callback whose address is the
context's HOSTCALL slot. The native code calls it with the GIL released (ctypes releases it around the launch);
the callback takes it back for the call. It formats and reads through the interpreter's own functions
(ops_sys.printf_text / assert_text, read_cstring / read_bytes) on a view of the JIT's buffers that has the
attributes they read, and allocates from the same device heap (heap.py). No Python exception crosses the native
frames: a CudaError (a bad string address, the assert itself) or any other error is kept here, the context's
ERR slot set, and the thread leaves through the fault exit; JitKernel.launch raises what is kept.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx import heap
from gpushim.ptx.jit import layout as L
from gpushim.ptx.jit.ops_sys import ASSERT, FREE, MALLOC, PRINTF
from gpushim.ptx.memspaces import split_generic
from gpushim.ptx.ops_sys import assert_text, printf_text, read_cstring

_FN = ctypes.CFUNCTYPE(ctypes.c_int64, *(ctypes.c_int64,) * 7)


class _Stride:
    """lo_base / sh_base of the interpreter's State for the JIT's buffers: thread t's frame at t * stride."""

    def __init__(self, stride: int) -> None:
        self.stride = stride

    def __getitem__(self, t: int) -> int:
        return t * self.stride


class HostCalls:
    """The callback of one workspace (launches of one configuration, one at a time). Between launches it holds
    no memory, output or buffers of the launch (begin() / end())."""

    def __init__(self, kernel: str, ws: dict, refresh: Callable[[dict, object], None]) -> None:
        self.kernel = kernel
        self.ws = ws
        self.refresh = refresh  # rebuilds the workspace's allocation table after a malloc or free
        self.mv = ws["mv"]
        self.grid = self.block = (1, 1, 1)
        self.error: CudaError | None = None
        self.out: Callable[[bytes], None] | None = None
        self.mem = None
        self.fmts: dict[int, bytes] = {}  # global format strings read in this launch (read once per launch)
        # what read_cstring / read_bytes read (the interpreter's State has these attributes)
        self.sh_base = _Stride(0)
        self.lo_base = _Stride(int(ws["ctx"][L.LOSTRIDE]))
        self.lo_size = int(ws["ctx"][L.LOSIZE])
        self.sh_size = int(ws["ctx"][L.SHSIZE])
        self.shm = ws["shbuf"]
        self.loc = ws["lobuf"]
        self._fn = _FN(self._call)  # kept alive with the workspace
        ws["ctx"][L.HOSTCALL] = ctypes.cast(self._fn, ctypes.c_void_p).value

    def begin(self, memory, output: Callable[[bytes], None], psize: int, grid, block) -> None:
        self.mem, self.mem_base, self.out = memory, memory.base, output
        self.par, self.par_size = self.ws["pb"], psize
        self.grid, self.block = grid, block
        self.error = None
        self.fmts.clear()

    def end(self) -> CudaError | None:
        """The error of the launch's failed call, if one failed; drops what begin() took."""
        err, self.error = self.error, None
        self.mem = self.out = self.par = None
        return err

    def coords(self, t: int, blk: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        (gx, gy, _), (bx, by, _) = self.grid, self.block
        return (blk % gx, blk // gx % gy, blk // (gx * gy)), (t % bx, t // bx % by, t // (bx * by))

    def _call(self, kind: int, t: int, blk: int, a0: int, a1: int, a2: int, a3: int) -> int:
        u = (1 << 64) - 1
        try:
            if kind == PRINTF:
                fmt = self.fmts.get(a0)
                if fmt is None:
                    fmt = read_cstring(self, t, a0 & u)
                    if split_generic(np.uint64(a0 & u))[0] == "global":  # (a local or shared one: per thread)
                        self.fmts[a0] = fmt
                text, nargs = printf_text(self, t, fmt, a1 & u)
                self.out(text)
                return nargs
            if kind == ASSERT:
                text = assert_text(self, t, self.coords(t, blk), a0 & u, a1 & u, a2, a3 & u)
                self.out(text.encode())
                raise CudaError(Err.ASSERT, f"device-side assert triggered: {text.strip()}")
            if kind == MALLOC:
                ptr = int(heap.malloc(self.mem, np.array([a0 & u], np.uint64))[0])
                self.refresh(self.ws, self.mem)
                return ptr
            if kind == FREE:
                heap.free(self.mem, np.array([a0 & u], np.uint64))
                self.refresh(self.ws, self.mem)
                return 0
            raise RuntimeError(f"unknown host call {kind}")
        except CudaError as e:
            self.error = e
        except BaseException as e:  # a JIT bug: the launch fails, the server stays up
            self.error = CudaError(
                Err.LAUNCH_FAILURE, f"internal error of the PTX JIT in kernel {self.kernel}: {type(e).__name__}: {e}"
            )
        self.mv[L.ERR] = int(self.error.code) or int(Err.LAUNCH_FAILURE)
        return 0
