"""ldmatrix, stmatrix and movmatrix: warp-collective moves of 8x8 b16 matrices between shared memory and the
fragment layout of mma.sync's 16-bit operands (PTX ISA, "Warp-level matrix load instruction: ldmatrix",
"stmatrix", "movmatrix"): lanes 8j..8j+7 give the row addresses of matrix j; lane L holds row L/4, columns
2(L%4) and 2(L%4)+1 of each matrix (transposed with .trans)."""

from __future__ import annotations

import numpy as np

from gpushim.ptx.mma_frag import frag_pos, space_of, warp_threads
from gpushim.ptx.nodes import Instr, Vec
from gpushim.ptx.operands import Ctx


def _matrix_parts(ctx: Ctx, ins: Instr, parts: list[str]) -> tuple[int, bool]:
    if "m8n8" not in parts or "b16" not in parts:
        raise ctx.fail(f"{ins.op} (only .m8n8 .b16 matrices)")
    nmat = next((int(p[1:]) for p in parts if p in ("x1", "x2", "x4")), None)
    if nmat is None:
        raise ctx.error(f"{ins.op}: no .x1/.x2/.x4")
    return nmat, "trans" in parts


def compile_ldmatrix(ctx: Ctx, ins: Instr):
    from gpushim.ptx.ops_mem import gather

    parts = ins.op.split(".")
    nmat, trans = _matrix_parts(ctx, ins, parts)
    dst, addr = ins.args[0], ins.args[1]
    regs = dst.items if isinstance(dst, Vec) else (dst,)
    if len(regs) != nmat:
        raise ctx.error(f"{ins.op}: {len(regs)} destination registers for .x{nmat}")
    ws = [ctx.writer(r) for r in regs]
    space = space_of(ctx, parts, addr)
    _, ra = ctx.address(addr)
    what = f"{ins.op} (line {ins.line})"
    pr, pc = frag_pos(trans)
    u16 = np.dtype(np.uint16)

    def ldmatrix(st, idx):
        tt = warp_threads(st, idx, what)
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
    space = space_of(ctx, parts, addr)
    _, ra = ctx.address(addr)
    what = f"{ins.op} (line {ins.line})"
    pr, pc = frag_pos(trans)
    u16 = np.dtype(np.uint16)

    def stmatrix(st, idx):
        tt = warp_threads(st, idx, what)
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
    pr, pc = frag_pos(False)

    def movmatrix(st, idx):
        tt = warp_threads(st, idx, what)
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
