"""Kernel parameter layouts for the cuda backend without a GPU: the fat-binary fallback (cubin .nv.info and
PTX .entry) on kernels built by the real nvcc, the cuFuncGetParamInfo loop, the packed-argument pointer
array cuLaunchKernel reads, and the order images are tried in when the driver refuses a fat binary."""

from __future__ import annotations

import struct

import pytest

from gpushim.backends.cuda.modules import candidate_images, image_bytes
from gpushim.backends.cuda.params import PackedParams, layout_from_driver, layout_from_images, read_through
from gpushim.cuda_errors import CudaError
from gpushim.fatbin import parse_fatbin

# (offset, size) per parameter of `mixed` in conftest.SOURCE: the CUDA ABI (CUDA-FACTS §5)
MIXED = [(0, 1), (8, 8), (16, 24), (40, 8), (48, 16), (64, 2)]


def test_layout_from_cubin_and_from_ptx_agree(fatbin: bytes) -> None:
    images = parse_fatbin(fatbin)
    assert {(i.kind, i.arch) for i in images} == {("cubin", 75), ("cubin", 80), ("ptx", 75)}
    ptx_only = [i for i in images if i.kind == "ptx"]
    for arch in (75, 80, 90):
        layout, nbytes = layout_from_images(images, "mixed", arch)
        assert layout == MIXED and nbytes >= 66
        assert layout_from_images(ptx_only, "mixed", arch)[0] == MIXED
    assert layout_from_images(images, "nothing", 75) == ([], 0)
    assert layout_from_images(images, "_Z5scaleIfEvPT_S0_j", 80)[0] == [(0, 8), (8, 4), (12, 4)]
    with pytest.raises(CudaError) as ei:
        layout_from_images(images, "no_such_kernel", 75)
    assert ei.value.code == 98  # cudaErrorInvalidDeviceFunction


def test_layout_from_driver_loop() -> None:
    def param_info(i: int) -> tuple[int, int, int]:
        return (0, *MIXED[i]) if i < len(MIXED) else (1, 0, 0)  # CUDA_ERROR_INVALID_VALUE past the end

    assert layout_from_driver(param_info) == MIXED
    assert layout_from_driver(lambda i: (1, 0, 0)) == []

    def missing(i: int) -> tuple[int, int, int]:
        raise RuntimeError('Function "cuFuncGetParamInfo" not found')  # cuda-bindings on a 535 driver

    assert layout_from_driver(missing) is None
    assert layout_from_driver(lambda i: (801, 0, 0)) is None  # CUDA_ERROR_NOT_SUPPORTED: parse instead


def test_packed_parameters_point_at_each_value() -> None:
    buf = bytearray(72)
    struct.pack_into("<b", buf, 0, -3)
    struct.pack_into("<d", buf, 8, 2.5)
    struct.pack_into("<bxxxxxxxdi", buf, 16, 1, 4.0, 7)
    struct.pack_into("<Q", buf, 40, 0x7F00_1234_5000)
    struct.pack_into("<4f", buf, 48, 1, 2, 3, 4)
    struct.pack_into("<h", buf, 64, -2)
    packed = PackedParams(bytes(buf), MIXED)
    assert packed.address != 0
    values = read_through(packed, MIXED)
    assert values == [bytes(buf[o : o + s]) for o, s in MIXED]
    assert struct.unpack("<d", values[1])[0] == 2.5 and struct.unpack("<Q", values[3])[0] == 0x7F00_1234_5000
    assert PackedParams(b"", []).address == 0
    with pytest.raises(CudaError):
        PackedParams(bytes(40), MIXED)  # fewer bytes than the layout needs


def test_images_tried_in_order(fatbin: bytes) -> None:
    images = parse_fatbin(fatbin)

    def order(arch: int) -> list[tuple[str, int]]:
        return [(i.kind, i.arch) for i in candidate_images(images, arch)]

    assert order(75) == [("cubin", 75), ("ptx", 75)]
    assert order(86) == [("cubin", 80), ("ptx", 75)]  # sm_80 SASS runs on sm_86; sm_75 SASS does not
    assert order(90) == [("ptx", 75)]  # no Hopper cubin: JIT the PTX
    assert order(70) == []
    ptx = next(i for i in images if i.kind == "ptx")
    data = image_bytes(ptx)
    assert data.endswith(b"\0") and b".entry mixed" in data
    assert image_bytes(next(i for i in images if i.kind == "cubin")).startswith(b"\x7fELF")
