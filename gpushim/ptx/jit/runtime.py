"""Native helpers shared by every compiled kernel: built and compiled once per process (kernel.py), then
called by name from each module, which only declares them (LLVM compiles no copy of them per kernel)."""

from __future__ import annotations

from gpushim.ptx.jit import layout as L
from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import I1, I32, I64, P64

FIND_ALLOC = "gpushim_find_alloc"


def find_alloc(m: ir.Module, define: bool) -> ir.Function:
    """{i1 ok, i64 lo, i64 hi} @gpushim_find_alloc(ctx, a, end): binary search of the allocation [lo, hi)
    holding [a, end) (values, not pointers: the callers' caches of [lo, hi) then stay in registers). define:
    with its body (the process's copy), else a declaration."""
    rt = ir.LiteralStructType([I1, I64, I64])
    f = ir.Function(m, ir.FunctionType(rt, [P64, I64, I64]), name=FIND_ALLOC)
    if not define:
        return f
    f.attributes.add("noinline")
    ctx, a, end = f.args
    b = ir.IRBuilder(f.append_basic_block("e"))
    tab = b.inttoptr(b.load(b.gep(ctx, [ir.Constant(I32, L.ALLOCS)])), P64)
    n = b.load(b.gep(ctx, [ir.Constant(I32, L.NALLOCS)]))
    loop = f.append_basic_block("loop")
    body = f.append_basic_block("body")
    after = f.append_basic_block("after")
    entry = b.block
    b.branch(loop)
    b.position_at_end(loop)
    lo = b.phi(I64)
    hi = b.phi(I64)
    lo.add_incoming(ir.Constant(I64, 0), entry)
    hi.add_incoming(n, entry)
    b.cbranch(b.icmp_unsigned("<", lo, hi), body, after)
    b.position_at_end(body)
    mid = b.lshr(b.add(lo, hi), ir.Constant(I64, 1))
    start = b.load(b.gep(tab, [b.shl(mid, ir.Constant(I64, 1))]))
    le = b.icmp_unsigned("<=", start, a)
    nlo = b.select(le, b.add(mid, ir.Constant(I64, 1)), lo)
    nhi = b.select(le, hi, mid)
    lo.add_incoming(nlo, body)
    hi.add_incoming(nhi, body)
    b.branch(loop)
    b.position_at_end(after)
    # lo: the first allocation starting above a; lo - 1 is the candidate
    found = f.append_basic_block("cand")
    none = f.append_basic_block("none")
    b.cbranch(b.icmp_unsigned("==", lo, ir.Constant(I64, 0)), none, found)
    b.position_at_end(none)
    b.ret(ir.Constant(rt, [ir.Constant(I1, 0), ir.Constant(I64, 1), ir.Constant(I64, 0)]))
    b.position_at_end(found)
    k = b.sub(lo, ir.Constant(I64, 1))
    s = b.load(b.gep(tab, [b.shl(k, ir.Constant(I64, 1))]))
    e = b.load(b.gep(tab, [b.add(b.shl(k, ir.Constant(I64, 1)), ir.Constant(I64, 1))]))
    ok = b.and_(b.icmp_unsigned("<=", end, e), b.icmp_unsigned(">=", end, a))
    r = b.insert_value(ir.Constant(rt, ir.Undefined), ok, 0)
    r = b.insert_value(r, s, 1)
    b.ret(b.insert_value(r, e, 2))
    return f


def module() -> str:
    """The helpers' module (IR text), with their bodies."""
    m = ir.Module(name="gpushim_runtime")
    m.triple = ""
    find_alloc(m, define=True)
    return str(m)
