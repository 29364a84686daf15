"""Texture and surface descriptors as the emulator keeps them: 128 bytes in device memory, whose address is the
cudaTextureObject_t / cudaSurfaceObject_t handle a kernel receives. The backend packs them
(gpushim/backends/emulator/textures.py); tex/tld4/txq/suld/sust (ops_tex.py) unpack them at run time, and
check the resource against the live allocations before touching it, so a forged or stale handle faults.

Resource geometry: texel (x, y, z) lies at base + z * height * pitch + y * pitch + x * elem_size, where z is
the depth of a 3D resource or the layer (cubemap faces are layers: face + 6 * layer). height and depth are at
least 1.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

TEX_MAGIC = 0x58545347  # "GSTX"
SURF_MAGIC = 0x46535347  # "GSSF"
SIZE = 128
RES_ARRAY, RES_LINEAR, RES_PITCH2D = 0, 1, 2
FLAG_LAYERED, FLAG_CUBEMAP, FLAG_3D = 1, 2, 4
# What the cuda backend's mirror CUarray of a CUDA array needs (backends/cuda/textures.py); the emulator
# ignores them: a 1D array (height 1), and the array's cudaArraySurfaceLoadStore / cudaArrayTextureGather flags
FLAG_1D, FLAG_SURFACE_LDST, FLAG_GATHER = 8, 16, 32
KIND_SIGNED, KIND_UNSIGNED, KIND_FLOAT = 0, 1, 2  # cudaChannelFormatKind
ADDR_WRAP, ADDR_CLAMP, ADDR_MIRROR, ADDR_BORDER = 0, 1, 2, 3  # cudaTextureAddressMode
FILTER_POINT, FILTER_LINEAR = 0, 1
READ_ELEMENT, READ_NORMALIZED = 0, 1

_FMT = "<IIQQIIIIIIIIIIIIIIffff"
assert struct.calcsize(_FMT) <= SIZE


@dataclass
class Desc:
    magic: int
    restype: int
    base: int
    pitch: int  # bytes per row
    width: int
    height: int
    depth: int  # 3D depth or number of layers (cubemaps: 6 per layer)
    flags: int
    channels: int
    bits: int  # per channel (every channel has the same width)
    kind: int
    addr: tuple[int, int, int] = (ADDR_CLAMP, ADDR_CLAMP, ADDR_CLAMP)
    filter: int = FILTER_POINT
    read: int = READ_ELEMENT
    normalized: int = 0
    srgb: int = 0
    border: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    cache: dict = field(default_factory=dict, compare=False)

    @property
    def elem_size(self) -> int:
        return self.channels * self.bits // 8

    @property
    def extent(self) -> int:
        """Bytes the resource spans from base."""
        return self.pitch * self.height * self.depth

    def pack(self) -> bytes:
        b = struct.pack(_FMT, self.magic, self.restype, self.base, self.pitch, self.width, self.height, self.depth,
                        self.flags, self.channels, self.bits, self.kind, *self.addr, self.filter, self.read,
                        self.normalized, self.srgb, *self.border)
        return b + bytes(SIZE - len(b))


def unpack(b: bytes) -> Desc | None:
    v = struct.unpack_from(_FMT, b)
    if v[0] not in (TEX_MAGIC, SURF_MAGIC):
        return None
    return Desc(*v[:11], addr=tuple(v[11:14]), filter=v[14], read=v[15], normalized=v[16], srgb=v[17],
                border=tuple(v[18:22]))


def check(d: Desc) -> str | None:
    """Why a descriptor cannot be used, or None."""
    if d.channels not in (1, 2, 4) or d.bits not in (8, 16, 32) or d.kind not in (0, 1, 2):
        return f"unsupported channel format ({d.channels} channels of {d.bits} bits, kind {d.kind})"
    if d.kind == KIND_FLOAT and d.bits == 8:
        return "8-bit float channels"
    if min(d.width, d.height, d.depth) < 1 or d.pitch < d.width * d.elem_size:
        return "empty resource or pitch below a row"
    if any(a not in (0, 1, 2, 3) for a in d.addr) or d.filter not in (0, 1) or d.read not in (0, 1):
        return "bad address, filter or read mode"
    known = FLAG_LAYERED | FLAG_CUBEMAP | FLAG_3D | FLAG_1D | FLAG_SURFACE_LDST | FLAG_GATHER
    if d.flags & ~known or d.normalized not in (0, 1) or d.srgb not in (0, 1):
        return "bad flags"
    if d.flags & FLAG_CUBEMAP and (d.width != d.height or d.depth % 6):
        return "a cubemap needs square faces, 6 per layer"
    if d.read == READ_NORMALIZED and d.bits == 32 and d.kind != KIND_FLOAT:
        return "cudaReadModeNormalizedFloat on 32-bit integer channels"
    return None
