"""Texture fetches (tex, tex.level, tex.grad, tld4), texture and surface queries (txq, suq), surface loads and
stores (suld.b, sust.b) on the descriptors of texdesc.py, with CUDA's texture fetching rules (CUDA C++
Programming Guide, appendix "Texture Fetching"): address modes wrap, clamp, mirror and border; point and
linear filtering, linear filtering weights in 9-bit fixed point with 8 fractional bits; normalized
coordinates; element and normalized-float read modes; cubemap face selection ("Cubemap Textures" table).
Only unified-mode handles (a .u64 register or parameter) are supported, not .texref/.surfref variables.
Resources have one level: tex.level and tex.grad read level 0.
"""

from __future__ import annotations

import numpy as np

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx import texdesc as td
from gpushim.ptx.nodes import Instr, Plist, Reg, Vec
from gpushim.ptx.operands import Ctx
from gpushim.ptx.values import ndarray

GEOMS = {"1d": (1, False), "2d": (2, False), "3d": (3, False), "a1d": (1, True), "a2d": (2, True),
         "cube": (3, False), "acube": (3, True)}  # fmt: skip
# coordinate vector layout: (layer index position or None, positions of x, y, z)
_LAYOUT = {"1d": (None, 0, 1, 2), "2d": (None, 0, 1, 2), "3d": (None, 0, 1, 2), "a1d": (0, 1, 2, 3),
           "a2d": (0, 1, 2, 3), "cube": (None, 0, 1, 2), "acube": (0, 1, 2, 3)}  # fmt: skip
_RAW = {(td.KIND_SIGNED, 8): np.int8, (td.KIND_SIGNED, 16): np.int16, (td.KIND_SIGNED, 32): np.int32,
        (td.KIND_UNSIGNED, 8): np.uint8, (td.KIND_UNSIGNED, 16): np.uint16, (td.KIND_UNSIGNED, 32): np.uint32,
        (td.KIND_FLOAT, 16): np.float16, (td.KIND_FLOAT, 32): np.float32}  # fmt: skip
_OUT = {"f32": np.float32, "s32": np.int32, "u32": np.uint32}


# ---- descriptors ----------------------------------------------------------------------------------------


def _fault(st, what: str, msg: str, addr: int) -> CudaError:
    return CudaError(Err.ILLEGAL_ADDRESS, f"{what}: {msg} ({addr:#x})")


def _desc(st, h: int, what: str, surface: bool) -> td.Desc:
    """The descriptor behind handle h, after checking that it and its resource are live device memory."""
    al = st.mem.find(h)
    if al is None or h + td.SIZE > al.addr + al.size:
        raise _fault(st, what, "not a texture or surface object", h)
    off = h - st.mem_base
    d = td.unpack(bytes(st.av[1][off : off + td.SIZE]))
    want = td.SURF_MAGIC if surface else td.TEX_MAGIC
    if d is None or d.magic != want or td.check(d) is not None:
        raise _fault(st, what, f"not a {'surface' if surface else 'texture'} object", h)
    r = st.mem.find(d.base)
    if r is None or d.base + d.extent > r.addr + r.size:
        raise _fault(st, what, "the object's memory was freed", d.base)
    return d


def _per_handle(st, h, what: str, surface: bool):
    """[(mask over the threads or None for all, descriptor)] for the handles h (scalar or array)."""
    if h.__class__ is not ndarray:
        return [(None, _desc(st, int(h), what, surface))]
    u = np.unique(h)
    if u.size == 1:
        return [(None, _desc(st, int(u[0]), what, surface))]
    return [(h == x, _desc(st, int(x), what, surface)) for x in u]


def _gather_bytes(st, off, nbytes: int) -> np.ndarray:
    """(n, nbytes) uint8 at arena offsets off."""
    return st.av[1][off[:, None] + np.arange(nbytes, dtype=np.int64)]


# ---- texel reads ----------------------------------------------------------------------------------------


def _texels(st, d: td.Desc, x, y, z, as_float: bool) -> np.ndarray:
    """(n, 4) channel values of in-range texels x, y, z (int64), converted per the read mode; missing
    channels read 0 (alpha 1)."""
    es = d.elem_size
    off = (d.base - st.mem_base) + z * (d.height * d.pitch) + y * d.pitch + x * es
    raw = np.ascontiguousarray(_gather_bytes(st, off, es)).view(_RAW[(d.kind, d.bits)]).reshape(-1, d.channels)
    if as_float:
        v = raw.astype(np.float32)
        if d.kind != td.KIND_FLOAT and d.read == td.READ_NORMALIZED:
            if d.kind == td.KIND_UNSIGNED:
                v = (raw / float((1 << d.bits) - 1)).astype(np.float32)
            else:
                v = np.maximum(raw / float((1 << (d.bits - 1)) - 1), -1.0).astype(np.float32)
        out = np.zeros((raw.shape[0], 4), np.float32)
    else:
        v = raw.astype(np.int64)
        out = np.zeros((raw.shape[0], 4), np.int64)
    out[:, 3] = 1
    out[:, : d.channels] = v
    return out


def _address(i, n: int, mode: int, normalized: bool):
    """(index in range, valid) of integer texel indices i under an address mode. Wrap and mirror apply to
    normalized coordinates only (otherwise CUDA clamps)."""
    if mode == td.ADDR_BORDER:
        return np.clip(i, 0, n - 1), (i >= 0) & (i < n)
    if normalized and mode == td.ADDR_WRAP:
        return np.mod(i, n), None
    if normalized and mode == td.ADDR_MIRROR:
        k = np.mod(i, 2 * n)
        return np.where(k >= n, 2 * n - 1 - k, k), None
    return np.clip(i, 0, n - 1), None


def _frac9(f):
    """A filtering weight in CUDA's 9-bit fixed point (8 fractional bits, 1.0 exact)."""
    return (np.floor(f * 256.0 + 0.5) / 256.0).astype(np.float32)


def _cube(x, y, z):
    """(face, u, v) in [0, 1] per the Programming Guide's cubemap table."""
    ax, ay, az = np.abs(x), np.abs(y), np.abs(z)
    xm = (ax >= ay) & (ax >= az)
    ym = ~xm & (ay >= az)
    face = np.where(xm, np.where(x >= 0, 0, 1), np.where(ym, np.where(y >= 0, 2, 3), np.where(z >= 0, 4, 5)))
    faces = [face == f for f in range(6)]
    s = np.select(faces, [-z, z, x, x, x, -x])
    t = np.select(faces, [-y, -y, z, -z, -y, -y])
    m = np.select([xm, ym], [ax, ay], az)
    m = np.where(m == 0, 1.0, m)
    return face.astype(np.int64), (s / m + 1) / 2, (t / m + 1) / 2


def _sample(st, d: td.Desc, geom: str, coords: list, layer, int_coords: bool, as_float: bool) -> np.ndarray:
    """(n, 4) results of a fetch with coordinates (arrays of length n)."""
    n = coords[0].shape[0]
    dims, layered = GEOMS[geom]
    zbase = np.zeros(n, np.int64)
    if layered:
        layers = d.depth // 6 if geom == "acube" else d.depth
        zbase = np.clip(layer.astype(np.int64), 0, max(layers - 1, 0)) * (6 if geom == "acube" else 1)
    sizes = [d.width, d.height, d.depth]
    normalized = bool(d.normalized)
    if geom in ("cube", "acube"):
        face, u, v = _cube(*(c.astype(np.float64) for c in coords[:3]))
        zbase = zbase + face
        coords, dims, normalized = [u, v], 2, True
    if int_coords:
        idx = []
        valid = np.ones(n, bool)
        for k in range(dims):
            c = coords[k].astype(np.int64)
            if d.restype == td.RES_LINEAR:  # tex1Dfetch: no address modes, zero out of range
                i, ok = np.clip(c, 0, sizes[k] - 1), (c >= 0) & (c < sizes[k])
            else:
                i, ok = _address(c, sizes[k], d.addr[k], False)
            idx.append(i)
            if ok is not None:
                valid &= ok
        return _combine_point(st, d, idx, zbase, dims, valid, as_float)
    fc = [coords[k].astype(np.float64) * (sizes[k] if normalized else 1) for k in range(dims)]
    border = np.asarray(d.border, np.float32)
    if d.filter == td.FILTER_POINT or not as_float:
        idx, valid = [], np.ones(n, bool)
        for k in range(dims):
            i, ok = _address(np.floor(fc[k]).astype(np.int64), sizes[k], d.addr[k], normalized)
            idx.append(i)
            if ok is not None:
                valid &= ok
        return _combine_point(st, d, idx, zbase, dims, valid, as_float)
    # linear filtering: 2^dims taps around (x - 0.5, ...), weights in 9-bit fixed point
    base, w = [], []
    for k in range(dims):
        xb = fc[k] - 0.5
        i0 = np.floor(xb)
        base.append(i0.astype(np.int64))
        w.append(_frac9(xb - i0))
    acc = np.zeros((n, 4), np.float32)
    for corner in range(1 << dims):
        idx, valid = [], np.ones(n, bool)
        wt = np.ones(n, np.float32)
        for k in range(dims):
            hi = (corner >> k) & 1
            i, ok = _address(base[k] + hi, sizes[k], d.addr[k], normalized)
            idx.append(i)
            if ok is not None:
                valid &= ok
            wt = wt * (w[k] if hi else np.float32(1) - w[k])
        t = _combine_point(st, d, idx, zbase, dims, valid, True, border)
        acc = acc + wt[:, None] * t
    return acc


def _combine_point(st, d, idx, zbase, dims, valid, as_float, border=None):
    x = idx[0]
    y = idx[1] if dims > 1 else np.zeros_like(x)
    z = np.clip(idx[2] if dims > 2 else zbase, 0, d.depth - 1)  # a cubemap fetch on a resource of fewer faces
    t = _texels(st, d, x, y, z, as_float)
    if not valid.all():
        b = np.asarray(d.border if border is None else border, np.float32)
        if d.restype == td.RES_LINEAR:
            b = np.zeros(4, np.float32)
        t[~valid] = b if as_float else b.astype(np.int64)
    return t


# ---- instruction compilers ------------------------------------------------------------------------------


def _handle_reader(ctx: Ctx, ins: Instr, addr):
    if not isinstance(addr, Plist) or not addr.items or not isinstance(addr.items[0], Reg):
        raise ctx.fail(f"{ins.op} on a .texref/.surfref variable (only texture and surface objects)")
    return ctx.reader(addr.items[0], "u64")


def _finish(ws, outs, uniform: bool, st, idx):
    for w, o in zip(ws, outs, strict=False):
        w(st, idx, o[0] if uniform else o)


def _broadcast(vals):
    """(arrays of one length, uniform) of per-thread values that may be scalars."""
    uniform = not any(v.__class__ is ndarray for v in vals)
    arrs = np.broadcast_arrays(*[np.atleast_1d(np.asarray(v)) for v in vals])
    return [np.ascontiguousarray(a) for a in arrs], uniform


def compile_tex(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    gather = parts[0] == "tld4"
    rest = parts[1:]
    comp = 0
    if gather:
        comp = "rgba".index(rest.pop(0)) if rest and rest[0] in ("r", "g", "b", "a") else 0
    while rest and rest[0] in ("level", "grad", "base"):
        rest.pop(0)
    if not rest or rest[0] not in GEOMS:
        raise ctx.fail(f"{ins.op} (geometry)")
    geom = rest.pop(0)
    if gather and geom not in ("2d", "a2d", "cube", "acube"):
        raise ctx.fail(f"{ins.op} (geometry)")
    if rest[:1] != ["v4"] or len(rest) != 3 or rest[1] not in _OUT or rest[2] not in ("f32", "s32"):
        raise ctx.fail(f"{ins.op} (result or coordinate type)")
    dtyp, ctyp = rest[1], rest[2]
    dst, addr = ins.args[0], ins.args[1]
    if not isinstance(dst, Vec) or len(dst.items) != 4 or not isinstance(addr, Plist) or len(addr.items) != 2:
        raise ctx.fail(f"{ins.op} with these operands (a predicate destination, offsets or depth compare)")
    if gather and geom != "2d":
        raise ctx.fail(f"{ins.op} (geometry)")
    ws = [ctx.writer(r) for r in dst.items]
    hr = _handle_reader(ctx, ins, addr)
    cvec = addr.items[1].items if isinstance(addr.items[1], Vec) else (addr.items[1],)
    lpos, *xyz = _LAYOUT[geom]
    ndims = GEOMS[geom][0]
    crs = [ctx.reader(cvec[p], ctyp) for p in xyz[:ndims]]
    lr = ctx.reader(cvec[lpos], "s32") if lpos is not None else None
    out_t = _OUT[dtyp]
    as_float = dtyp == "f32"
    what = f"{ins.op} (line {ins.line})"

    def run(st, idx):
        h = hr(st, idx)
        vals, uniform = _broadcast([h] + [r(st, idx) for r in crs] + ([lr(st, idx)] if lr else []))
        hh, cs = vals[0], vals[1 : 1 + len(crs)]
        layer = vals[-1] if lr else None
        n = hh.shape[0]
        res = np.zeros((n, 4), np.float32 if as_float else np.int64)
        for m, d in _per_handle(st, hh if not uniform else hh[0], what, False):
            sel = slice(None) if m is None else m
            sub = [c[sel] for c in cs]
            lay = layer[sel] if layer is not None else None
            if gather:
                res[sel] = _gather4(st, d, sub, comp, as_float)
            else:
                res[sel] = _sample(st, d, geom, sub, lay, ctyp == "s32", as_float)
        outs = [res[:, k].astype(out_t) for k in range(4)]
        _finish(ws, outs, uniform, st, idx)

    return run


def _gather4(st, d, coords, comp: int, as_float: bool):
    """tld4: component comp of the four texels bilinear filtering would use, in PTX's order
    (u0,v1), (u1,v1), (u1,v0), (u0,v0)."""
    normalized = bool(d.normalized)
    sizes = [d.width, d.height]
    i0 = [np.floor(coords[k].astype(np.float64) * (sizes[k] if normalized else 1) - 0.5).astype(np.int64)
          for k in range(2)]
    z = np.zeros_like(i0[0])
    out = np.zeros((i0[0].shape[0], 4), np.float32 if as_float else np.int64)
    for j, (dx, dy) in enumerate(((0, 1), (1, 1), (1, 0), (0, 0))):
        ix, okx = _address(i0[0] + dx, sizes[0], d.addr[0], normalized)
        iy, oky = _address(i0[1] + dy, sizes[1], d.addr[1], normalized)
        valid = np.ones(ix.shape[0], bool)
        for ok in (okx, oky):
            if ok is not None:
                valid &= ok
        out[:, j] = _combine_point(st, d, [ix, iy], z, 2, valid, as_float)[:, comp]
    return out


_TXQ = {
    "width": lambda d: d.width,
    "height": lambda d: d.height,
    "depth": lambda d: d.depth if d.flags & td.FLAG_3D else 1,
    "array_size": lambda d: (d.depth // 6 if d.flags & td.FLAG_CUBEMAP else d.depth) if d.flags & td.FLAG_LAYERED
    else 0,
    "normalized_coords": lambda d: d.normalized,
    "filter_mode": lambda d: d.filter,
    "addr_mode_0": lambda d: d.addr[0],
    "addr_mode_1": lambda d: d.addr[1],
    "addr_mode_2": lambda d: d.addr[2],
    "num_mipmap_levels": lambda d: 1,
    "num_samples": lambda d: 1,
}


def compile_txq(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    surface = parts[0] == "suq"
    q = [p for p in parts[1:] if p not in ("b32", "level")]
    if len(q) != 1 or q[0] not in _TXQ or (surface and q[0] not in ("width", "height", "depth", "array_size")):
        raise ctx.fail(f"{ins.op} (query)")
    f = _TXQ[q[0]]
    w = ctx.writer(ins.args[0])
    a = ins.args[1]
    base = getattr(a, "base", None)
    if not isinstance(base, Reg):
        raise ctx.fail(f"{ins.op} on a .texref/.surfref variable (only texture and surface objects)")
    hr = ctx.reader(base, "u64")
    what = f"{ins.op} (line {ins.line})"

    def run(st, idx):
        h = hr(st, idx)
        if h.__class__ is not ndarray:
            w(st, idx, np.uint32(f(_desc(st, int(h), what, surface))))
            return
        out = np.zeros(h.shape[0], np.uint32)
        for m, d in _per_handle(st, h, what, surface):
            out[slice(None) if m is None else m] = f(d)
        w(st, idx, out)

    return run


# ---- surfaces -------------------------------------------------------------------------------------------

_SU_LAYOUT = {"1d": (None, 1), "2d": (None, 2), "3d": (None, 3), "a1d": (0, 1), "a2d": (0, 2)}


def _surface_parts(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    if len(parts) < 2 or parts[1] != "b":
        raise ctx.fail(f"{ins.op} (formatted surface access .p)")
    rest = parts[2:]
    if not rest or rest[0] not in _SU_LAYOUT:
        raise ctx.fail(f"{ins.op} (geometry)")
    geom = rest.pop(0)
    vec = 1
    if rest and rest[0] in ("v2", "v4"):
        vec = int(rest.pop(0)[1:])
    if not rest or rest[0] not in ("b8", "b16", "b32", "b64"):
        raise ctx.fail(f"{ins.op} (type)")
    bits = int(rest.pop(0)[1:])
    mode = rest.pop(0) if rest else "trap"
    if mode not in ("trap", "clamp", "zero") or rest:
        raise ctx.fail(f"{ins.op} (modifier)")
    return geom, vec, bits, mode


def _surface_offsets(st, d: td.Desc, geom, coords, layer, nbytes: int, mode: str, what: str):
    """(arena offsets, in-range mask) of surface accesses of nbytes at byte x and row/slice coordinates."""
    dims = _SU_LAYOUT[geom][1]
    x = coords[0].astype(np.int64)
    y = coords[1].astype(np.int64) if dims > 1 else np.zeros_like(x)
    z = coords[2].astype(np.int64) if dims > 2 else (layer.astype(np.int64) if layer is not None
                                                     else np.zeros_like(x))
    row = d.width * d.elem_size
    ok = (x >= 0) & (x + nbytes <= row) & (y >= 0) & (y < d.height) & (z >= 0) & (z < d.depth)
    if not ok.all():
        if mode == "trap":
            j = int(np.argmax(~ok))
            raise CudaError(Err.ILLEGAL_ADDRESS, f"{what}: surface access out of range at x={int(x[j])} bytes, "
                            f"y={int(y[j])}, z/layer={int(z[j])} by {st.describe_thread(j)}")
        if mode == "clamp":
            x = np.clip(x, 0, row - nbytes)
            y, z = np.clip(y, 0, d.height - 1), np.clip(z, 0, d.depth - 1)
            ok = np.ones_like(ok)
    off = (d.base - st.mem_base) + z * (d.height * d.pitch) + y * d.pitch + np.clip(x, 0, row - nbytes)
    return np.where(ok, off, d.base - st.mem_base), ok


def _surface_coords(ctx: Ctx, ins: Instr, addr, geom):
    if not isinstance(addr, Plist) or len(addr.items) != 2:
        raise ctx.fail(f"{ins.op} with these operands")
    hr = _handle_reader(ctx, ins, addr)
    cvec = addr.items[1].items if isinstance(addr.items[1], Vec) else (addr.items[1],)
    lpos, dims = _SU_LAYOUT[geom]
    first = 0 if lpos is None else 1
    crs = [ctx.reader(cvec[first + k], "s32") for k in range(dims)]
    lr = ctx.reader(cvec[0], "s32") if lpos is not None else None
    return hr, crs, lr


def compile_suld(ctx: Ctx, ins: Instr):
    geom, vec, bits, mode = _surface_parts(ctx, ins)
    dst = ins.args[0]
    items = dst.items if isinstance(dst, Vec) else (dst,)
    if len(items) != vec:
        raise ctx.error(f"{ins.op}: {len(items)} destinations")
    ws = [ctx.writer(r) for r in items]
    hr, crs, lr = _surface_coords(ctx, ins, ins.args[1], geom)
    nb = bits // 8
    ut = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[nb]
    what = f"{ins.op} (line {ins.line})"

    def run(st, idx):
        vals, uniform = _broadcast([hr(st, idx)] + [r(st, idx) for r in crs] + ([lr(st, idx)] if lr else []))
        hh, cs, layer = vals[0], vals[1 : 1 + len(crs)], (vals[-1] if lr else None)
        n = hh.shape[0]
        res = np.zeros((n, vec), ut)
        for m, d in _per_handle(st, hh if not uniform else hh[0], what, True):
            sel = slice(None) if m is None else m
            off, ok = _surface_offsets(st, d, geom, [c[sel] for c in cs], None if layer is None else layer[sel],
                                       nb * vec, mode, what)
            raw = np.ascontiguousarray(_gather_bytes(st, off, nb * vec)).view(ut).reshape(-1, vec)
            raw[~ok] = 0
            res[sel] = raw
        _finish(ws, [res[:, k] for k in range(vec)], uniform, st, idx)

    return run


def compile_sust(ctx: Ctx, ins: Instr):
    geom, vec, bits, mode = _surface_parts(ctx, ins)
    src = ins.args[1]
    items = src.items if isinstance(src, Vec) else (src,)
    if len(items) != vec:
        raise ctx.error(f"{ins.op}: {len(items)} sources")
    nb = bits // 8
    ut = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[nb]
    rs = [ctx.reader(r, f"b{bits}") for r in items]
    hr, crs, lr = _surface_coords(ctx, ins, ins.args[0], geom)
    what = f"{ins.op} (line {ins.line})"

    def run(st, idx):
        vals, _ = _broadcast([hr(st, idx)] + [r(st, idx) for r in crs] + ([lr(st, idx)] if lr else [])
                             + [r(st, idx) for r in rs])
        hh = vals[0]
        cs = vals[1 : 1 + len(crs)]
        layer = vals[1 + len(crs)] if lr else None
        data = np.stack([v.astype(ut) for v in vals[-vec:]], axis=1)
        for m, d in _per_handle(st, hh, what, True):
            sel = slice(None) if m is None else m
            off, ok = _surface_offsets(st, d, geom, [c[sel] for c in cs], None if layer is None else layer[sel],
                                       nb * vec, mode, what)
            b = np.ascontiguousarray(data[sel]).view(np.uint8).reshape(-1, nb * vec)
            off, b = off[ok], b[ok]
            # threads in order: the last writer of an address wins
            st.av[1][off[:, None] + np.arange(nb * vec, dtype=np.int64)] = b

    return run


HANDLERS = {"tex": compile_tex, "tld4": compile_tex, "txq": compile_txq, "suq": compile_txq,
            "suld": compile_suld, "sust": compile_sust}  # fmt: skip
