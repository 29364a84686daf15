"""ld, ldu, st, cvta, isspacep, prefetch."""

from __future__ import annotations

import numpy as np

from gpushim.ptx.memspaces import _SHIFT, generic_masks, locate, locate_reg, split_generic
from gpushim.ptx.nodes import Instr, Reg, Sym, Vec
from gpushim.ptx.operands import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, WINDOW_SIZE, Ctx
from gpushim.ptx.types import TYPES, U, np_type
from gpushim.ptx.values import conv, ndarray

SPACE_NAMES = {"global": "global", "shared": "shared", "shared::cta": "shared", "local": "local", "const": "const",
               "param": "param", "param::entry": "param", "param::func": "param"}  # fmt: skip
_WINDOW_OF = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "param": PARAM_WINDOW, "kparam": PARAM_WINDOW}
_J = [np.int64(j) for j in range(16)]  # element offsets of vector accesses as numpy scalars (faster operands)
UNSUPPORTED_SPACES = {"shared::cluster": "distributed shared memory (.shared::cluster)"}


def parse_mem_op(ctx: Ctx, ins: Instr):
    """(space or None for generic, vector width, type)"""
    parts = ins.op.split(".")
    space = None
    vec = 1
    typ = None
    for p in parts[1:]:
        if p in SPACE_NAMES:
            space = SPACE_NAMES[p]
        elif p in UNSUPPORTED_SPACES:
            raise ctx.fail(UNSUPPORTED_SPACES[p])
        elif p in ("v2", "v4", "v8"):
            vec = int(p[1:])
        elif p in TYPES:
            typ = p
    if typ is None:
        raise ctx.error(f"{ins.op}: no type")
    return space, vec, typ


def _resolve_space(ctx: Ctx, space: str | None, addr_op) -> str | None:
    base = addr_op.base
    if isinstance(base, Sym):
        s = ctx.symbol_space(base.name)
        if space is None:
            return {"global": "global", "const": "global"}.get(s, s)  # a generic access by name
        if space == "param":
            return s if s in ("kparam", "local") else "kparam"
        return space
    if space == "param":  # a register address: the kernel's parameters, or a device function's frame slots
        return "local" if ctx.ins is not None and ctx.ins.callee else "kparam"
    return space


def gather(st, idx, space, a, dt: np.dtype, vec: int, what: str, loc=None) -> list:
    size = dt.itemsize
    if loc is not None:
        views, e = loc
    else:
        if space is None:
            sp, aa = split_generic(a)
            if sp is None:
                return _gather_mixed(st, idx, a, dt, vec, what)
            space, a = sp, aa
        views, e = locate(st, idx, space, a, size, size * vec, what)
    v = views[size]
    arr = e.__class__ is np.ndarray
    if vec == 1:
        r = v.take(e, mode="clip") if arr else v[e]
        return [r if r.dtype is dt else r.view(dt)]
    out = []
    for j in range(vec):
        r = v.take(e + _J[j], mode="clip") if arr else v[e + j]
        out.append(r if r.dtype is dt else r.view(dt))
    return out


def _gather_mixed(st, idx, a, dt, vec, what):
    n = a.shape[0]
    outs = [np.empty(n, dt) for _ in range(vec)]
    for space, m, aa in generic_masks(a):
        sub = np.flatnonzero(m) if idx is None else idx[m]
        vals = gather(st, sub, space, aa, dt, vec, what)
        for o, v in zip(outs, vals, strict=True):
            o[m] = v
    return outs


def scatter(st, idx, space, a, dt: np.dtype, values: list, what: str, loc=None) -> None:
    size = dt.itemsize
    vec = len(values)
    if loc is not None:
        _store(loc[0][size], loc[1], values, size)
        return
    if space is None:
        sp, aa = split_generic(a)
        if sp is None:
            for space2, m, aa2 in generic_masks(a):
                sub = np.flatnonzero(m) if idx is None else idx[m]
                vals = [v[m] if v.__class__ is ndarray else v for v in values]
                scatter(st, sub, space2, aa2, dt, vals, what)
            return
        space, a = sp, aa
    if space == "kparam":
        raise st.error_for(what, "store to kernel parameter space")
    views, e = locate(st, idx, space, a, size, size * vec, what)
    _store(views[size], e, values, size)


def _store(v, e, values, size):
    ut = U[size]
    for j, val in enumerate(values):
        if val.dtype is not ut:
            val = conv(val, ut)
        ej = e if j == 0 else e + _J[j]
        if ej.__class__ is not ndarray and val.__class__ is ndarray:
            val = val[-1]  # every thread stores to one address: the last one wins
        v[ej] = val


def _fast_reg(ctx: Ctx, addr_op, space):
    """(register index, offset) of a `[%reg + off]` address in an explicit space, else None."""
    if space not in ("global", "const", "shared", "local") or not isinstance(addr_op.base, Reg):
        return None
    k = ctx.reg_index.get(addr_op.base.name)
    if k is None or ctx.reg_dtype[k].itemsize not in (4, 8):
        return None
    return k, addr_op.offset


def compile_ld(ctx: Ctx, ins: Instr):
    space, vec, typ = parse_mem_op(ctx, ins)
    dst, addr_op = ins.args[0], ins.args[1]
    space = _resolve_space(ctx, space, addr_op)
    _, ra = ctx.address(addr_op)
    dt = np_type(typ)
    what = f"{ins.op} (line {ins.line})"
    if isinstance(dst, Vec):
        ws = [ctx.writer(d) for d in dst.items]
        if len(ws) != vec:
            raise ctx.error(f"{ins.op}: {len(ws)} destinations for a .v{vec} load")
    else:
        if vec != 1:
            raise ctx.error(f"{ins.op}: vector load into a scalar")
        ws = [ctx.writer(dst)]
    if space in ("global", "const") and isinstance(addr_op.base, Sym):
        # uniform load from a named variable: a scalar result
        pass
    fast = _fast_reg(ctx, addr_op, space)
    size = dt.itemsize
    if len(ws) == 1:
        w0 = ws[0]
        if space == "kparam" and isinstance(addr_op.base, Sym) and ctx.symbol_space(addr_op.base.name) == "kparam":
            ca = int(ra(None, None))  # a kernel parameter by name: a constant offset in the parameter buffer
            if not ca & (size - 1):
                ce = ca >> _SHIFT[size]

                def ldp(st, idx):
                    if ca + size > st.par_size:  # past the parameters passed: the checked path raises
                        w0(st, idx, gather(st, idx, space, ra(st, idx), dt, 1, what)[0])
                        return
                    r = st.parv[size][ce]
                    w0(st, idx, r if r.dtype is dt else r.view(dt))

                return ldp
        if fast is not None:
            k, off = fast

            def ld1f(st, idx):
                loc = locate_reg(st, idx, space, k, off, size, size, what)
                if loc is None:
                    w0(st, idx, gather(st, idx, space, ra(st, idx), dt, 1, what)[0])
                else:
                    e = loc[1]
                    # in bounds (checked): plain indexing for a few threads, take (faster on many)
                    r = (
                        loc[0][size].take(e, mode="clip")
                        if e.__class__ is np.ndarray and e.size > 256
                        else loc[0][size][e]
                    )
                    w0(st, idx, r if r.dtype is dt else r.view(dt))

            return ld1f

        def ld1(st, idx):
            w0(st, idx, gather(st, idx, space, ra(st, idx), dt, 1, what)[0])

        return ld1

    def ldv(st, idx):
        loc = locate_reg(st, idx, space, fast[0], fast[1], size, size * vec, what) if fast is not None else None
        vals = gather(st, idx, space, None if loc is not None else ra(st, idx), dt, vec, what, loc)
        for w, v in zip(ws, vals, strict=True):
            w(st, idx, v)

    return ldv


def compile_st(ctx: Ctx, ins: Instr):
    space, vec, typ = parse_mem_op(ctx, ins)
    addr_op, src = ins.args[0], ins.args[1]
    space = _resolve_space(ctx, space, addr_op)
    if space == "kparam":
        raise ctx.error(f"{ins.op}: store to a kernel parameter")
    _, ra = ctx.address(addr_op)
    dt = np_type(typ)
    what = f"{ins.op} (line {ins.line})"
    items = src.items if isinstance(src, Vec) else (src,)
    if len(items) != vec:
        raise ctx.error(f"{ins.op}: {len(items)} sources for .v{vec}")
    rs = [ctx.reader(s, typ) for s in items]
    fast = _fast_reg(ctx, addr_op, space)
    size = dt.itemsize
    if vec == 1 and fast is not None:
        (r0,) = rs
        k, off = fast
        ut = U[size]

        def st1f(st, idx):
            loc = locate_reg(st, idx, space, k, off, size, size, what)
            if loc is None:
                scatter(st, idx, space, ra(st, idx), dt, [r0(st, idx)], what)
                return
            val = r0(st, idx)
            if val.dtype is not ut:
                val = conv(val, ut)
            e = loc[1]
            if e.__class__ is not ndarray and val.__class__ is ndarray:
                val = val[-1]  # every thread stores to one address: the last one wins
            loc[0][size][e] = val

        return st1f

    def st_(st, idx):
        loc = locate_reg(st, idx, space, fast[0], fast[1], size, size * vec, what) if fast is not None else None
        scatter(st, idx, space, None if loc is not None else ra(st, idx), dt, [r(st, idx) for r in rs], what, loc)

    return st_


def compile_cvta(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    to = "to" in parts
    space = next((SPACE_NAMES[p] for p in parts[1:] if p in SPACE_NAMES), None)
    if space is None:
        raise ctx.error(f"{ins.op}: no state space")
    typ = parts[-1]
    w = ctx.writer(ins.args[0])
    src = ins.args[1]
    if isinstance(src, Sym):
        r = ctx.symbol_address(src.name, src.offset)
        if ctx.symbol_space(src.name) == "kparam":
            space = "param"
    else:
        r = ctx.reader(src, typ)
    if space in ("global", "const"):
        return lambda st, idx: w(st, idx, r(st, idx))
    base = _WINDOW_OF[space]
    if typ == "u32":  # 32-bit generic addresses are not a thing in 64-bit PTX; keep the offset
        return lambda st, idx: w(st, idx, r(st, idx))
    c = np.uint64(base)
    if to:
        return lambda st, idx: w(st, idx, r(st, idx) - c)
    return lambda st, idx: w(st, idx, r(st, idx) + c)


def compile_isspacep(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    space = SPACE_NAMES.get(parts[1], parts[1])
    w = ctx.writer(ins.args[0])
    r = ctx.reader(ins.args[1], "u64")
    if space in ("shared", "local", "param"):
        lo, hi = np.uint64(_WINDOW_OF[space]), np.uint64(_WINDOW_OF[space] + WINDOW_SIZE)
        return lambda st, idx: w(st, idx, (r(st, idx) >= lo) & (r(st, idx) < hi))
    lo, hi = np.uint64(SHARED_WINDOW), np.uint64(PARAM_WINDOW + WINDOW_SIZE)
    return lambda st, idx: w(st, idx, (r(st, idx) < lo) | (r(st, idx) >= hi))


def compile_nop(ctx: Ctx, ins: Instr):
    return None


def compile_cp_async(ctx: Ctx, ins: Instr):
    """cp.async.{ca,cg}.shared.global [dst], [src], cp-size{, src-size}: done at once (reading the destination
    before cp.async.wait_* is undefined, so an eager copy is one valid execution); commit/wait are no-ops."""
    parts = ins.op.split(".")
    if len(parts) < 3 or parts[1] != "async":
        raise ctx.fail(f"{ins.op}")
    if parts[2] in ("commit_group", "wait_group", "wait_all"):
        return None
    if "bulk" in parts:
        raise ctx.fail(f"{ins.op}")
    if parts[2] == "mbarrier":
        from gpushim.ptx.ops_mbarrier import compile_cp_async_arrive

        return compile_cp_async_arrive(ctx, ins)
    from gpushim.ptx.nodes import Imm

    dst, src = ins.args[0], ins.args[1]
    size_op = ins.args[2]
    if not isinstance(size_op, Imm):
        raise ctx.fail(f"{ins.op} with a register copy size")
    size = int(size_op.value)
    rsrc_size = ctx.reader(ins.args[3], "u32") if len(ins.args) > 3 and not isinstance(ins.args[3], Imm) else None
    fixed_src = int(ins.args[3].value) if len(ins.args) > 3 and isinstance(ins.args[3], Imm) else size
    _, rd = ctx.address(dst)
    _, rs = ctx.address(src)
    dspace = _resolve_space(ctx, "shared", dst)
    sspace = _resolve_space(ctx, "global", src)
    unit = 4 if size % 4 == 0 and rsrc_size is None and fixed_src % 4 == 0 else 1
    dt = np.dtype(f"u{unit}")
    what = f"{ins.op} (line {ins.line})"

    def cp(st, idx):
        n = st.n if idx is None else idx.size
        vals = gather(st, idx, sspace, rs(st, idx), dt, size // unit, what)
        keep = fixed_src if rsrc_size is None else np.broadcast_to(rsrc_size(st, idx), (n,)).astype(np.int64)
        if rsrc_size is not None or fixed_src < size:
            vals = [np.where(np.asarray(keep) > j * unit, v, dt.type(0)) for j, v in enumerate(vals)]
        scatter(st, idx, dspace, rd(st, idx), dt, vals, what)

    return cp
