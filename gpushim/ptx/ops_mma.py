"""Tensor-core instructions: wmma.load/mma/store, mma.sync, ldmatrix, stmatrix, movmatrix (and cvt to tf32).

All are warp-collective: the scheduler runs them once every live thread of each warp involved has arrived, and
they need all 32 lanes (a partial warp fails the launch with ILLEGAL_INSTRUCTION; PTX leaves it undefined).
An instruction gathers each warp's fragments into whole matrices (numpy arrays of shape (warps, rows, cols)),
computes, and scatters the result back to the lanes.

Fragment layouts:
- mma.sync, ldmatrix, stmatrix, movmatrix: exactly the PTX ISA's ("Matrix Fragments for mma.m16n8k16" and the
  other shapes; "Warp-level matrix load instruction: ldmatrix"), groupID = lane >> 2, threadID_in_group = lane & 3.
  Volta's mma.m8n8k4 with f16 sources computes four independent 8x8x4 products, one per quad pair.
- wmma: the ISA leaves the mapping implementation-defined ("Matrix fragments for WMMA"). sm_80 runs wmma as
  mma.m16n8k* instructions, so ours composes mma.sync's documented fragments: for m16n16k16, m32n8k16 and m16n16k8
  a fragment is one or two mma tiles (C/D: two m16n8 tiles side by side, or stacked for m32n8k16; A: one m16 tile,
  two stacked for m32; B: one n8 tile, two side by side for n16); m8n8k4 (f64), m8n8k32 (s4/u4) and m8n8k128 (b1)
  are mma.sync's layouts of those shapes. A/B
  fragments with more elements than their tiles hold (f16: 16 per lane) repeat them, as the hardware's f16
  fragments hold elements twice. m8n32k16 uses a plain mapping: element e of lane L is element L*U + (e mod U)
  of the matrix in row-major order (U = rows*cols/32). This models sm_80's wmma but is not verified on hardware;
  programs cannot rely on it anyway. load, mma and store agree, and element-wise code on `frag.x[i]` (fill,
  scaling, conversion) works as on a GPU.

Arithmetic (the ISA does not specify the order or intermediate precision of a tensor core's dot products):
- f16, bf16 and tf32 sources: every product is exact (in f64); each element of D is c + the K products summed in
  f64 in order of k, rounded once to f32 (round to nearest even), then once more to f16 for an f16 D. This
  follows the public finding that the products are exact and the sums are kept at f32 precision or better before
  one final rounding to f16 (Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ
  Computer Science 7:e330, 2021). How the hardware aligns and rounds the summands is not settled in public: that
  paper reports truncation (round toward zero) on V100/T4/A100, while Valpey, Li, Pai, Gopalakrishnan, "An SMT
  Formalization of Mixed-Precision Matrix Multiplication" (arXiv:2502.15999, 2025) reports that it is not
  round-toward-zero and that the 5-term accumulator needs 3 extra carry-out bits. Neither is modelled, so the last
  bit of an f32 result can differ from a real GPU's. NaN results are the canonical NaNs (0x7fffffff, 0x7fff), as
  elsewhere in this engine.
- tf32 sources: only the tf32 bits of each f32 register are used (the low 13 mantissa bits are ignored); what the
  hardware does with registers that are not valid tf32 values is not documented, this is our choice.
- f64 (m8n8k4, and sm_90's m16n8k4/k8/k16): "identical to .f64 fused multiply-add" (PTX ISA, "mma"): one fma per
  k in order of k, from c (d = fma(a3, b3, fma(a2, b2, ...))), each rounded per .rn (default), .rz, .rm or .rp.
- s8/u8, s4/u4: exact integer sums; the s32 result wraps, or clamps with .satfinite. b1: popc(row AND/XOR
  column) + c, wrapping.
- e4m3/e5m2 (sm_89 fp8 mma.sync m16n8k32/m16n8k16): decoded exactly, then as f16 sources.
"""

from __future__ import annotations

import numpy as np

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx import fexact
from gpushim.ptx.nodes import Addr, Instr, Vec
from gpushim.ptx.operands import Ctx

_ELEM_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "s8": 8, "u8": 8, "s32": 32, "b16": 16,
              "e4m3": 8, "e5m2": 8, "s4": 4, "u4": 4, "b1": 1}  # fmt: skip
_INT = ("s8", "u8", "s4", "u4", "b1")  # integer sources (s32 accumulators)
_FP8 = ("e4m3", "e5m2")
_MMA_TYPES = {"f16", "bf16", "tf32", "f32", "f64", "s8", "u8", "s32", "s4", "u4", "b1", "e4m3", "e5m2"}
_LANE = np.arange(32)
_G = _LANE >> 2  # groupID
_T = _LANE & 3  # threadID_in_group
_CANON = {"f32": 0x7FFFFFFF, "f16": 0x7FFF}


# -- register fragments <-> element values ----------------------------------------------------------------------
def _reg_type(typ: str) -> str:
    return "b64" if typ == "f64" else "b32"


def _per_reg(typ: str) -> int:
    return max(1, 32 // _ELEM_BITS[typ])


def _read_elems(readers, st, idx, n: int, typ: str) -> np.ndarray:
    """Bits of the fragment elements of every thread: (n, registers * elements per register), uint64."""
    eb = _ELEM_BITS[typ]
    per = _per_reg(typ)
    cols = []
    for r in readers:
        v = np.broadcast_to(np.asarray(r(st, idx)), (n,)).astype(np.uint64)
        if per == 1:
            cols.append(v)
        else:
            m = np.uint64((1 << eb) - 1)
            cols.extend((v >> np.uint64(q * eb)) & m for q in range(per))
    return np.stack(cols, axis=1)


def _write_elems(writers, st, idx, bits: np.ndarray, typ: str) -> None:
    """Inverse of _read_elems: bits (n, E) uint64 packed into the destination registers."""
    eb = _ELEM_BITS[typ]
    per = _per_reg(typ)
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
    if typ in _FP8:
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
def _warp_threads(st, idx, what: str) -> np.ndarray:
    """The running threads as (warps, 32) in lane order; every warp must be complete."""
    t = np.arange(st.n) if idx is None else np.asarray(idx)
    ok = t.size % 32 == 0
    if ok:
        tt = t.reshape(-1, 32)
        lane = st.sp["%laneid"]
        lane = lane[tt] if lane.__class__ is np.ndarray else np.broadcast_to(lane, tt.shape)
        w = st.warp[tt]
        ok = bool((lane == _LANE).all() and (w == w[:, :1]).all())
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


def _per_warp(v, n: int, nw: int) -> np.ndarray:
    """A per-thread operand as lane 0's value of each warp."""
    return np.broadcast_to(np.asarray(v), (n,)).reshape(nw, 32)[:, 0]


# -- fragment layouts ----------------------------------------------------------------------------------------------
def _wmma_layout(shape: str, typ: str, which: str, rows: int, cols: int, elems: int):
    """(rows, cols) of each lane's wmma fragment elements, arrays (32, elems); see the module docstring."""
    e = np.arange(elems)
    if shape in ("m8n8k4", "m8n8k32", "m8n8k128"):  # f64, s4/u4, b1: mma.sync's layouts of these shapes
        return _mma_layout(shape, typ if which in "ab" else "s32", "c" if which in "cd" else which)
    if shape == "m8n32k16":
        u = rows * cols // 32
        p = _LANE[:, None] * u + (e[None, :] % u)
        return p // cols, p % cols
    if which in "cd":
        base = _mma_layout("m16n8k16", "f16", "c")
    else:
        base = _mma_layout("m16n8k8" if typ == "tf32" else "m16n8k16", typ, which)
    e0 = base[0].shape[1]
    tiles = rows * cols // (32 * e0)
    dr, dc = (16, 0) if shape == "m32n8k16" and which != "b" else (0, 8)
    u = e % (e0 * tiles)
    t, i = u // e0, u % e0
    return base[0][:, i] + dr * t[None, :], base[1][:, i] + dc * t[None, :]


def _mma_layout(shape: str, atyp: str, which: str):
    """(rows, cols) of each lane's fragment elements, arrays (32, E), per the PTX ISA's figures."""
    g, t = _G[:, None], _T[:, None]
    sixteen = atyp in ("f16", "bf16")
    if which == "c":
        if shape.startswith("m8n8"):
            i = np.arange(2)[None, :]
            return np.broadcast_to(g, (32, 2)), t * 2 + i
        i = np.arange(4)[None, :]
        return g + 8 * (i >> 1), t * 2 + (i & 1)
    if atyp in _INT or atyp in _FP8:
        return _int_layout(shape, atyp, which)
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


def _int_layout(shape: str, typ: str, which: str):
    """A/B fragments of 8-, 4- and 1-bit elements (s8/u8/e4m3/e5m2, s4/u4, b1): with p elements per register,
    m8n8k(4p) holds one register (A: row g, columns t*p..; B: the transpose), m16n8k(4p) two A registers (rows g and
    g+8) and one B register, m16n8k(8p) four A registers (rows g, g+8, g, g+8; the last two 4p columns further) and
    two B registers (PTX ISA, "Matrix Fragments for mma.m8n8k16 / m16n8k16 / m16n8k32 / m16n8k64 / m8n8k128 /
    m16n8k128 / m16n8k256")."""
    g, t = _G[:, None], _T[:, None]
    per = 32 // _ELEM_BITS[typ]
    k = _dims(shape)[2]
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


def _dims(shape: str) -> tuple[int, int, int]:
    m, rest = shape[1:].split("n")
    n, k = rest.split("k")
    return int(m), int(n), int(k)


# -- the arithmetic ------------------------------------------------------------------------------------------------
def matmul_acc(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, atyp: str, sat: bool = False, rnd: str = "rn", bop: str = "and"
) -> np.ndarray:
    """D = A B + C over the leading (warp) axis, with the arithmetic in the module docstring."""
    k = a.shape[-1]
    if atyp == "b1":  # popc(a_row AND/XOR b_col) + c
        both = np.einsum("wik,wkj->wij", a, b)
        if bop == "and":
            return c + both
        return c + a.sum(axis=2)[:, :, None] + b.sum(axis=1)[:, None, :] - 2 * both
    if atyp in _INT:
        return c + np.einsum("wik,wkj->wij", a, b)
    if atyp == "f64":
        d = c
        for j in range(k):
            d = fexact.fma_f64(a[:, :, j, None], b[:, None, j, :], d, rnd)
        return d
    with np.errstate(all="ignore"):
        acc = c.copy()
        for j in range(k):
            acc += a[:, :, j, None] * b[:, None, j, :]
    return acc


# -- operand parsing -----------------------------------------------------------------------------------------------
def _regs(ctx: Ctx, op, what: str) -> tuple:
    if not isinstance(op, Vec):
        raise ctx.error(f"{what}: expected a {{...}} register vector, found {op}")
    return op.items


def _space(ctx: Ctx, parts: list[str], addr) -> str | None:
    from gpushim.ptx.ops_mem import SPACE_NAMES, _resolve_space

    space = next((SPACE_NAMES[p] for p in parts if p in SPACE_NAMES), None)
    if space not in (None, "global", "shared"):
        raise ctx.fail(f"{'.'.join(parts)} (state space .{space})")
    return _resolve_space(ctx, space, addr)


def _wmma_frag(ctx: Ctx, which: str, shape: str, typ: str, nregs: int):
    """(rows, cols, element layout) of a wmma fragment, checking its register count."""
    m, n, k = _dims(shape)
    nr, nc = {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[which]
    elems = nregs * _per_reg(typ)
    u = nr * nc // 32
    want = 16 if typ == "f16" and which in "ab" else u
    if elems != want:
        raise ctx.error(f"wmma .{which} fragment of {shape} .{typ} needs {want // _per_reg(typ)} registers, "
                        f"found {nregs}")  # fmt: skip
    return nr, nc, _wmma_layout(shape, typ, which, nr, nc, elems)


_WMMA_SHAPES = {
    "f16": ("m16n16k16", "m32n8k16", "m8n32k16"), "bf16": ("m16n16k16", "m32n8k16", "m8n32k16"),
    "tf32": ("m16n16k8",), "f64": ("m8n8k4",), "s8": ("m16n16k16", "m32n8k16", "m8n32k16"),
    "u8": ("m16n16k16", "m32n8k16", "m8n32k16"), "s4": ("m8n8k32",), "u4": ("m8n8k32",), "b1": ("m8n8k128",),
}  # fmt: skip


def _check_shape(ctx: Ctx, ins: Instr, shape: str | None, atyp: str) -> str:
    if shape is None:
        raise ctx.error(f"{ins.op}: no shape")
    if atyp not in _WMMA_SHAPES:
        raise ctx.fail(f"{ins.op} (wmma on .{atyp} elements)")
    if shape not in _WMMA_SHAPES[atyp]:
        raise ctx.fail(f"{ins.op} (wmma shape {shape} for .{atyp})")
    return shape


def _shape_of(parts: list[str]) -> str | None:
    return next((p for p in parts if p.startswith("m") and "n" in p and "k" in p and p[1].isdigit()), None)


# -- wmma ------------------------------------------------------------------------------------------------------------
def compile_wmma(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    if len(parts) < 2 or parts[1] not in ("load", "store", "mma"):
        raise ctx.fail(f"{ins.op}")
    if parts[1] == "mma":
        return _compile_wmma_mma(ctx, ins, parts)
    return _compile_wmma_ldst(ctx, ins, parts)


def _compile_wmma_ldst(ctx: Ctx, ins: Instr, parts: list[str]):
    from gpushim.ptx.ops_mem import gather, scatter

    load = parts[1] == "load"
    which = parts[2]
    if (load and which not in ("a", "b", "c")) or (not load and which != "d"):
        raise ctx.error(f"{ins.op}: bad matrix .{which}")
    layout = "col" if "col" in parts else "row"
    typ = parts[-1]
    shape = _shape_of(parts)
    if which in "ab":
        _check_shape(ctx, ins, shape, typ)
    else:
        if typ not in ("f16", "f32", "f64", "s32"):
            raise ctx.fail(f"{ins.op} (accumulator .{typ})")
        if shape not in {s for v in _WMMA_SHAPES.values() for s in v}:
            raise ctx.fail(f"{ins.op} (wmma shape {shape})")
    frag_op, addr = (ins.args[0], ins.args[1]) if load else (ins.args[1], ins.args[0])
    if not isinstance(addr, Addr):
        raise ctx.error(f"{ins.op}: expected an address")
    regs = _regs(ctx, frag_op, ins.op)
    nr, nc, (rows, cols) = _wmma_frag(ctx, which, shape, typ, len(regs))
    space = _space(ctx, parts, addr)
    _, ra = ctx.address(addr)
    rstride = ctx.reader(ins.args[2], "u32") if len(ins.args) > 2 else None
    default_ld = nc if layout == "row" else nr
    what = f"{ins.op} (line {ins.line})"
    rw = [ctx.writer(r) for r in regs] if load else [ctx.reader(r, _reg_type(typ)) for r in regs]
    r_, c_ = (rows, cols) if layout == "row" else (cols, rows)  # (major, minor) index of each element
    if _ELEM_BITS[typ] < 8:
        return _compile_wmma_load_subbyte(ctx, ins, (ra, rstride, default_ld, space), r_, c_, typ, rw)
    esize = _ELEM_BITS[typ] // 8
    dt = np.dtype(f"u{esize}")

    def addresses(st, idx, n, nw):
        base = _per_warp(ra(st, idx), n, nw).astype(np.uint64)
        ld = _per_warp(rstride(st, idx), n, nw).astype(np.uint64) if rstride else np.full(nw, default_ld, np.uint64)
        off = (r_[None].astype(np.uint64) * ld[:, None, None] + c_[None].astype(np.uint64)) * np.uint64(esize)
        return (base[:, None, None] + off).reshape(n, -1)  # (threads, elements)

    def wmma_load(st, idx):
        tt = _warp_threads(st, idx, what)
        nw, n = tt.shape[0], tt.size
        a = addresses(st, idx, n, nw)
        bits = np.stack([gather(st, idx, space, a[:, e], dt, 1, what)[0] for e in range(a.shape[1])], axis=1)
        _write_elems(rw, st, idx, bits.astype(np.uint64), typ)

    def wmma_store(st, idx):
        tt = _warp_threads(st, idx, what)
        nw, n = tt.shape[0], tt.size
        a = addresses(st, idx, n, nw)
        bits = _read_elems(rw, st, idx, n, typ)
        for e in range(a.shape[1]):
            scatter(st, idx, space, a[:, e], dt, [bits[:, e].astype(dt)], what)

    return wmma_load if load else wmma_store


def _compile_wmma_load_subbyte(ctx: Ctx, ins: Instr, operands, r_, c_, typ: str, writers):
    """wmma.load of s4/u4/b1 fragments: each register holds 32 consecutive bits of one row (A, row-major) or column
    (B, column-major), loaded as one 32-bit word."""
    from gpushim.ptx.ops_mem import gather

    ra, rstride, default_ld, space = operands
    eb = _ELEM_BITS[typ]
    per = 32 // eb
    first = np.arange(0, r_.shape[1], per)
    for j in first:  # the layout keeps each register's elements consecutive along the leading dimension
        if not (
            (r_[:, j : j + per] == r_[:, j : j + 1]).all()
            and (c_[:, j : j + per] == c_[:, j : j + 1] + np.arange(per)).all()
        ):
            raise ctx.fail(f"{ins.op} (layout)")
    rf, cf = r_[:, first].astype(np.uint64), c_[:, first].astype(np.uint64)
    what = f"{ins.op} (line {ins.line})"
    u32 = np.dtype(np.uint32)

    def wmma_load_subbyte(st, idx):
        tt = _warp_threads(st, idx, what)
        nw, n = tt.shape[0], tt.size
        base = _per_warp(ra(st, idx), n, nw).astype(np.uint64)
        ld = _per_warp(rstride(st, idx), n, nw).astype(np.uint64) if rstride else np.full(nw, default_ld, np.uint64)
        if ((ld * np.uint64(eb)) % np.uint64(32)).any():
            raise CudaError(Err.MISALIGNED_ADDRESS, f"{what}: a stride of {int(ld[0])} .{typ} elements is not a "
                            "multiple of 32 bits")  # fmt: skip
        bits = rf[None] * ld[:, None, None] + cf[None]
        addr = (base[:, None, None] + bits * np.uint64(eb) // np.uint64(8)).reshape(n, -1)
        for j, w in enumerate(writers):
            w(st, idx, gather(st, idx, space, addr[:, j], u32, 1, what)[0])

    return wmma_load_subbyte


def _compile_wmma_mma(ctx: Ctx, ins: Instr, parts: list[str]):
    types = [p for p in parts if p in _MMA_TYPES]
    if len(types) == 2:
        dtyp, ctyp = types
        atyp = btyp = "f16"
    elif len(types) == 4:
        dtyp, atyp, btyp, ctyp = types
    else:
        raise ctx.error(f"{ins.op}: expected 2 or 4 types")
    sat = "satfinite" in parts
    shape = _check_shape(ctx, ins, _shape_of(parts), atyp)
    bop = _check_sources(ctx, ins, parts, atyp, btyp, sat)
    if atyp in ("s4", "u4", "b1") and [p for p in parts if p in ("row", "col")] != ["row", "col"]:
        raise ctx.fail(f"{ins.op} (sub-byte wmma is .row.col only)")
    _acc_types(ctx, ins, atyp, dtyp, ctyp)
    rnd = _rounding(ctx, ins, parts, atyp)
    d, a, b, c = (_regs(ctx, x, ins.op) for x in ins.args[:4])
    fa = _wmma_frag(ctx, "a", shape, atyp, len(a))
    fb = _wmma_frag(ctx, "b", shape, btyp, len(b))
    fc = _wmma_frag(ctx, "c", shape, ctyp, len(c))
    fd = _wmma_frag(ctx, "d", shape, dtyp, len(d))
    return _mma_closure(ctx, ins, (a, b, c, d), (fa, fb, fc, fd), (atyp, btyp, ctyp, dtyp), sat, rnd, bop)


def _check_sources(ctx: Ctx, ins: Instr, parts: list[str], atyp: str, btyp: str, sat: bool) -> str:
    """Reject mixed source types other than signedness (s8/u8, s4/u4) and fp8 formats, and .satfinite on anything
    but integers; the bit operation of b1 (.xor.popc or .and.popc), "and" otherwise."""
    pairs = ({"s8", "u8"}, {"s4", "u4"}, set(_FP8))
    if atyp != btyp and not any({atyp, btyp} <= p for p in pairs):
        raise ctx.fail(f"{ins.op} (mixed .{atyp}/.{btyp} sources)")
    if sat and atyp not in ("s8", "u8", "s4", "u4"):
        raise ctx.fail(f"{ins.op} (.satfinite with .{atyp} sources)")
    bops = [p for p in parts if p in ("xor", "and")]
    if atyp == "b1":
        if len(bops) != 1 or "popc" not in parts:
            raise ctx.error(f"{ins.op}: .b1 needs .xor.popc or .and.popc")
        return bops[0]
    if bops or "popc" in parts:
        raise ctx.fail(f"{ins.op} (.{'.'.join(bops + ['popc'])} with .{atyp} sources)")
    return "and"


def _acc_types(ctx: Ctx, ins: Instr, atyp: str, dtyp: str, ctyp: str) -> None:
    ok = {"f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",), "f64": ("f64",), "e4m3": ("f16", "f32"),
          "e5m2": ("f16", "f32"), **{t: ("s32",) for t in _INT}}  # fmt: skip
    if atyp not in ok:
        raise ctx.fail(f"{ins.op} (.{atyp} sources)")
    if dtyp not in ok[atyp] or ctyp not in ok[atyp]:
        raise ctx.fail(f"{ins.op} (.{dtyp}/.{ctyp} accumulators with .{atyp} sources)")


def _batched(lay):
    """A layout as (batch, rows, cols): mma.m8n8k4 with f16 sources computes 4 independent products per warp."""
    if len(lay) == 3:
        return lay
    return np.zeros(lay[0].shape, np.int64), lay[0], lay[1]


def _rounding(ctx: Ctx, ins: Instr, parts: list[str], atyp: str) -> str:
    """The rounding modifier: .rn/.rz/.rm/.rp for f64 (each fma rounds so), none for the other types."""
    rnd = [p for p in parts if p in ("rn", "rz", "rm", "rp")]
    if rnd and atyp != "f64":
        raise ctx.fail(f"{ins.op} (rounding .{rnd[0]} with .{atyp} sources)")
    return rnd[0] if rnd else "rn"


def _mma_closure(ctx: Ctx, ins: Instr, regs, frags, types, sat: bool, rnd: str = "rn", bop: str = "and"):
    a, b, c, d = regs
    (ma, ka, la), (kb, nb, lb), (mc, nc, lc), (_, _, ld) = (f[:2] + (_batched(f[2]),) for f in frags)
    nq = int(la[0].max()) + 1
    atyp, btyp, ctyp, dtyp = types
    ra = [ctx.reader(r, _reg_type(atyp)) for r in a]
    rb = [ctx.reader(r, _reg_type(btyp)) for r in b]
    rc = [ctx.reader(r, _reg_type(ctyp)) for r in c]
    wd = [ctx.writer(r) for r in d]
    what = f"{ins.op} (line {ins.line})"

    def frag(readers, st, idx, n, nw, typ, lay, nr, ncol):
        vals = decode(_read_elems(readers, st, idx, n, typ), typ).reshape(nw, 32, -1)
        m = np.zeros((nw, nq, nr, ncol), vals.dtype)
        m[:, lay[0], lay[1], lay[2]] = vals
        return m.reshape(nw * nq, nr, ncol)

    def mma(st, idx):
        tt = _warp_threads(st, idx, what)
        nw, n = tt.shape[0], tt.size
        am = frag(ra, st, idx, n, nw, atyp, la, ma, ka)
        bm = frag(rb, st, idx, n, nw, btyp, lb, kb, nb)
        cm = frag(rc, st, idx, n, nw, ctyp, lc, mc, nc)
        dm = matmul_acc(am, bm, cm, atyp, sat, rnd, bop).reshape(nw, nq, mc, nc)
        out = dm[:, ld[0], ld[1], ld[2]].reshape(n, -1)
        _write_elems(wd, st, idx, encode(out, dtyp, sat), dtyp)

    return mma


# -- mma.sync --------------------------------------------------------------------------------------------------------
_MMA_SHAPES = {
    "f16": ("m16n8k16", "m16n8k8", "m8n8k4"), "bf16": ("m16n8k16", "m16n8k8"), "tf32": ("m16n8k8", "m16n8k4"),
    "f64": ("m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16"), "s8": ("m16n8k32", "m16n8k16", "m8n8k16"),
    "u8": ("m16n8k32", "m16n8k16", "m8n8k16"), "e4m3": ("m16n8k32", "m16n8k16"), "e5m2": ("m16n8k32", "m16n8k16"),
    "s4": ("m8n8k32", "m16n8k32", "m16n8k64"), "u4": ("m8n8k32", "m16n8k32", "m16n8k64"),
    "b1": ("m8n8k128", "m16n8k128", "m16n8k256"),
}  # fmt: skip


def _volta_layout(which: str, layout: str):
    """mma.m8n8k4 with f16 sources (PTX ISA, "Matrix Fragments for mma.m8n8k4 with .f16 floating point type"): four
    independent 8x8x4 products, one per quad pair (lanes 4q..4q+3 and 16+4q..16+4q+3); (pair, rows, cols)."""
    lane = _LANE[:, None]
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


def compile_mma(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    if "sp" in parts or "sp::ordered_metadata" in parts:
        raise ctx.fail(f"{ins.op} (sparse mma)")
    if "sync" not in parts or "aligned" not in parts:
        raise ctx.fail(f"{ins.op}")
    types = [p for p in parts if p in _MMA_TYPES]
    if len(types) != 4:
        raise ctx.fail(f"{ins.op} (expected .dtype.atype.btype.ctype)")
    dtyp, atyp, btyp, ctyp = types
    shape = _shape_of(parts)
    if atyp not in _MMA_SHAPES or shape not in _MMA_SHAPES[atyp]:
        raise ctx.fail(f"{ins.op} (mma shape {shape} with .{atyp})")
    if any(p.startswith("kind") for p in parts):
        raise ctx.fail(f"{ins.op} (.kind)")
    lay = [p for p in parts if p in ("row", "col")]
    volta = shape == "m8n8k4" and atyp == "f16"
    if len(lay) != 2 or (lay != ["row", "col"] and not volta):
        raise ctx.fail(f"{ins.op} (only .row.col layouts exist for this shape)")
    sat = "satfinite" in parts
    bop = _check_sources(ctx, ins, parts, atyp, btyp, sat)
    rnd = _rounding(ctx, ins, parts, atyp)
    _acc_types(ctx, ins, atyp, dtyp, ctyp)
    if dtyp != ctyp and (not volta or ctyp == "f32"):
        raise ctx.fail(f"{ins.op} (.{dtyp} D with .{ctyp} C)")
    m, n, k = _dims(shape)
    regs = [_regs(ctx, x, ins.op) for x in ins.args[:4]]
    d, a, b, c = regs
    if volta:
        la, lb = _volta_layout("a", lay[0]), _volta_layout("b", lay[1])
        lc, ld = (_volta_layout("c" if t == "f16" else "f", "") for t in (ctyp, dtyp))
    else:
        la, lb = _mma_layout(shape, atyp, "a"), _mma_layout(shape, btyp, "b")
        lc = ld = _mma_layout(shape, atyp, "c")
    for name, rr, lo, typ in (("A", a, la, atyp), ("B", b, lb, btyp), ("C", c, lc, ctyp), ("D", d, ld, dtyp)):
        if len(rr) * _per_reg(typ) != lo[-1].shape[1]:
            raise ctx.error(f"{ins.op}: the {name} fragment needs {lo[-1].shape[1] // _per_reg(typ)} registers, "
                            f"found {len(rr)}")  # fmt: skip
    frags = ((m, k, la), (k, n, lb), (m, n, lc), (m, n, ld))
    return _mma_closure(ctx, ins, (a, b, c, d), frags, (atyp, btyp, ctyp, dtyp), sat, rnd, bop)


# -- ldmatrix / stmatrix / movmatrix ---------------------------------------------------------------------------------
def _matrix_parts(ctx: Ctx, ins: Instr, parts: list[str]) -> tuple[int, bool]:
    if "m8n8" not in parts or "b16" not in parts:
        raise ctx.fail(f"{ins.op} (only .m8n8 .b16 matrices)")
    nmat = next((int(p[1:]) for p in parts if p in ("x1", "x2", "x4")), None)
    if nmat is None:
        raise ctx.error(f"{ins.op}: no .x1/.x2/.x4")
    return nmat, "trans" in parts


def _frag_pos(trans: bool):
    """(row, col) in an 8x8 matrix of the two b16 halves each lane holds (fragment of mma's 16-bit operands)."""
    r = np.stack([_G, _G], axis=1)
    c = np.stack([_T * 2, _T * 2 + 1], axis=1)
    return (c, r) if trans else (r, c)


def compile_ldmatrix(ctx: Ctx, ins: Instr):
    from gpushim.ptx.ops_mem import gather

    parts = ins.op.split(".")
    nmat, trans = _matrix_parts(ctx, ins, parts)
    dst, addr = ins.args[0], ins.args[1]
    regs = dst.items if isinstance(dst, Vec) else (dst,)
    if len(regs) != nmat:
        raise ctx.error(f"{ins.op}: {len(regs)} destination registers for .x{nmat}")
    ws = [ctx.writer(r) for r in regs]
    space = _space(ctx, parts, addr)
    _, ra = ctx.address(addr)
    what = f"{ins.op} (line {ins.line})"
    pr, pc = _frag_pos(trans)
    u16 = np.dtype(np.uint16)

    def ldmatrix(st, idx):
        tt = _warp_threads(st, idx, what)
        nw, n = tt.shape[0], tt.size
        a = np.broadcast_to(np.asarray(ra(st, idx)), (n,)).astype(np.uint64).reshape(nw, 32)
        prov = tt[:, : nmat * 8].reshape(-1)  # lanes 8j..8j+7 give the row addresses of matrix j
        rows = gather(st, prov, space, a[:, : nmat * 8].reshape(-1), u16, 8, what)
        mats = np.stack(rows, axis=1).reshape(nw, nmat, 8, 8)
        for j, w in enumerate(ws):
            m = mats[:, j]
            lo = m[:, pr[:, 0], pc[:, 0]].astype(np.uint32)
            hi = m[:, pr[:, 1], pc[:, 1]].astype(np.uint32)
            w(st, idx, (lo | (hi << np.uint32(16))).reshape(n))

    return ldmatrix


def compile_stmatrix(ctx: Ctx, ins: Instr):
    from gpushim.ptx.ops_mem import scatter

    parts = ins.op.split(".")
    nmat, trans = _matrix_parts(ctx, ins, parts)
    addr, src = ins.args[0], ins.args[1]
    regs = src.items if isinstance(src, Vec) else (src,)
    if len(regs) != nmat:
        raise ctx.error(f"{ins.op}: {len(regs)} source registers for .x{nmat}")
    rs = [ctx.reader(r, "b32") for r in regs]
    space = _space(ctx, parts, addr)
    _, ra = ctx.address(addr)
    what = f"{ins.op} (line {ins.line})"
    pr, pc = _frag_pos(trans)
    u16 = np.dtype(np.uint16)

    def stmatrix(st, idx):
        tt = _warp_threads(st, idx, what)
        nw, n = tt.shape[0], tt.size
        a = np.broadcast_to(np.asarray(ra(st, idx)), (n,)).astype(np.uint64).reshape(nw, 32)
        mats = np.zeros((nw, nmat, 8, 8), np.uint16)
        for j, r in enumerate(rs):
            v = np.broadcast_to(np.asarray(r(st, idx)), (n,)).astype(np.uint32).reshape(nw, 32)
            mats[:, j, pr[:, 0], pc[:, 0]] = (v & np.uint32(0xFFFF)).astype(np.uint16)
            mats[:, j, pr[:, 1], pc[:, 1]] = (v >> np.uint32(16)).astype(np.uint16)
        prov = tt[:, : nmat * 8].reshape(-1)
        rows = mats.reshape(nw * nmat * 8, 8)
        scatter(st, prov, space, a[:, : nmat * 8].reshape(-1), u16, [rows[:, q] for q in range(8)], what)

    return stmatrix


def compile_movmatrix(ctx: Ctx, ins: Instr):
    """movmatrix.sync.aligned.m8n8.trans.b16 d, a: transpose an 8x8 b16 matrix held in mma's fragment layout."""
    parts = ins.op.split(".")
    if "trans" not in parts or "m8n8" not in parts or "b16" not in parts:
        raise ctx.fail(f"{ins.op}")
    w = ctx.writer(ins.args[0])
    r = ctx.reader(ins.args[1], "b32")
    what = f"{ins.op} (line {ins.line})"
    pr, pc = _frag_pos(False)

    def movmatrix(st, idx):
        tt = _warp_threads(st, idx, what)
        nw, n = tt.shape[0], tt.size
        v = np.broadcast_to(np.asarray(r(st, idx)), (n,)).astype(np.uint32).reshape(nw, 32)
        m = np.zeros((nw, 8, 8), np.uint16)
        m[:, pr[:, 0], pc[:, 0]] = (v & np.uint32(0xFFFF)).astype(np.uint16)
        m[:, pr[:, 1], pc[:, 1]] = (v >> np.uint32(16)).astype(np.uint16)
        m = m.transpose(0, 2, 1)
        lo = m[:, pr[:, 0], pc[:, 0]].astype(np.uint32)
        hi = m[:, pr[:, 1], pc[:, 1]].astype(np.uint32)
        w(st, idx, (lo | (hi << np.uint32(16))).reshape(n))

    return movmatrix


# -- cvt to tf32 ------------------------------------------------------------------------------------------------------
def compile_cvt_tf32(ctx: Ctx, ins: Instr):
    """cvt.{rna,rn,rz}{.satfinite}.tf32.f32 d, a: an f32 bit pattern whose low 13 mantissa bits are zero."""
    parts = ins.op.split(".")
    if parts[-2:] != ["tf32", "f32"]:
        raise ctx.fail(f"{ins.op}")
    mods = set(parts[1:-2])
    rnd = mods & {"rna", "rn", "rz"}
    if len(rnd) != 1 or mods - rnd - {"satfinite"}:
        raise ctx.fail(f"{ins.op}")
    mode = rnd.pop()
    satf = "satfinite" in mods
    w = ctx.writer(ins.args[0])
    ra = ctx.reader(ins.args[1], "u32")

    def cvt(st, idx):
        b = np.asarray(ra(st, idx)).astype(np.uint64)
        mag = b & np.uint64(0x7FFFFFFF)
        if mode == "rna":
            r = b + np.uint64(0x1000)
        elif mode == "rn":
            r = b + np.uint64(0xFFF) + ((b >> np.uint64(13)) & np.uint64(1))
        else:
            r = b
        r = r & np.uint64(0xFFFFE000)
        finite = mag < np.uint64(0x7F800000)
        r = np.where(finite, r, b)  # infinities unchanged
        r = np.where(mag > np.uint64(0x7F800000), np.uint64(0x7FFFFFFF), r)  # NaN: canonical
        if satf:
            rmag = r & np.uint64(0x7FFFFFFF)
            big = finite & (rmag >= np.uint64(0x7F800000))
            r = np.where(big, (r & np.uint64(0x80000000)) | np.uint64(0x7F7FE000), r)
            r = np.where(mag == np.uint64(0x7F800000), (b & np.uint64(0x80000000)) | np.uint64(0x7F7FE000), r)
        w(st, idx, r.astype(np.uint32))

    return cvt
