"""Texture and surface objects on the emulator: a descriptor (gpushim/ptx/texdesc.py) in a small device
allocation of kind "texture", whose address is the handle kernels receive. The resource must lie inside one
live allocation of the same device; the PTX engine checks it again at every fetch (it may be freed later)."""

from __future__ import annotations

import struct

from gpushim.backends.emulator.memory import DeviceMemory
from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx import texdesc as td

KIND = "texture"
NFIELDS = 21


def create(mem: DeviceMemory, surface: bool, fields: list[int]) -> int:
    if len(fields) != NFIELDS:
        raise CudaError(Err.INVALID_VALUE, f"a texture description has {NFIELDS} fields, got {len(fields)}")
    # base and pitch are 64-bit, the other fields 32-bit
    if any(not 0 <= f < 1 << (64 if i in (1, 2) else 32) for i, f in enumerate(fields)):
        raise CudaError(Err.INVALID_VALUE, "texture description field out of range")
    restype, base, pitch, width, height, depth, flags, channels, bits, kind = fields[:10]
    border = struct.unpack("<4f", struct.pack("<4I", *[f & 0xFFFFFFFF for f in fields[17:21]]))
    d = td.Desc(td.SURF_MAGIC if surface else td.TEX_MAGIC, restype, base, pitch, width, height, depth, flags,
                channels, bits, kind, tuple(fields[10:13]), fields[13], fields[14], fields[15], fields[16], border)
    if restype not in (td.RES_ARRAY, td.RES_LINEAR, td.RES_PITCH2D) or max(width, height, depth) >= 1 << 31:
        raise CudaError(Err.INVALID_VALUE, "bad texture resource type or size")
    why = td.check(d)
    if why:
        raise CudaError(Err.INVALID_VALUE, f"texture or surface description: {why}")
    a = mem.find(base)
    if a is None or a.kind == KIND or base + d.extent > a.addr + a.size:
        raise CudaError(Err.INVALID_VALUE, f"the resource at {base:#x} ({d.extent} bytes) is not inside one "
                        "device allocation of this device")
    packed = d.pack()
    h = mem.alloc(td.SIZE, kind=KIND)
    mem.write(h, packed)
    return h


def destroy(mem: DeviceMemory, handle: int) -> None:
    a = mem.find(handle)
    if a is None or a.addr != handle or a.kind != KIND:
        raise CudaError(Err.INVALID_VALUE, f"{handle:#x} is not a texture or surface object")
    mem.free(handle)
