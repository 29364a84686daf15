"""Block barriers (bar/barrier .sync/.red) and warp-level instructions (shfl, vote, match, redux, activemask,
bar.warp.sync). The scheduler calls them with every thread of the warps (blocks for barriers) that arrived."""

from __future__ import annotations

import numpy as np

from gpushim.ptx.nodes import Instr, PredPair
from gpushim.ptx.operands import Ctx
from gpushim.ptx.types import np_type


def _segments(st, idx):
    """(warp of each running thread, start of each warp's run, threads per run); idx is sorted so warps are."""
    w = st.warp if idx is None else st.warp[idx]
    if w.size == 0:
        return w, np.zeros(0, np.int64), np.zeros(0, np.int64)
    brk = np.flatnonzero(w[1:] != w[:-1]) + 1
    starts = np.concatenate(([0], brk))
    counts = np.diff(np.concatenate((starts, [w.size])))
    return w, starts, counts


def _groups(st, idx, rmask):
    """Runs of the running threads that take part in one warp-synchronous operation: threads of one warp with
    the same member mask (labeled partitions run one instruction with several masks at once). Returns
    (perm, starts, counts): perm orders the running threads so that each run is contiguous (None: already in
    order, one run per warp)."""
    w, starts, counts = _segments(st, idx)
    if rmask is None:
        return None, starts, counts
    m = rmask(st, idx)
    if m.__class__ is not np.ndarray or m.size == 0 or (m == m.flat[0]).all():
        return None, starts, counts
    key = (w.astype(np.int64) << 32) | m.astype(np.int64)
    perm = np.argsort(key, kind="stable")
    k = key[perm]
    starts = np.concatenate(([0], np.flatnonzero(k[1:] != k[:-1]) + 1))
    counts = np.diff(np.concatenate((starts, [k.size])))
    return perm, starts, counts


def _spread(r, perm, counts):
    """Per-run results r back to the running threads in their order."""
    out = np.repeat(r, counts)
    if perm is None:
        return out
    res = np.empty_like(out)
    res[perm] = out
    return res


def _take(v, perm):
    return v if perm is None else v[perm]


def _member_mask(ctx: Ctx, ins: Instr, pos: int):
    """Reader of the membermask operand at position pos, if the instruction has one."""
    return ctx.reader(ins.args[pos], "u32") if len(ins.args) > pos else None


def _per_thread(st, idx, v):
    return v if idx is None or v.__class__ is not np.ndarray else v[idx]


def compile_bar(ctx: Ctx, ins: Instr):
    """bar{.sync,.arrive,.red} / barrier{...}: a BarOp for the scheduler's barrier logic."""
    from gpushim.ptx.barriers import BarOp

    parts = ins.op.split(".")
    args = list(ins.args)
    if "red" in parts:
        op = next(p for p in parts if p in ("popc", "and", "or"))
        w = ctx.writer(args[0])
        rc = ctx.reader(args[-1], "pred")
        rid = ctx.reader(args[1], "u32")
        rcount = ctx.reader(args[2], "u32") if len(args) == 4 else None

        def bar_red(st, idx):
            c = np.broadcast_to(rc(st, idx), (st.n if idx is None else idx.size,))
            blk = st.blk if idx is None else st.blk[idx]
            nb = int(st.blk[-1]) + 1
            yes = np.bincount(blk, weights=c.astype(np.float64), minlength=nb)
            tot = np.bincount(blk, minlength=nb)
            if op == "popc":
                w(st, idx, yes.astype(np.uint32)[blk])
            elif op == "and":
                w(st, idx, (yes == tot)[blk])
            else:
                w(st, idx, (yes > 0)[blk])

        return BarOp(rid, rcount, bar_red, False)
    rid = ctx.reader(args[0], "u32") if args else (lambda st, idx: np.uint32(0))
    rcount = ctx.reader(args[1], "u32") if len(args) > 1 else None
    return BarOp(rid, rcount, None, "arrive" in parts)


def compile_warp_sync(ctx: Ctx, ins: Instr):
    return lambda st, idx: None


def compile_shfl(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    mode = next((p for p in parts if p in ("up", "down", "bfly", "idx")), None)
    if mode is None:
        raise ctx.error(f"{ins.op}: no shuffle mode")
    dst = ins.args[0]
    if isinstance(dst, PredPair):
        wd = ctx.writer(dst.first) if dst.first is not None else (lambda st, idx, v: None)
        wp = ctx.writer(dst.second) if dst.second is not None else None
    else:
        wd, wp = ctx.writer(dst), None
    ra = ctx.reader(ins.args[1], "b32")
    rb = ctx.reader(ins.args[2], "u32")
    rc = ctx.reader(ins.args[3], "u32")

    def shfl(st, idx):
        lane = st.sp["%laneid"] if idx is None else st.sp["%laneid"][idx]
        lane = lane.astype(np.int64)
        b = np.asarray(rb(st, idx)).astype(np.int64) & 31
        c = np.asarray(rc(st, idx)).astype(np.int64)
        segmask = (c >> 8) & 0x1F
        cval = c & 0x1F
        max_lane = (lane & segmask) | (cval & ~segmask)
        min_lane = lane & segmask
        if mode == "up":
            j = lane - b
            pval = j >= max_lane
        elif mode == "down":
            j = lane + b
            pval = j <= max_lane
        elif mode == "bfly":
            j = lane ^ b
            pval = j <= max_lane
        else:
            j = min_lane | (b & ~segmask)
            pval = j <= max_lane
        j = np.where(pval, j, lane)
        t = st.thread if idx is None else idx
        lin = t % st.geo.tpb
        src_lin = lin - lane + j
        ok = src_lin < st.geo.tpb
        src = np.where(ok, t - lane + j, t)
        full = ra(st, None)
        val = full[src] if full.__class__ is np.ndarray else full
        wd(st, idx, val)
        if wp is not None:
            wp(st, idx, pval & ok)

    return shfl


def compile_vote(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    mode = next((p for p in parts if p in ("all", "any", "uni", "ballot")), None)
    w = ctx.writer(ins.args[0])
    ra = ctx.reader(ins.args[1], "pred")
    rmask = _member_mask(ctx, ins, 2)

    def vote(st, idx):
        n = st.n if idx is None else idx.size
        p = np.broadcast_to(ra(st, idx), (n,))
        perm, starts, counts = _groups(st, idx, rmask)
        if mode == "ballot":
            lane = st.sp["%laneid"] if idx is None else st.sp["%laneid"][idx]
            bits = np.where(p, np.left_shift(np.uint64(1), lane.astype(np.uint64)), np.uint64(0))
            r = np.add.reduceat(_take(bits, perm), starts) if n else bits
            w(st, idx, _spread(r.astype(np.uint32), perm, counts))
            return
        yes = np.add.reduceat(_take(p, perm).astype(np.int64), starts) if n else np.zeros(0, np.int64)
        if mode == "all":
            r = yes == counts
        elif mode == "any":
            r = yes > 0
        else:
            r = (yes == 0) | (yes == counts)
        w(st, idx, _spread(r, perm, counts))

    return vote


def compile_activemask(ctx: Ctx, ins: Instr):
    w = ctx.writer(ins.args[0])

    def activemask(st, idx):
        n = st.n if idx is None else idx.size
        _, starts, counts = _segments(st, idx)
        lane = st.sp["%laneid"] if idx is None else st.sp["%laneid"][idx]
        bits = np.left_shift(np.uint64(1), lane.astype(np.uint64))
        r = np.add.reduceat(bits, starts) if n else bits
        w(st, idx, np.repeat(r.astype(np.uint32), counts))

    return activemask


def compile_match(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    mode = "all" if "all" in parts else "any"
    typ = parts[-1]
    dst = ins.args[0]
    if isinstance(dst, PredPair):
        wd = ctx.writer(dst.first) if dst.first is not None else (lambda st, idx, v: None)
        wp = ctx.writer(dst.second) if dst.second is not None else None
    else:
        wd, wp = ctx.writer(dst), None
    ra = ctx.reader(ins.args[1], typ)
    rmask = _member_mask(ctx, ins, 2)

    def match(st, idx):
        n = st.n if idx is None else idx.size
        t = st.thread if idx is None else idx
        lane = (st.sp["%laneid"] if idx is None else st.sp["%laneid"][idx]).astype(np.int64)
        v = np.broadcast_to(ra(st, idx), (n,))
        part = np.zeros(st.n, bool)
        part[t] = True
        full = np.zeros(st.n, v.dtype)
        full[t] = v
        lin = t % st.geo.tpb
        if mode == "any":
            # only lanes of the thread's member mask count (threads of other labeled groups may run it too)
            mask = np.broadcast_to(rmask(st, idx), (n,)).astype(np.uint64) if rmask else np.uint64(0xFFFFFFFF)
            acc = np.zeros(n, np.uint64)
            for k in range(32):
                src_lin = lin - lane + k
                ok = src_lin < st.geo.tpb
                src = np.where(ok, t - lane + k, t)
                hit = ok & part[src] & (full[src] == v)
                acc |= np.where(hit, np.uint64(1 << k), np.uint64(0))
            wd(st, idx, (acc & mask).astype(np.uint32))
            return
        perm, starts, counts = _groups(st, idx, rmask)
        if n == 0:
            return
        vs = _take(v, perm)
        same = _spread(np.minimum.reduceat(vs, starts) == np.maximum.reduceat(vs, starts), perm, counts)
        bits = np.left_shift(np.uint64(1), lane.astype(np.uint64))
        members = _spread(np.add.reduceat(_take(bits, perm), starts), perm, counts).astype(np.uint32)
        wd(st, idx, np.where(same, members, np.uint32(0)))
        if wp is not None:
            wp(st, idx, same)

    return match


def compile_redux(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    op = next((p for p in parts if p in ("add", "min", "max", "and", "or", "xor")), None)
    typ = parts[-1]
    if typ not in ("u32", "s32", "b32"):
        raise ctx.fail(f"{ins.op}")
    w = ctx.writer(ins.args[0])
    ra = ctx.reader(ins.args[1], typ)
    rmask = _member_mask(ctx, ins, 2)
    dt = np_type(typ)
    uf = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
          "xor": np.bitwise_xor}[op]  # fmt: skip

    def redux(st, idx):
        n = st.n if idx is None else idx.size
        if n == 0:
            return
        perm, starts, counts = _groups(st, idx, rmask)
        v = _take(np.broadcast_to(ra(st, idx), (n,)), perm)
        if op == "add":
            r = (np.add.reduceat(v.astype(np.int64), starts) & 0xFFFFFFFF).astype(np.uint32).view(dt)
        else:
            r = uf.reduceat(v, starts)
        w(st, idx, _spread(r, perm, counts))

    return redux


def compile_elect(ctx: Ctx, ins: Instr):
    """elect.sync d|p, membermask: the lowest participating lane of each warp is the leader."""
    dst = ins.args[0]
    if isinstance(dst, PredPair):
        wd = ctx.writer(dst.first) if dst.first is not None else (lambda st, idx, v: None)
        wp = ctx.writer(dst.second) if dst.second is not None else None
    else:
        wd, wp = ctx.writer(dst), None
    rmask = _member_mask(ctx, ins, 1)

    def elect(st, idx):
        n = st.n if idx is None else idx.size
        if n == 0:
            return
        perm, starts, counts = _groups(st, idx, rmask)
        lane = st.sp["%laneid"] if idx is None else st.sp["%laneid"][idx]
        leader = _spread(np.minimum.reduceat(_take(lane, perm), starts), perm, counts)
        wd(st, idx, leader.astype(np.uint32))
        if wp is not None:
            wp(st, idx, lane == leader)

    return elect
