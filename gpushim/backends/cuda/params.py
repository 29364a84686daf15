"""Kernel parameter layouts and packed launches (CUDA-FACTS §5).

The client sends a kernel's arguments as one buffer laid out as the device sees them (offset and size of
each parameter, as FUNC_INFO told it). cuLaunchKernel wants `void *kernelParams[]`, one pointer per
parameter, so the launch builds that array pointing into the buffer. The layout comes from the driver
(cuFuncGetParamInfo, driver API >= 12.4) or, on older drivers, from the fat binary: a cubin's .nv.info
(EIATTR_KPARAM_INFO) or the PTX .entry declaration.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from gpushim.cuda_errors import CudaError, Err
from gpushim.fatbin import FatbinError, FatbinImage, cubin_info, ptx_info

PARAM_INFO_MIN_DRIVER = 12040  # cuFuncGetParamInfo appeared in CUDA 12.4 (driver 550)
MAX_PARAMS = 4096  # 32 KiB of parameters (CUDA 12.1+) in 8-byte slots; a guard against a runaway loop

Layout = list[tuple[int, int]]  # (offset, size) per parameter, in order


def layout_from_driver(get_param_info: Callable[[int], tuple[Any, ...]]) -> Layout | None:
    """Asks cuFuncGetParamInfo for parameter 0, 1, ... until the driver says the index is out of range
    (CUDA_ERROR_INVALID_VALUE). `get_param_info(i)` returns cuda-python's (CUresult, offset, size).
    None when the driver or the bindings lack the call (the caller then parses the image)."""
    out: Layout = []
    for i in range(MAX_PARAMS):
        try:
            res = get_param_info(i)
        except (RuntimeError, AttributeError, NotImplementedError):  # "function not found" in old drivers
            return None
        err = int(res[0])
        if err == 1:  # CUDA_ERROR_INVALID_VALUE: no parameter i
            return out
        if err != 0:
            return None if not out else out
        out.append((int(res[1]), int(res[2])))
    return out


def layout_from_images(images: list[FatbinImage], name: str, device_arch: int) -> tuple[Layout, int]:
    """(layout, parameter bytes) of kernel `name` from a cubin of the fat binary, else from its PTX.
    A cubin for the device's own architecture is preferred; the layout does not depend on the target."""
    cubins = sorted((i for i in images if i.kind == "cubin"), key=lambda i: (i.arch != device_arch, -i.arch))
    for img in cubins:
        try:
            k = cubin_info(img.payload).kernels.get(name)
        except FatbinError:
            continue
        if k is not None:
            return [(p.offset, p.size) for p in k.params], int(k.param_bytes)
    ptxs = sorted((i for i in images if i.kind == "ptx"), key=lambda i: -i.arch)
    for img in ptxs:
        try:
            info = ptx_info(img.ptx_text)
        except FatbinError:
            continue
        if name in info.entries:
            return info.param_layout(name), info.param_bytes(name)
    raise CudaError(98, f"kernel {name} is not in its module")  # cudaErrorInvalidDeviceFunction


def param_bytes(layout: Layout) -> int:
    return max((o + s for o, s in layout), default=0)


class PackedParams:
    """The argument buffer and the `void *[]` that points into it, alive while the launch is made
    (cuLaunchKernel copies the values before it returns)."""

    def __init__(self, data: bytes, layout: Layout) -> None:
        need = param_bytes(layout)
        if len(data) < need:
            raise CudaError(Err.INVALID_VALUE, f"the kernel takes {need} bytes of parameters, {len(data)} were sent")
        self.buffer = ctypes.create_string_buffer(bytes(data), max(len(data), 1))
        base = ctypes.addressof(self.buffer)
        self.count = len(layout)
        self.pointers = (ctypes.c_void_p * max(len(layout), 1))(*[base + off for off, _ in layout])

    @property
    def address(self) -> int:
        """The `void **kernelParams` value for cuLaunchKernel (NULL for a kernel without parameters)."""
        return ctypes.addressof(self.pointers) if self.count else 0


def read_through(packed: PackedParams, layout: Layout) -> list[bytes]:
    """Dereferences the pointer array the way the driver does: parameter i is `size_i` bytes at
    kernelParams[i]. Lets tests check the packing without a GPU."""
    return [ctypes.string_at(packed.pointers[i], size) for i, (_, size) in enumerate(layout)]
