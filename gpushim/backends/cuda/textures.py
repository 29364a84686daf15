"""Texture and surface objects on the cuda backend (CudaSession.texture_*).

The client describes an object with the fields of gpushim/ptx/texdesc.py (TEX_CREATE): linear memory,
pitched 2D memory or a CUDA array. In gpushim a CUDA array is ordinary device memory with a packed layout
(shim/api_texture.c: texel (x, y, z) at base + (z * height + y) * pitch + x * elem), which copies to and from
arrays use. The GPU reads textures on linear and pitched memory directly (CU_RESOURCE_TYPE_LINEAR /
PITCH2D); an array needs a real CUarray, so each array a texture or surface object names gets a mirror
CUarray of the same geometry and format:

- before every kernel launch on a device, each live mirror of that device is refreshed from the packed memory
  (cuMemcpy3DAsync on the launch stream), so the kernel sees what copies and earlier kernels wrote there;
- after the launch, mirrors that a surface object names are copied back (a kernel may have written them with
  surface stores), so cudaMemcpy*FromArray and later launches see the writes.

Both copies are stream-ordered with the launch; their cost is a device-to-device copy of each such array per
launch. The handle a kernel receives is the driver's CUtexObject / CUsurfObject.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from gpushim.backends.cuda.errors import check
from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx import texdesc as td

NFIELDS = 21


def parse_fields(surface: bool, fields: list[int]) -> td.Desc:
    """texdesc.Desc of TEX_CREATE's fields, checked (CudaError INVALID_VALUE)."""
    if len(fields) != NFIELDS:
        raise CudaError(Err.INVALID_VALUE, f"a texture description has {NFIELDS} fields, got {len(fields)}")
    if any(not 0 <= f < 1 << (64 if i in (1, 2) else 32) for i, f in enumerate(fields)):
        raise CudaError(Err.INVALID_VALUE, "texture description field out of range")
    restype, base, pitch, width, height, depth, flags, channels, bits, kind = fields[:10]
    border = struct.unpack("<4f", struct.pack("<4I", *fields[17:21]))
    d = td.Desc(td.SURF_MAGIC if surface else td.TEX_MAGIC, restype, base, pitch, width, height, depth, flags,
                channels, bits, kind, tuple(fields[10:13]), fields[13], fields[14], fields[15], fields[16], border)
    if restype not in (td.RES_ARRAY, td.RES_LINEAR, td.RES_PITCH2D) or max(width, height, depth) >= 1 << 31:
        raise CudaError(Err.INVALID_VALUE, "bad texture resource type or size")
    why = td.check(d)
    if why:
        raise CudaError(Err.INVALID_VALUE, f"texture or surface description: {why}")
    if surface and (restype != td.RES_ARRAY or not flags & td.FLAG_SURFACE_LDST):
        raise CudaError(Err.INVALID_VALUE, "a surface object needs a CUDA array made for surface load/store")
    return d


def array_format(cu: Any, bits: int, kind: int) -> Any:
    f = cu.CUarray_format
    if kind == td.KIND_FLOAT:
        return f.CU_AD_FORMAT_HALF if bits == 16 else f.CU_AD_FORMAT_FLOAT
    signed = kind == td.KIND_SIGNED
    return {8: f.CU_AD_FORMAT_SIGNED_INT8 if signed else f.CU_AD_FORMAT_UNSIGNED_INT8,
            16: f.CU_AD_FORMAT_SIGNED_INT16 if signed else f.CU_AD_FORMAT_UNSIGNED_INT16,
            32: f.CU_AD_FORMAT_SIGNED_INT32 if signed else f.CU_AD_FORMAT_UNSIGNED_INT32}[bits]


@dataclass
class Mirror:
    """A CUarray standing for the packed array at base."""
    device: int
    base: int
    geometry: tuple[int, ...]  # pitch, width, height, depth, flags, channels, bits, kind
    handle: Any
    row_bytes: int
    users: set[int] = field(default_factory=set)  # object handles
    surfaces: int = 0  # surface objects among them


@dataclass
class TexObject:
    handle: int
    surface: bool
    device: int
    mirror: Mirror | None


class CudaTextures:
    def __init__(self, session: Any) -> None:
        self.session = session
        self.objects: dict[int, TexObject] = {}
        self.mirrors: dict[tuple[int, int, tuple[int, ...]], Mirror] = {}

    # -- objects -------------------------------------------------------------------------------------------
    def create(self, dev: int, surface: bool, fields: list[int]) -> int:
        s = self.session
        cu = s.cu
        d = parse_fields(surface, fields)
        a = s._check(d.base, d.extent, "texture resource")
        if a.device != dev:
            raise CudaError(Err.INVALID_VALUE, f"the texture resource at {d.base:#x} is on device {a.device}")
        s._use(dev)
        res = cu.CUDA_RESOURCE_DESC()
        fmt = array_format(cu, d.bits, d.kind)
        mirror = None
        if d.restype == td.RES_LINEAR:
            res.resType = cu.CUresourcetype.CU_RESOURCE_TYPE_LINEAR
            res.res.linear.devPtr = cu.CUdeviceptr(d.base)
            res.res.linear.format = fmt
            res.res.linear.numChannels = d.channels
            res.res.linear.sizeInBytes = d.width * d.elem_size
        elif d.restype == td.RES_PITCH2D:
            res.resType = cu.CUresourcetype.CU_RESOURCE_TYPE_PITCH2D
            res.res.pitch2D.devPtr = cu.CUdeviceptr(d.base)
            res.res.pitch2D.format = fmt
            res.res.pitch2D.numChannels = d.channels
            res.res.pitch2D.width = d.width
            res.res.pitch2D.height = d.height
            res.res.pitch2D.pitchInBytes = d.pitch
        else:
            mirror = self._mirror(dev, d, fmt)
            res.resType = cu.CUresourcetype.CU_RESOURCE_TYPE_ARRAY
            res.res.array.hArray = mirror.handle
        try:
            if surface:
                h = int(check(cu.cuSurfObjectCreate(res), "cuSurfObjectCreate"))
            else:
                h = int(check(cu.cuTexObjectCreate(res, self._tex_desc(d), None), "cuTexObjectCreate"))
        except CudaError:
            if mirror is not None and not mirror.users:
                self._drop_mirror(mirror)
            raise
        if mirror is not None:
            mirror.users.add(h)
            mirror.surfaces += surface
        self.objects[h] = TexObject(h, surface, dev, mirror)
        return h

    def _tex_desc(self, d: td.Desc) -> Any:
        cu = self.session.cu
        t = cu.CUDA_TEXTURE_DESC()
        t.addressMode = [cu.CUaddress_mode(m) for m in d.addr]
        t.filterMode = cu.CUfilter_mode(d.filter)
        flags = 0
        if d.read == td.READ_ELEMENT and d.kind != td.KIND_FLOAT:
            flags |= cu.CU_TRSF_READ_AS_INTEGER  # else 8/16-bit integers read as normalized floats
        if d.normalized:
            flags |= cu.CU_TRSF_NORMALIZED_COORDINATES
        if d.srgb:
            flags |= cu.CU_TRSF_SRGB
        t.flags = flags
        t.borderColor = list(d.border)
        return t

    def check(self, handle: int) -> None:
        if handle not in self.objects:
            raise CudaError(Err.INVALID_VALUE, f"{handle:#x} is not a texture or surface object")

    def destroy(self, handle: int) -> None:
        self.check(handle)
        o = self.objects.pop(handle)
        cu = self.session.cu
        self.session._use(o.device)
        if o.surface:
            check(cu.cuSurfObjectDestroy(o.handle), "cuSurfObjectDestroy")
        else:
            check(cu.cuTexObjectDestroy(o.handle), "cuTexObjectDestroy")
        m = o.mirror
        if m is not None:
            m.users.discard(handle)
            m.surfaces -= o.surface
            if not m.users:
                self._drop_mirror(m)

    # -- mirrors of CUDA arrays ----------------------------------------------------------------------------
    def _mirror(self, dev: int, d: td.Desc, fmt: Any) -> Mirror:
        geometry = (d.pitch, d.width, d.height, d.depth, d.flags, d.channels, d.bits, d.kind)
        key = (dev, d.base, geometry)
        m = self.mirrors.get(key)
        if m is not None:
            return m
        cu = self.session.cu
        desc = cu.CUDA_ARRAY3D_DESCRIPTOR()
        desc.Width = d.width
        desc.Height = 0 if d.flags & td.FLAG_1D else d.height
        desc.Depth = d.depth if d.flags & (td.FLAG_3D | td.FLAG_LAYERED | td.FLAG_CUBEMAP) else 0
        desc.Format = fmt
        desc.NumChannels = d.channels
        # the flags the application gave its array (surface load/store, texture gather), as CUDA requires them
        desc.Flags = (cu.CUDA_ARRAY3D_LAYERED if d.flags & td.FLAG_LAYERED else 0) | \
            (cu.CUDA_ARRAY3D_CUBEMAP if d.flags & td.FLAG_CUBEMAP else 0) | \
            (cu.CUDA_ARRAY3D_SURFACE_LDST if d.flags & td.FLAG_SURFACE_LDST else 0) | \
            (cu.CUDA_ARRAY3D_TEXTURE_GATHER if d.flags & td.FLAG_GATHER else 0)
        h = check(cu.cuArray3DCreate(desc), "cuArray3DCreate")
        m = self.mirrors[key] = Mirror(dev, d.base, geometry, h, d.width * d.elem_size)
        return m

    def _drop_mirror(self, m: Mirror) -> None:
        self.mirrors.pop((m.device, m.base, m.geometry), None)
        self.session._use(m.device)
        check(self.session.cu.cuArrayDestroy(m.handle), "cuArrayDestroy")

    def _copy(self, m: Mirror, stream: Any, to_array: bool) -> None:
        cu = self.session.cu
        pitch, _, height, depth = m.geometry[:4]
        p = cu.CUDA_MEMCPY3D()
        device, array = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE, cu.CUmemorytype.CU_MEMORYTYPE_ARRAY
        if to_array:
            p.srcMemoryType, p.srcDevice, p.srcPitch, p.srcHeight = device, cu.CUdeviceptr(m.base), pitch, height
            p.dstMemoryType, p.dstArray = array, m.handle
        else:
            p.srcMemoryType, p.srcArray = array, m.handle
            p.dstMemoryType, p.dstDevice, p.dstPitch, p.dstHeight = device, cu.CUdeviceptr(m.base), pitch, height
        p.WidthInBytes, p.Height, p.Depth = m.row_bytes, height, depth
        check(cu.cuMemcpy3DAsync(p, stream), "cuMemcpy3DAsync (texture array mirror)")

    def _live(self, dev: int) -> list[Mirror]:
        """The mirrors of dev whose packed memory is still allocated (an array freed before its objects were
        destroyed is left alone: fetching from it is the application's error)."""
        s = self.session
        return [m for m in self.mirrors.values() if m.device == dev and s._find(m.base) is not None]

    def before_launch(self, dev: int, stream: Any) -> None:
        for m in self._live(dev):
            self._copy(m, stream, True)

    def after_launch(self, dev: int, stream: Any) -> None:
        for m in self._live(dev):
            if m.surfaces:
                self._copy(m, stream, False)

    def forget_device(self, dev: int) -> None:
        """After a device reset: the context's objects and arrays are gone with it."""
        self.objects = {h: o for h, o in self.objects.items() if o.device != dev}
        self.mirrors = {k: m for k, m in self.mirrors.items() if m.device != dev}
