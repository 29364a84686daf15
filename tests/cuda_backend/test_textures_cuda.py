"""Texture and surface objects on the cuda backend (gpushim/backends/cuda/textures.py), through the real
cuda-python bindings (which type-check every argument) onto the stand-in driver: objects on linear and pitched
memory are the driver's own; a CUDA array gets a mirror CUarray that each launch refreshes from the array's
packed memory, and that is copied back after launches when a surface object names it. What a GPU fetches is
checked by tools/gpu_check.sh (the textures e2e test on the cuda backend)."""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("cuda.bindings.driver")

from gpushim.cuda_errors import CudaError, Err  # noqa: E402
from gpushim.ptx import texdesc as td  # noqa: E402
from tests.cuda_backend.test_session_logic import make_session, pytestmark  # noqa: E402, F401


def fields(restype: int, base: int, pitch: int, width: int, height: int, depth: int, flags: int = 0,
           channels: int = 1, bits: int = 32, kind: int = td.KIND_FLOAT, addr=(1, 1, 1), filt: int = 0,
           read: int = 0, normalized: int = 0, border=(0.0, 0.0, 0.0, 0.0)) -> list[int]:
    b = list(struct.unpack("<4I", struct.pack("<4f", *border)))
    return [restype, base, pitch, width, height, depth, flags, channels, bits, kind, *addr, filt, read, normalized,
            0, *b]


def test_linear_and_pitched_textures_are_the_drivers() -> None:
    s, drv, _ = make_session()
    p = s.malloc(0, 4096)
    h = s.texture_create(0, False, fields(td.RES_LINEAR, p, 256, 64, 1, 1, bits=8, kind=td.KIND_UNSIGNED,
                                          read=td.READ_NORMALIZED, addr=(0, 2, 3), filt=1))
    t = drv.texobjs[h]
    assert t["type"] == "linear" and t["ptr"] == p and t["size"] == 64 and t["channels"] == 1
    assert t["format"] == 0x01 and t["address"] == [0, 2, 3] and t["filter"] == 1
    assert t["flags"] == 0  # normalized-float reads of 8-bit integers: no CU_TRSF_READ_AS_INTEGER
    h2 = s.texture_create(0, False, fields(td.RES_PITCH2D, p, 512, 100, 8, 1, channels=2, bits=16,
                                           kind=td.KIND_SIGNED, normalized=1, border=(1.0, 0.5, 0.25, 0.0)))
    t2 = drv.texobjs[h2]
    assert (t2["type"], t2["width"], t2["height"], t2["pitch"], t2["format"]) == ("pitch2d", 100, 8, 512, 0x09)
    assert t2["flags"] == 0x01 | 0x02  # READ_AS_INTEGER | NORMALIZED_COORDINATES
    assert t2["border"] == [1.0, 0.5, 0.25, 0.0]
    s.texture_destroy(h)
    s.texture_destroy(h2)
    assert not drv.texobjs
    with pytest.raises(CudaError) as e:
        s.texture_check(h)
    assert e.value.code == Err.INVALID_VALUE


def test_array_mirror_follows_copies_and_surface_writes() -> None:
    s, drv, _ = make_session(layouts={"k": [(0, 8)]})
    w, rows, layers = 4, 3, 2  # a layered 2D array of float2: 32-byte rows
    pitch = w * 8
    p = s.malloc(0, pitch * rows * layers)
    data = bytes(range(256))[: pitch * rows * layers]
    s.write(None, p, data)
    f = fields(td.RES_ARRAY, p, pitch, w, rows, layers, flags=td.FLAG_LAYERED | td.FLAG_SURFACE_LDST, channels=2)
    tex = s.texture_create(0, False, f)
    surf = s.texture_create(0, True, f)
    arr = drv.texobjs[tex]["array"]
    assert drv.surfobjs[surf] == {"type": "array", "array": arr}  # one mirror for both objects
    assert drv.arrays[arr]["desc"] == (w, rows, layers, 0x20, 2, 0x02 | 0x01)  # SURFACE_LDST | LAYERED

    # a launch sees what was copied into the array's memory since
    s.write(None, p, b"\xff" * 8)
    mod = b"m" * 32
    s.backend.devices()  # devices known
    s.load_module(mod, b"fatbin")

    def kernel(d) -> None:  # the kernel reads the texture and writes through the surface
        a = d.arrays[arr]
        assert bytes(a["data"][:8]) == b"\xff" * 8
        a["data"][8:16] = b"\x01" * 8

    drv.on_launch = kernel
    s.launch(0, mod, "k", [1, 1, 1], [1, 1, 1], 0, None, struct.pack("<Q", tex))
    assert s.read(None, p, 16) == b"\xff" * 8 + b"\x01" * 8  # the surface write is back in the array's memory
    s.texture_destroy(surf)
    s.texture_destroy(tex)
    assert arr not in drv.arrays  # the mirror goes with its last object


def test_one_d_array_and_bad_descriptions() -> None:
    s, drv, _ = make_session()
    p = s.malloc(0, 256)
    h = s.texture_create(0, False, fields(td.RES_ARRAY, p, 64, 16, 1, 1, flags=td.FLAG_1D))
    assert drv.arrays[drv.texobjs[h]["array"]]["desc"][:3] == (16, 0, 0)  # a 1D CUarray
    bad = [
        fields(td.RES_ARRAY, p, 64, 16, 1, 1, bits=8, kind=td.KIND_FLOAT),  # 8-bit float channels
        fields(td.RES_LINEAR, p + 4096, 64, 16, 1, 1),  # not device memory of this session
        fields(td.RES_ARRAY, p, 64, 16, 8, 1),  # runs past the allocation
        fields(td.RES_LINEAR, p, 64, 16, 1, 1)[:20],  # a field short
    ]
    for f in bad:
        with pytest.raises(CudaError) as e:
            s.texture_create(0, False, f)
        assert e.value.code == Err.INVALID_VALUE
    for f in (fields(td.RES_LINEAR, p, 64, 16, 1, 1), fields(td.RES_ARRAY, p, 64, 16, 1, 1)):
        with pytest.raises(CudaError):  # surfaces need an array made for surface load/store
            s.texture_create(0, True, f)
    g = s.texture_create(0, False, fields(td.RES_ARRAY, p, 64, 16, 2, 1, flags=td.FLAG_GATHER))
    assert drv.arrays[drv.texobjs[g]["array"]]["desc"] == (16, 2, 0, 0x20, 1, 0x08)  # TEXTURE_GATHER
