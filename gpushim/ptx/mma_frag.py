"""Tensor-core fragments for ops_mma.py and ops_matrix.py: which lane holds which matrix element, the encodings of
the element types, the check that a warp-collective matrix instruction runs on whole warps, and the state space of
address operands.

Fragment layouts:
- mma.sync, ldmatrix, stmatrix, movmatrix: exactly the PTX ISA's ("Matrix Fragments for mma.m16n8k16" and the
  other shapes; "Warp-level matrix load instruction: ldmatrix"), groupID = lane >> 2, threadID_in_group = lane & 3.
  Volta's mma.m8n8k4 with f16 sources computes four independent 8x8x4 products, one per quad pair.
- wmma: the ISA leaves the mapping implementation-defined ("Matrix fragments for WMMA"). sm_80 runs wmma as
  mma.m16n8k* instructions, so ours composes mma.sync's documented fragments: for m16n16k16, m32n8k16 and m16n16k8
  a fragment is one or two mma tiles (C/D: two m16n8 tiles side by side, or stacked for m32n8k16; A: one m16 tile,
  two stacked for m32; B: one n8 tile, two side by side for n16); m8n8k4 (f64), m8n8k32 (s4/u4) and m8n8k128 (b1)
  are mma.sync's layouts of those shapes. A/B fragments with more elements than their tiles hold (f16: 16 per
  lane, where a tile holds 8) repeat the tiles. m8n32k16 uses a plain mapping: element
  e of lane L is element L*U + (e mod U) of the matrix in row-major order (U = rows*cols/32). This models sm_80's
  wmma but is not verified on hardware; programs cannot rely on it anyway. load, mma and store agree, and
  element-wise code on `frag.x[i]` (fill, scaling, conversion) works as on a GPU.
"""

from __future__ import annotations

import numpy as np

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx.operands import Ctx

ELEM_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "s8": 8, "u8": 8, "s32": 32, "b16": 16,
              "e4m3": 8, "e5m2": 8, "s4": 4, "u4": 4, "b1": 1}  # fmt: skip
INT_TYPES = ("s8", "u8", "s4", "u4", "b1")  # integer sources (s32 accumulators)
FP8 = ("e4m3", "e5m2")
MMA_TYPES = {"f16", "bf16", "tf32", "f32", "f64", "s8", "u8", "s32", "s4", "u4", "b1", "e4m3", "e5m2"}
LANE = np.arange(32)
_G = LANE >> 2  # groupID
_T = LANE & 3  # threadID_in_group
_CANON = {"f32": 0x7FFFFFFF, "f16": 0x7FFF}


# -- register fragments <-> element values ----------------------------------------------------------------------
def reg_type(typ: str) -> str:
    return "b64" if typ == "f64" else "b32"


def per_reg(typ: str) -> int:
    return max(1, 32 // ELEM_BITS[typ])


def read_elems(readers, st, idx, n: int, typ: str) -> np.ndarray:
    """Bits of the fragment elements of every thread: (n, registers * elements per register), uint64."""
    eb = ELEM_BITS[typ]
    per = per_reg(typ)
    cols = []
    for r in readers:
        v = np.broadcast_to(np.asarray(r(st, idx)), (n,)).astype(np.uint64)
        if per == 1:
            cols.append(v)
        else:
            m = np.uint64((1 << eb) - 1)
            cols.extend((v >> np.uint64(q * eb)) & m for q in range(per))
    return np.stack(cols, axis=1)


def write_elems(writers, st, idx, bits: np.ndarray, typ: str) -> None:
    """Inverse of read_elems: bits (n, E) uint64 packed into the destination registers."""
    eb = ELEM_BITS[typ]
    per = per_reg(typ)
    for j, w in enumerate(writers):
        if per == 1:
            v = bits[:, j]
            w(st, idx, v if typ == "f64" else v.astype(np.uint32))
            continue
        acc = np.zeros(bits.shape[0], np.uint64)
        for q in range(per):
            acc |= bits[:, j * per + q] << np.uint64(q * eb)
        w(st, idx, acc.astype(np.uint32))


def _fp8_table(exp_bits: int) -> np.ndarray:
    """Values of the 256 fp8 codes: e4m3 (bias 7, no infinities, S.1111.111 is NaN) or e5m2 (bias 15, IEEE-like)."""
    man_bits = 7 - exp_bits
    bias = (1 << (exp_bits - 1)) - 1
    out = np.empty(256, np.float64)
    for code in range(256):
        e, m = (code >> man_bits) & ((1 << exp_bits) - 1), code & ((1 << man_bits) - 1)
        if exp_bits == 5 and e == 31:
            v = np.inf if m == 0 else np.nan
        elif exp_bits == 4 and e == 15 and m == 7:
            v = np.nan
        elif e == 0:
            v = m * 2.0 ** (1 - bias - man_bits)
        else:
            v = (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
        out[code] = -v if code & 0x80 else v
    return out


_FP8_VALUES = {"e4m3": _fp8_table(4), "e5m2": _fp8_table(5)}


def decode(bits: np.ndarray, typ: str) -> np.ndarray:
    """Element bits -> values: float64 for floating types (exact), int64 for integer types."""
    if typ in FP8:
        return _FP8_VALUES[typ][bits.astype(np.uint8)]
    if typ == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if typ == "bf16":
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    if typ == "tf32":
        return (bits.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if typ == "f32":
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    if typ == "f64":
        return bits.astype(np.uint64).view(np.float64)
    if typ == "s8":
        return bits.astype(np.uint8).view(np.int8).astype(np.int64)
    if typ == "u8":
        return bits.astype(np.uint8).astype(np.int64)
    if typ == "s32":
        return bits.astype(np.uint32).view(np.int32).astype(np.int64)
    if typ in ("s4", "u4", "b1"):
        v = bits.astype(np.int64)
        return ((v & 15) ^ 8) - 8 if typ == "s4" else v
    raise ValueError(typ)


def encode(vals: np.ndarray, typ: str, sat: bool = False) -> np.ndarray:
    """Values -> element bits (uint64), rounding floats to nearest even; s32 wraps (clamps with sat)."""
    with np.errstate(all="ignore"):
        if typ in ("f32", "f16"):
            f = np.asarray(vals, np.float64).astype(np.float32)
            if typ == "f16":
                b = f.astype(np.float16).view(np.uint16).astype(np.uint64)
            else:
                b = f.view(np.uint32).astype(np.uint64)
            return np.where(np.isnan(f), np.uint64(_CANON[typ]), b)
        if typ == "f64":
            return np.asarray(vals, np.float64).view(np.uint64)
        if typ == "s32":
            v = np.asarray(vals, np.int64)
            if sat:
                v = np.clip(v, -(2**31), 2**31 - 1)
            return (v & 0xFFFFFFFF).astype(np.uint64)
    raise ValueError(typ)


# -- warps ---------------------------------------------------------------------------------------------------------
def warp_threads(st, idx, what: str) -> np.ndarray:
    """The running threads as (warps, 32) in lane order; every warp must be complete."""
    t = np.arange(st.n) if idx is None else np.asarray(idx)
    ok = t.size % 32 == 0
    if ok:
        tt = t.reshape(-1, 32)
        lane = st.sp["%laneid"]
        lane = lane[tt] if lane.__class__ is np.ndarray else np.broadcast_to(lane, tt.shape)
        w = st.warp[tt]
        ok = bool((lane == LANE).all() and (w == w[:, :1]).all())
    if not ok:
        w = st.warp[t]
        _, first, counts = np.unique(w, return_index=True, return_counts=True)
        bad = int(t[first[np.flatnonzero(counts != 32)[0]]]) if (counts != 32).any() else int(t[0])
        raise CudaError(
            Err.ILLEGAL_INSTRUCTION,
            f"{what}: a warp-collective matrix instruction needs all 32 threads of the warp; "
            f"{st.describe_thread(bad)} ran it in a partial or diverged warp",
        )
    return tt


def per_warp(v, n: int, nw: int) -> np.ndarray:
    """A per-thread operand as lane 0's value of each warp."""
    return np.broadcast_to(np.asarray(v), (n,)).reshape(nw, 32)[:, 0]


# -- fragment layouts ----------------------------------------------------------------------------------------------
def wmma_layout(shape: str, typ: str, which: str, rows: int, cols: int, elems: int):
    """(rows, cols) of each lane's wmma fragment elements, arrays (32, elems); see the module docstring."""
    e = np.arange(elems)
    if shape in ("m8n8k4", "m8n8k32", "m8n8k128"):  # f64, s4/u4, b1: mma.sync's layouts of these shapes
        return mma_layout(shape, typ if which in "ab" else "s32", "c" if which in "cd" else which)
    if shape == "m8n32k16":
        u = rows * cols // 32
        p = LANE[:, None] * u + (e[None, :] % u)
        return p // cols, p % cols
    if which in "cd":
        base = mma_layout("m16n8k16", "f16", "c")
    else:
        base = mma_layout("m16n8k8" if typ == "tf32" else "m16n8k16", typ, which)
    e0 = base[0].shape[1]
    tiles = rows * cols // (32 * e0)
    dr, dc = (16, 0) if shape == "m32n8k16" and which != "b" else (0, 8)
    u = e % (e0 * tiles)
    t, i = u // e0, u % e0
    return base[0][:, i] + dr * t[None, :], base[1][:, i] + dc * t[None, :]


def mma_layout(shape: str, atyp: str, which: str):
    """(rows, cols) of each lane's fragment elements, arrays (32, E), per the PTX ISA's figures."""
    g, t = _G[:, None], _T[:, None]
    sixteen = atyp in ("f16", "bf16")
    if which == "c":
        if shape.startswith("m8n8"):
            i = np.arange(2)[None, :]
            return np.broadcast_to(g, (32, 2)), t * 2 + i
        i = np.arange(4)[None, :]
        return g + 8 * (i >> 1), t * 2 + (i & 1)
    if atyp in INT_TYPES or atyp in FP8:
        return int_layout(shape, atyp, which)
    key = (shape, "16" if sixteen else atyp)
    if key in (("m16n8k4", "f64"), ("m16n8k8", "f64")):
        key = (shape, "tf32")  # sm_90's f64 shapes share tf32's layouts (one element per register)
    if which == "a":
        i = {
            ("m16n8k16", "16"): 8, ("m16n8k8", "16"): 4, ("m16n8k8", "tf32"): 4, ("m16n8k4", "tf32"): 2,
            ("m8n8k4", "f64"): 1, ("m16n8k16", "f64"): 8,
        }[key]  # fmt: skip
        i = np.arange(i)[None, :]
        if key == ("m16n8k16", "f64"):
            return g + 8 * (i & 1), t + 4 * (i >> 1)
        if key == ("m16n8k16", "16"):
            return g + 8 * ((i >> 1) & 1), t * 2 + (i & 1) + 8 * (i >> 2)
        if key == ("m16n8k8", "16"):
            return g + 8 * (i >> 1), t * 2 + (i & 1)
        if key == ("m16n8k8", "tf32"):
            return g + 8 * (i & 1), t + 4 * (i >> 1)
        if key == ("m16n8k4", "tf32"):
            return g + 8 * i, np.broadcast_to(t, (32, 2))
        return g, t  # m8n8k4 f64
    i = {
        ("m16n8k16", "16"): 4, ("m16n8k8", "16"): 2, ("m16n8k8", "tf32"): 2, ("m16n8k4", "tf32"): 1,
        ("m8n8k4", "f64"): 1, ("m16n8k16", "f64"): 4,
    }[key]  # fmt: skip
    i = np.arange(i)[None, :]
    gcol = np.broadcast_to(g, (32, i.shape[1]))
    if key == ("m16n8k16", "f64"):
        return t + 4 * i, gcol
    if key == ("m16n8k16", "16"):
        return t * 2 + (i & 1) + 8 * (i >> 1), gcol
    if key == ("m16n8k8", "16"):
        return t * 2 + i, gcol
    if key == ("m16n8k8", "tf32"):
        return t + 4 * i, gcol
    return np.broadcast_to(t, (32, 1)), gcol  # m16n8k4 tf32, m8n8k4 f64


def int_layout(shape: str, typ: str, which: str):
    """A/B fragments of 8-, 4- and 1-bit elements (s8/u8/e4m3/e5m2, s4/u4, b1): with p elements per register,
    m8n8k(4p) holds one register (A: row g, columns t*p..; B: the transpose), m16n8k(4p) two A registers (rows g and
    g+8) and one B register, m16n8k(8p) four A registers (rows g, g+8, g, g+8; the last two 4p columns further) and
    two B registers (PTX ISA, "Matrix Fragments for mma.m8n8k16 / m16n8k16 / m16n8k32 / m16n8k64 / m8n8k128 /
    m16n8k128 / m16n8k256")."""
    g, t = _G[:, None], _T[:, None]
    per = 32 // ELEM_BITS[typ]
    k = dims(shape)[2]
    if shape.startswith("m8n8"):
        i = np.arange(per)[None, :]
        r, c = np.broadcast_to(g, (32, per)), t * per + i
        return (r, c) if which == "a" else (c, r)
    blocks = k // (4 * per)
    if which == "a":
        i = np.arange(2 * per * blocks)[None, :]
        j = i // per
        return g + 8 * (j & 1), t * per + i % per + 4 * per * (j >> 1)
    i = np.arange(per * blocks)[None, :]
    return t * per + i % per + 4 * per * (i // per), np.broadcast_to(g, (32, i.shape[1]))


def dims(shape: str) -> tuple[int, int, int]:
    m, rest = shape[1:].split("n")
    n, k = rest.split("k")
    return int(m), int(n), int(k)


def volta_layout(which: str, layout: str):
    """mma.m8n8k4 with f16 sources (PTX ISA, "Matrix Fragments for mma.m8n8k4 with .f16 floating point type"): four
    independent 8x8x4 products, one per quad pair (lanes 4q..4q+3 and 16+4q..16+4q+3); (pair, rows, cols)."""
    lane = LANE[:, None]
    hi = 4 * (lane >= 16)
    i = np.arange(8 if which in "cf" else 4)[None, :]
    if which == "a":
        r, c = (lane % 4 + hi, i) if layout == "row" else (i % 4 + hi, lane % 4)
    elif which == "b":
        r, c = (lane % 4, i + hi) if layout == "row" else (i, lane % 4 + hi)
    elif which == "c":  # .f16 accumulators
        r, c = lane % 4 + hi, i
    else:  # "f": .f32 accumulators
        r, c = (lane & 1) + (i & 2) + hi, (i & 4) + (lane & 2) + (i & 1)
    shape = (32, i.shape[1])
    return tuple(np.broadcast_to(x, shape) for x in ((lane >> 2) & 3, r, c))


def frag_pos(trans: bool):
    """(row, col) in an 8x8 matrix of the two b16 halves each lane holds (fragment of mma's 16-bit operands)."""
    r = np.stack([_G, _G], axis=1)
    c = np.stack([_T * 2, _T * 2 + 1], axis=1)
    return (c, r) if trans else (r, c)


def space_of(ctx: Ctx, parts: list[str], addr) -> str | None:
    from gpushim.ptx.ops_mem import SPACE_NAMES, _resolve_space

    space = next((SPACE_NAMES[p] for p in parts if p in SPACE_NAMES), None)
    if space not in (None, "global", "shared"):
        raise ctx.fail(f"{'.'.join(parts)} (state space .{space})")
    return _resolve_space(ctx, space, addr)
