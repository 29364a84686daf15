"""atom and red on global, shared and generic addresses.

Threads act in thread order. Integer atom.add returns the right old values through a sort and a segmented
scan; the other operations run in rounds: round r applies the r-th thread of every address, so each round
touches distinct addresses and is one vectorised gather/compute/scatter.
"""

from __future__ import annotations

import numpy as np

from gpushim.ptx.memspaces import generic_masks, locate, split_generic
from gpushim.ptx.nodes import Instr
from gpushim.ptx.operands import Ctx
from gpushim.ptx.ops_mem import SPACE_NAMES
from gpushim.ptx.types import TYPES, U, np_type, type_size

_OPS = ("add", "min", "max", "inc", "dec", "exch", "cas", "and", "or", "xor")


def _apply(op: str, dt: np.dtype):
    if op == "add":
        return lambda cur, b, c: (cur + b).astype(dt)
    if op == "min":
        return lambda cur, b, c: np.minimum(cur, b)
    if op == "max":
        return lambda cur, b, c: np.maximum(cur, b)
    if op == "inc":
        return lambda cur, b, c: np.where(cur >= b, dt.type(0), cur + dt.type(1)).astype(dt)
    if op == "dec":
        return lambda cur, b, c: np.where((cur == 0) | (cur > b), b, cur - dt.type(1)).astype(dt)
    if op == "exch":
        return lambda cur, b, c: b
    if op == "cas":
        return lambda cur, b, c: np.where(cur == b, c, cur).astype(dt)
    if op == "and":
        return lambda cur, b, c: cur & b
    if op == "or":
        return lambda cur, b, c: cur | b
    return lambda cur, b, c: cur ^ b


def _add_ftz(cur, b, c):
    from gpushim.ptx.ops_float import ftz

    return ftz(ftz(cur) + ftz(b))


def _half_add(typ: str):
    """atom/red.add.noftz on .f16, .bf16 and their x2 packs (raw bits): each lane rounded to nearest even,
    subnormals kept (PTX ISA, atom: .noftz). Adding in f32 and rounding once is exact enough: f32 carries more
    than twice the bits of f16/bf16 plus two, so the double rounding cannot differ."""
    from gpushim.ptx.ops_half import lanes, pack

    dt = np_type(typ)
    return lambda cur, b, c: np.asarray(pack([x + y for x, y in zip(lanes(cur, typ), lanes(b, typ), strict=True)],
                                             typ)).astype(dt)


def _rounds(arr, e, b, c, f, want_old: bool):
    n = e.size
    old = np.empty(n, arr.dtype) if want_old else None
    order = np.argsort(e, kind="stable")
    es = e[order]
    new_run = np.empty(n, bool)
    new_run[0] = True
    np.not_equal(es[1:], es[:-1], out=new_run[1:])
    if new_run.all():
        cur = arr[e]
        arr[e] = f(cur, b, c)
        if want_old:
            old[:] = cur
        return old
    pos = np.arange(n)
    run_start = np.maximum.accumulate(np.where(new_run, pos, 0))
    rank_sorted = pos - run_start
    by_rank = np.argsort(rank_sorted, kind="stable")
    order2 = order[by_rank]
    counts = np.bincount(rank_sorted)
    off = 0
    for cnt in counts:
        sel = order2[off : off + cnt]
        off += cnt
        ei = e[sel]
        cur = arr[ei]
        arr[ei] = f(cur, b[sel] if b.ndim else b, c[sel] if c is not None and c.ndim else c)
        if want_old:
            old[sel] = cur
    return old


def _int_add(arr, e, b, want_old: bool):
    n = e.size
    dt = arr.dtype
    order = np.argsort(e, kind="stable")
    es = e[order]
    bs = np.asarray(np.broadcast_to(b, (n,))[order]).view(U[dt.itemsize]).astype(np.uint64)
    cs = np.cumsum(bs, dtype=np.uint64)
    new_run = np.empty(n, bool)
    new_run[0] = True
    np.not_equal(es[1:], es[:-1], out=new_run[1:])
    starts = np.flatnonzero(new_run)
    excl_start = cs[starts] - bs[starts]
    run_id = np.cumsum(new_run) - 1
    ends = np.concatenate((starts[1:], [n])) - 1
    ue = es[starts]
    before = arr[ue].view(U[dt.itemsize]).astype(np.uint64)
    total = cs[ends] - excl_start
    ut = U[dt.itemsize]
    arr.view(ut)[ue] = (before + total).astype(ut)
    if not want_old:
        return None
    old_sorted = (before[run_id] + (cs - bs - excl_start[run_id])).astype(ut)
    old = np.empty(n, ut)
    old[order] = old_sorted
    return old.view(dt)


def compile_atom(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    is_red = parts[0] == "red"
    space = None
    op = None
    typ = None
    for p in parts[1:]:
        if p in SPACE_NAMES:
            space = SPACE_NAMES[p]
        elif p == "shared::cluster":
            raise ctx.fail("atomics on distributed shared memory")
        elif p in _OPS and op is None:
            op = p
        elif p in TYPES:
            typ = p
        elif p in ("v2", "v4", "v8"):
            raise ctx.fail(f"vector atomics [{ins.op}]")
    if op is None or typ is None:
        raise ctx.error(f"{ins.op}: missing operation or type")
    half = typ in ("f16", "bf16", "f16x2", "bf16x2")
    if typ == "b128" or (half and op != "add"):
        raise ctx.fail(f"{ins.op} ({typ} atomics)")
    if space not in (None, "global", "shared"):
        raise ctx.error(f"{ins.op}: atomics on .{space}")
    if is_red:
        addr_op, srcs = ins.args[0], ins.args[1:]
        wd = None
    else:
        wd = ctx.writer(ins.args[0])
        addr_op, srcs = ins.args[1], ins.args[2:]
    _, ra = ctx.address(addr_op)
    from gpushim.ptx.ops_mem import _resolve_space

    space = _resolve_space(ctx, space, addr_op)
    dt = np_type(typ)
    size = type_size(typ)
    rb = ctx.reader(srcs[0], typ)
    rc = ctx.reader(srcs[1], typ) if op == "cas" else None
    f = _half_add(typ) if half else _apply(op, dt)
    what = f"{ins.op} (line {ins.line})"
    int_add = op == "add" and dt.kind in "iu" and not half  # half types are held as raw bits
    ftz_global = op == "add" and typ == "f32"

    def run(st, idx, sp, a, b, c, n):
        views, e = locate(st, idx, sp, a, size, size, what)
        arr = views[size].view(dt)
        e = np.broadcast_to(e, (n,)) if np.ndim(e) == 0 else e
        if int_add:
            return _int_add(arr, e, b, wd is not None)
        if half:
            return _rounds(arr, e, np.broadcast_to(b, (n,)), None, f, wd is not None)
        if ftz_global and sp in ("global", "const"):
            # PTX ISA: atom.add.f32 on global memory flushes subnormal inputs and results to zero (shared does not)
            return _rounds(arr, e, np.broadcast_to(b, (n,)), None, _add_ftz, wd is not None)
        if is_red and op == "add":
            np.add.at(arr, e, np.broadcast_to(b, (n,)))
            return None
        bb = np.broadcast_to(b, (n,))
        cc = np.broadcast_to(c, (n,)) if c is not None else None
        return _rounds(arr, e, bb, cc, f, wd is not None)

    def atom(st, idx):
        n = st.n if idx is None else idx.size
        a = ra(st, idx)
        b = rb(st, idx)
        c = rc(st, idx) if rc is not None else None
        sp = space
        if sp is None:
            sp, aa = split_generic(a)
            if sp is None:
                old = np.empty(n, dt)
                for sp2, m, aa2 in generic_masks(a):
                    sub = np.flatnonzero(m) if idx is None else idx[m]
                    bm = b[m] if np.ndim(b) else b
                    cm = (c[m] if np.ndim(c) else c) if c is not None else None
                    r = run(st, sub, sp2, aa2, bm, cm, int(m.sum()))
                    if r is not None:
                        old[m] = r
                if wd is not None:
                    wd(st, idx, old)
                return
            a = aa
        old = run(st, idx, sp, a, b, c, n)
        if wd is not None:
            wd(st, idx, old)

    return atom
