"""Tensor-core instructions: wmma.load/mma/store, mma.sync (and cvt to tf32). Fragment layouts, element encodings
and the warp checks are in mma_frag.py, ldmatrix/stmatrix/movmatrix in ops_matrix.py.

All are warp-collective: the scheduler runs them once every live thread of each warp involved has arrived, and
they need all 32 lanes (a partial warp fails the launch with ILLEGAL_INSTRUCTION; PTX leaves it undefined).
An instruction gathers each warp's fragments into whole matrices (numpy arrays of shape (warps, rows, cols)),
computes, and scatters the result back to the lanes.

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
from gpushim.ptx.mma_frag import (
    ELEM_BITS,
    FP8,
    INT_TYPES,
    MMA_TYPES,
    decode,
    dims,
    encode,
    mma_layout,
    per_reg,
    per_warp,
    read_elems,
    reg_type,
    space_of,
    volta_layout,
    warp_threads,
    wmma_layout,
    write_elems,
)
from gpushim.ptx.nodes import Addr, Instr, Vec
from gpushim.ptx.operands import Ctx


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
    if atyp in INT_TYPES:
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


def _wmma_frag(ctx: Ctx, which: str, shape: str, typ: str, nregs: int):
    """(rows, cols, element layout) of a wmma fragment, checking its register count."""
    m, n, k = dims(shape)
    nr, nc = {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[which]
    elems = nregs * per_reg(typ)
    u = nr * nc // 32
    want = 16 if typ == "f16" and which in "ab" else u
    if elems != want:
        raise ctx.error(f"wmma .{which} fragment of {shape} .{typ} needs {want // per_reg(typ)} registers, "
                        f"found {nregs}")  # fmt: skip
    return nr, nc, wmma_layout(shape, typ, which, nr, nc, elems)


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
    space = space_of(ctx, parts, addr)
    _, ra = ctx.address(addr)
    rstride = ctx.reader(ins.args[2], "u32") if len(ins.args) > 2 else None
    default_ld = nc if layout == "row" else nr
    what = f"{ins.op} (line {ins.line})"
    rw = [ctx.writer(r) for r in regs] if load else [ctx.reader(r, reg_type(typ)) for r in regs]
    r_, c_ = (rows, cols) if layout == "row" else (cols, rows)  # (major, minor) index of each element
    if ELEM_BITS[typ] < 8:
        return _compile_wmma_load_subbyte(ctx, ins, (ra, rstride, default_ld, space), r_, c_, typ, rw)
    esize = ELEM_BITS[typ] // 8
    dt = np.dtype(f"u{esize}")

    def addresses(st, idx, n, nw):
        base = per_warp(ra(st, idx), n, nw).astype(np.uint64)
        ld = per_warp(rstride(st, idx), n, nw).astype(np.uint64) if rstride else np.full(nw, default_ld, np.uint64)
        off = (r_[None].astype(np.uint64) * ld[:, None, None] + c_[None].astype(np.uint64)) * np.uint64(esize)
        return (base[:, None, None] + off).reshape(n, -1)  # (threads, elements)

    def wmma_load(st, idx):
        tt = warp_threads(st, idx, what)
        nw, n = tt.shape[0], tt.size
        a = addresses(st, idx, n, nw)
        bits = np.stack([gather(st, idx, space, a[:, e], dt, 1, what)[0] for e in range(a.shape[1])], axis=1)
        write_elems(rw, st, idx, bits.astype(np.uint64), typ)

    def wmma_store(st, idx):
        tt = warp_threads(st, idx, what)
        nw, n = tt.shape[0], tt.size
        a = addresses(st, idx, n, nw)
        bits = read_elems(rw, st, idx, n, typ)
        for e in range(a.shape[1]):
            scatter(st, idx, space, a[:, e], dt, [bits[:, e].astype(dt)], what)

    return wmma_load if load else wmma_store


def _compile_wmma_load_subbyte(ctx: Ctx, ins: Instr, operands, r_, c_, typ: str, writers):
    """wmma.load of s4/u4/b1 fragments: each register holds 32 consecutive bits of one row (A, row-major) or column
    (B, column-major), loaded as one 32-bit word."""
    from gpushim.ptx.ops_mem import gather

    ra, rstride, default_ld, space = operands
    eb = ELEM_BITS[typ]
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
        tt = warp_threads(st, idx, what)
        nw, n = tt.shape[0], tt.size
        base = per_warp(ra(st, idx), n, nw).astype(np.uint64)
        ld = per_warp(rstride(st, idx), n, nw).astype(np.uint64) if rstride else np.full(nw, default_ld, np.uint64)
        if ((ld * np.uint64(eb)) % np.uint64(32)).any():
            raise CudaError(Err.MISALIGNED_ADDRESS, f"{what}: a stride of {int(ld[0])} .{typ} elements is not a "
                            "multiple of 32 bits")  # fmt: skip
        bits = rf[None] * ld[:, None, None] + cf[None]
        addr = (base[:, None, None] + bits * np.uint64(eb) // np.uint64(8)).reshape(n, -1)
        for j, w in enumerate(writers):
            w(st, idx, gather(st, idx, space, addr[:, j], u32, 1, what)[0])

    return wmma_load_subbyte


def _compile_wmma_mma(ctx: Ctx, ins: Instr, parts: list[str]):
    types = [p for p in parts if p in MMA_TYPES]
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
    pairs = ({"s8", "u8"}, {"s4", "u4"}, set(FP8))
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
          "e5m2": ("f16", "f32"), **{t: ("s32",) for t in INT_TYPES}}  # fmt: skip
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
    ra = [ctx.reader(r, reg_type(atyp)) for r in a]
    rb = [ctx.reader(r, reg_type(btyp)) for r in b]
    rc = [ctx.reader(r, reg_type(ctyp)) for r in c]
    wd = [ctx.writer(r) for r in d]
    what = f"{ins.op} (line {ins.line})"

    def frag(readers, st, idx, n, nw, typ, lay, nr, ncol):
        vals = decode(read_elems(readers, st, idx, n, typ), typ).reshape(nw, 32, -1)
        m = np.zeros((nw, nq, nr, ncol), vals.dtype)
        m[:, lay[0], lay[1], lay[2]] = vals
        return m.reshape(nw * nq, nr, ncol)

    def mma(st, idx):
        tt = warp_threads(st, idx, what)
        nw, n = tt.shape[0], tt.size
        am = frag(ra, st, idx, n, nw, atyp, la, ma, ka)
        bm = frag(rb, st, idx, n, nw, btyp, lb, kb, nb)
        cm = frag(rc, st, idx, n, nw, ctyp, lc, mc, nc)
        dm = matmul_acc(am, bm, cm, atyp, sat, rnd, bop).reshape(nw, nq, mc, nc)
        out = dm[:, ld[0], ld[1], ld[2]].reshape(n, -1)
        write_elems(wd, st, idx, encode(out, dtyp, sat), dtyp)

    return mma


# -- mma.sync --------------------------------------------------------------------------------------------------------
_MMA_SHAPES = {
    "f16": ("m16n8k16", "m16n8k8", "m8n8k4"), "bf16": ("m16n8k16", "m16n8k8"), "tf32": ("m16n8k8", "m16n8k4"),
    "f64": ("m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16"), "s8": ("m16n8k32", "m16n8k16", "m8n8k16"),
    "u8": ("m16n8k32", "m16n8k16", "m8n8k16"), "e4m3": ("m16n8k32", "m16n8k16"), "e5m2": ("m16n8k32", "m16n8k16"),
    "s4": ("m8n8k32", "m16n8k32", "m16n8k64"), "u4": ("m8n8k32", "m16n8k32", "m16n8k64"),
    "b1": ("m8n8k128", "m16n8k128", "m16n8k256"),
}  # fmt: skip


def compile_mma(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    if "sp" in parts or "sp::ordered_metadata" in parts:
        raise ctx.fail(f"{ins.op} (sparse mma)")
    if "sync" not in parts or "aligned" not in parts:
        raise ctx.fail(f"{ins.op}")
    types = [p for p in parts if p in MMA_TYPES]
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
    m, n, k = dims(shape)
    regs = [_regs(ctx, x, ins.op) for x in ins.args[:4]]
    d, a, b, c = regs
    if volta:
        la, lb = volta_layout("a", lay[0]), volta_layout("b", lay[1])
        lc, ld = (volta_layout("c" if t == "f16" else "f", "") for t in (ctyp, dtyp))
    else:
        la, lb = mma_layout(shape, atyp, "a"), mma_layout(shape, btyp, "b")
        lc = ld = mma_layout(shape, atyp, "c")
    for name, rr, lo, typ in (("A", a, la, atyp), ("B", b, lb, btyp), ("C", c, lc, ctyp), ("D", d, ld, dtyp)):
        if len(rr) * per_reg(typ) != lo[-1].shape[1]:
            raise ctx.error(f"{ins.op}: the {name} fragment needs {lo[-1].shape[1] // per_reg(typ)} registers, "
                            f"found {len(rr)}")  # fmt: skip
    frags = ((m, k, la), (k, n, lb), (m, n, lc), (m, n, ld))
    return _mma_closure(ctx, ins, (a, b, c, d), frags, (atyp, btyp, ctyp, dtyp), sat, rnd, bop)


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
