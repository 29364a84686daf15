"""A client's fat binary on real devices: loaded once per device context (cuModuleLoadData), its kernels
and their parameter layouts, its variables.

The driver first gets the whole fat binary and picks the image itself (a cubin for the device, else JIT of
the PTX). When it refuses (a cubin ELF ABI or PTX ISA newer than the driver, CUDA-FACTS §6), each image
that could run on the device is tried on its own: cubins of the device's major architecture not newer
than the device, newest first, then PTX not newer than the device, newest first. An image an adaptation
policy chose can be passed in `prefer` and is tried first. Relocatable device code (the device-link image
followed by each translation unit's fat binary, as the shim uploads it) whose linked image has no cubin for
the GPU is device-linked from the units with the driver's JIT linker (cuLink*), as the CUDA runtime does.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

from gpushim.backends.cuda.errors import check, cuda_error, result_name
from gpushim.backends.cuda.params import PARAM_INFO_MIN_DRIVER, Layout, layout_from_driver, layout_from_images
from gpushim.backends.cuda.params import param_bytes as layout_bytes
from gpushim.cuda_errors import CudaError, Err
from gpushim.fatbin import FatbinError, FatbinImage, parse_fatbin

INVALID_DEVICE_FUNCTION = 98
NOT_FOUND = 500
# Load failures worth retrying with single images: invalid image, no binary for the GPU, invalid PTX,
# unsupported PTX version, invalid source.
RETRY_LOAD = frozenset({200, 209, 218, 222, 300})


@dataclass
class CudaFunction:
    handle: Any
    layout: Layout
    param_bytes: int
    dynamic_shared_limit: int = 48 * 1024


def candidate_images(images: list[FatbinImage], device_arch: int) -> list[FatbinImage]:
    """Images that could run on a device of `device_arch` (e.g. 90), in the order to try them."""
    cubins = [i for i in images if i.kind == "cubin" and i.arch // 10 == device_arch // 10 and i.arch <= device_arch]
    ptx = [i for i in images if i.kind == "ptx" and i.arch <= device_arch]
    return sorted(cubins, key=lambda i: -i.arch) + sorted(ptx, key=lambda i: -i.arch)


def image_bytes(img: FatbinImage) -> bytes:
    """What cuModuleLoadData takes for one image: a cubin's ELF, or PTX text ending in NUL."""
    if img.kind == "ptx":
        return img.ptx_text.encode() + b"\0"
    return bytes(img.payload)


def rdc_units(data: bytes) -> list[bytes]:
    """The translation units' fat binaries of a relocatable-device-code module (the shim uploads the
    device-link image followed by them, gpushim/ptx/rdc.py); [] for any other module."""
    from gpushim.ptx.rdc import is_rdc, split_fatbins

    parts = split_fatbins(data)
    return parts[1:] if is_rdc(parts) else []


def link_units(cu: Any, units: list[bytes]) -> bytes:
    """The cubin the driver's JIT linker makes of the units' fat binaries (each contributes its cubin for the
    GPU or its PTX compiled for it; libcudadevrt's unit comes along with -lcudadevrt)."""
    state = check(cu.cuLinkCreate(0, [], []), "cuLinkCreate")
    try:
        for k, unit in enumerate(units):
            check(cu.cuLinkAddData(state, cu.CUjitInputType.CU_JIT_INPUT_FATBINARY, unit, len(unit),
                                   f"unit{k}".encode(), 0, [], []), f"cuLinkAddData (translation unit {k})")
        cubin, size = check(cu.cuLinkComplete(state), "cuLinkComplete")  # type: ignore[misc]
        return ctypes.string_at(int(cubin), int(size))  # owned by the link state: copied before it goes
    finally:
        cu.cuLinkDestroy(state)


@dataclass
class CudaModule:
    cu: Any
    fatbin: bytes
    handles: dict[int, Any] = field(default_factory=dict)  # device -> CUmodule
    functions: dict[tuple[int, str], CudaFunction] = field(default_factory=dict)
    loaded_image: dict[int, str] = field(default_factory=dict)  # device -> what was loaded, for notes
    _images: list[FatbinImage] | None = None

    def images(self) -> list[FatbinImage]:
        if self._images is None:
            try:
                self._images = parse_fatbin(self.fatbin)
            except FatbinError as e:
                raise CudaError(Err.INVALID_KERNEL_IMAGE, f"the fat binary is malformed: {e}") from None
        return self._images

    def load(self, dev: int, device_arch: int, driver_version: int, prefer: bytes | None = None) -> Any:
        """The module on dev, loading it there first (dev's context must be current)."""
        h = self.handles.get(dev)
        if h is not None:
            return h
        attempts: list[tuple[str, bytes]] = []
        if prefer is not None:
            attempts.append(("the image the adaptation policy chose", prefer))
        attempts.append(("the fat binary", self.fatbin))
        tried: list[str] = []
        first_err: int | None = None
        for what, data in attempts:
            err, h = self.cu.cuModuleLoadData(data)
            if int(err) == 0:
                return self._loaded(dev, h, what)
            first_err = first_err or int(err)
            tried.append(f"{what}: {result_name(int(err))}")
            if int(err) not in RETRY_LOAD:
                raise cuda_error(int(err), f"loading the module ({what})")
        units = rdc_units(self.fatbin)
        if units:  # relocatable device code the linked image cannot run: device-link the units for this GPU
            try:
                h = self._load_bytes(link_units(self.cu, units))
                return self._loaded(dev, h, f"the {len(units)} translation units device-linked (cuLink)")
            except CudaError as e:
                tried.append(f"device-linking the translation units: {e.message}")
        for img in candidate_images(self.images(), device_arch):
            err, h = self.cu.cuModuleLoadData(image_bytes(img))
            what = f"{img.kind} sm_{img.arch}"
            if int(err) == 0:
                return self._loaded(dev, h, what)
            tried.append(f"{what}: {result_name(int(err))}")
        archs = ", ".join(f"{i.kind} sm_{i.arch}" for i in self.images()) or "no images"
        d = f"{driver_version // 1000}.{driver_version % 1000 // 10}"
        raise CudaError(first_err or Err.INVALID_KERNEL_IMAGE,
                        f"no image of the module loads on this sm_{device_arch} GPU with driver API {d} "
                        f"(the binary has {archs}; tried {'; '.join(tried)})")

    def _load_bytes(self, image: bytes) -> Any:
        return check(self.cu.cuModuleLoadData(image), "cuModuleLoadData")

    def _loaded(self, dev: int, handle: Any, what: str) -> Any:
        self.handles[dev] = handle
        self.loaded_image[dev] = what
        return handle

    def function(self, dev: int, name: str, device_arch: int, driver_version: int) -> CudaFunction:
        fn = self.functions.get((dev, name))
        if fn is not None:
            return fn
        h = self.handles[dev]
        err, f = self.cu.cuModuleGetFunction(h, name.encode())
        if int(err) == NOT_FOUND:
            raise CudaError(INVALID_DEVICE_FUNCTION, f"kernel {name} is not in its module")
        check((err, f), f"cuModuleGetFunction({name})")
        layout = None
        if driver_version >= PARAM_INFO_MIN_DRIVER and hasattr(self.cu, "cuFuncGetParamInfo"):
            layout = layout_from_driver(lambda i: self.cu.cuFuncGetParamInfo(f, i))
        if layout is None:
            layout, nbytes = layout_from_images(self.images(), name, device_arch)
        else:
            nbytes = layout_bytes(layout)
        fn = self.functions[(dev, name)] = CudaFunction(f, layout, nbytes)
        return fn

    def symbol(self, dev: int, name: str) -> tuple[int, int]:
        err, ptr, size = self.cu.cuModuleGetGlobal(self.handles[dev], name.encode())
        if int(err) == NOT_FOUND:
            raise CudaError(Err.INVALID_SYMBOL, f"module variable {name} is not in its module")
        check((err, ptr, size), f"cuModuleGetGlobal({name})")
        return int(ptr), int(size)

    def forget(self, dev: int) -> None:
        """The device's context was reset: its module and functions are gone."""
        self.handles.pop(dev, None)
        self.loaded_image.pop(dev, None)
        for k in [k for k in self.functions if k[0] == dev]:
            del self.functions[k]
