"""Relocatable device code on the cuda backend (gpushim/backends/cuda/modules.py), against the stand-in driver:
when the device-link image has no cubin for the GPU, the translation units' fat binaries are device-linked
with cuLink* (arguments type-checked by the real cuda-python bindings) and the result loaded. What a real
GPU does is for tools/gpu_check.sh."""

from __future__ import annotations

import ctypes

import pytest

pytest.importorskip("cuda.bindings.driver")

from gpushim.backends.cuda.modules import CudaModule, rdc_units  # noqa: E402
from gpushim.cuda_errors import CudaError  # noqa: E402
from gpushim.fatbin.container import FATBIN_HEADER, FATBIN_MAGIC, KIND_CUBIN, KIND_PTX  # noqa: E402
from gpushim.server.ops_driver import _entry  # noqa: E402
from tests.cuda_backend.fake_driver import SUCCESS, FakeDriver, real  # noqa: E402
from tests.cuda_backend.test_session_logic import pytestmark  # noqa: E402, F401 - skipped with a driver

NO_BINARY_FOR_GPU = 209
LINKED = b"\x7fELF linked for the GPU"


def _fatbin(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return FATBIN_HEADER.pack(FATBIN_MAGIC, 1, FATBIN_HEADER.size, len(body)) + body


def rdc_module() -> tuple[bytes, list[bytes]]:
    linked = _fatbin(_entry(KIND_CUBIN, b"\x7fELF sm_75 linked image", 75, (1, 8)))
    units = [_fatbin(_entry(KIND_CUBIN, b"\x7fELF relocatable", 75, (1, 8)),
                     _entry(KIND_PTX, f".version 8.0\n.target sm_75\n// unit {k}\n\0".encode(), 75, (8, 0)))
             for k in range(2)]
    return linked + b"".join(units), units


class LinkingDriver(FakeDriver):
    """Refuses everything but what cuLinkComplete made (an sm_75 image on this GPU)."""

    def __init__(self, fail_add: bool = False) -> None:
        super().__init__()
        self.added: list[bytes] = []
        self.fail_add = fail_add
        self.destroyed = 0
        self.out = ctypes.create_string_buffer(LINKED, len(LINKED))

    def _cuModuleLoadData(self, image):
        ok = bytes(image).startswith(LINKED)
        return real.CUresult(SUCCESS if ok else NO_BINARY_FOR_GPU), real.CUmodule(self._handle() if ok else 0)

    def _cuLinkCreate(self, n, opts, values):
        return real.CUresult(SUCCESS), real.CUlinkState(self._handle())

    def _cuLinkAddData(self, state, kind, data, size, name, n, opts, values):
        assert kind == real.CUjitInputType.CU_JIT_INPUT_FATBINARY and size == len(data)
        self.added.append(bytes(data))
        return (real.CUresult(218 if self.fail_add else SUCCESS),)

    def _cuLinkComplete(self, state):
        return real.CUresult(SUCCESS), ctypes.addressof(self.out), len(LINKED)

    def _cuLinkDestroy(self, state):
        self.destroyed += 1
        return (real.CUresult(SUCCESS),)


def test_units_are_device_linked_when_the_linked_image_cannot_run() -> None:
    data, units = rdc_module()
    assert rdc_units(data) == units
    drv = LinkingDriver()
    mod = CudaModule(drv, data)
    assert mod.load(0, 90, 13000)
    assert drv.added == units and drv.destroyed == 1
    assert "device-linked" in mod.loaded_image[0]


def test_a_failed_device_link_is_named() -> None:
    data, _ = rdc_module()
    drv = LinkingDriver(fail_add=True)
    with pytest.raises(CudaError) as e:
        CudaModule(drv, data).load(0, 90, 13000)
    assert "device-linking the translation units" in str(e.value) and drv.destroyed == 1


def test_ordinary_modules_are_not_device_linked() -> None:
    data, units = rdc_module()
    assert rdc_units(units[0]) == []  # one fat binary
    assert rdc_units(units[0] + units[1]) == []  # the first carries PTX: not a device-link image
