"""@combine's mma case as one kernel-independent function of the runtime library (rtlib.py):

    void @mma_warp(i64* slots, i64 lane_stride, i64 slot_stride, i32* desc)

D = A B + C of a whole warp, as the interpreter computes it (ops_mma.matmul_acc, mma_frag.decode/encode): the
A, B and C elements of the 32 lanes gathered from their collective slots (slot j of lane l at slots + l *
lane_stride + j * slot_stride: tier 1's spill area is thread-major, tier 2's slot-major, stops.slot_addr),
decoded to doubles (exact for every source type; integers too: their sums stay below 2**53), each D element
summed in f64 in order of k starting from C, then encoded (f32: rounded once, NaN canonical; f16: rounded from
that f32 once more, NaN 0x7fff; s32: wraps, or clamps with .satfinite) and scattered to the lanes' D slots.

What differs between forms is data: `desc`, a constant i32 array in the kernel's module (one per form, `desc`
below) holding m, n, k, .satfinite, per operand its type, elements per lane, first slot, and its fragment
layout as a table (lane * E + e -> row * cols + col of lane's element e, mma_frag.py). So one function serves
every mma.sync and wmma.mma form, compiled once per machine (disk-cached; about 60 ms CPU) with the full code
generator; a kernel's combine only calls it (the test kernels' combines: 274-1490 IR instructions and 33-124
blocks with the computation unrolled per form, 45-274 and 12-82 now; what is left is the warp checks and the
other collectives).
$GPUSHIM_PTX_JIT_RTLIB=off: the function is defined in the module (as ops_mem's mem_miss)."""

from __future__ import annotations

from gpushim.ptx.jit import rtlib
from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import F32, F64, I32, I64
from gpushim.ptx.mma_frag import ELEM_BITS, per_reg

CODES = {"f16": 0, "bf16": 1, "tf32": 2, "f32": 3, "s8": 4, "u8": 5, "s32": 6}
MAXE = 512  # elements of the largest matrix of the supported forms (m16n8k32's A, m8n32k16's B, m32n8k16's A)
FIELDS = 4  # per operand: type code, elements per lane, first slot, table offset
HEAD = 4 + 4 * FIELDS  # m, n, k, .satfinite, then A, B, C, D
_FTY = ir.FunctionType(ir.VoidType(), [I64.as_pointer(), I64, I64, I32.as_pointer()])
_KEY = ("mma_warp",)


def descriptor(form: tuple) -> list[int]:
    """The desc array of an mma form (ops_mma.mma_form)."""
    (m, n, k), (dtyp, atyp, btyp, ctyp, sat), (nd, na, nb, nc), (l_d, la, lb, lc) = form
    head, tabs = [m, n, k, int(sat)], []
    ops = ((atyp, la, 0, k), (btyp, lb, na, n), (ctyp, lc, na + nb, n), (dtyp, l_d, na + nb + nc, n))
    for typ, (rows, cols), first, ncols in ops:
        e = rows.shape[1]
        if rows.shape[0] != 32 or rows.max() * ncols + cols.max() >= MAXE:
            raise ValueError(f"mma fragment layout {rows.shape} of {typ} exceeds mma_warp's buffers")
        head += [CODES[typ], e, first, HEAD + len(tabs)]
        tabs += (rows.astype(int) * ncols + cols).ravel().tolist()
    return head + tabs


def desc_global(g, form: tuple):
    """The kernel module's constant desc of the form (one per form)."""
    return const_table(g, "mmadesc", descriptor(form))


def const_table(g, prefix: str, vals: list[int]):
    """A constant i32 array in the module g generates, one per distinct content (descriptors, layout tables)."""
    tabs = g.__dict__.setdefault("_const_tables", {})
    key = (prefix, id(g.m), *vals)
    gv = tabs.get(key)
    if gv is None:
        ty = ir.ArrayType(I32, len(vals))
        gv = tabs[key] = ir.GlobalVariable(g.m, ty, name=f"{prefix}_{len(g.m.functions)}_{len(tabs)}")
        gv.global_constant = True
        gv.linkage = "internal"
        gv.initializer = ir.Constant(ty, list(vals))
    return gv


def function(g) -> ir.Function:
    """mma_warp: the runtime library's (rtlib.function; its f16 helpers the chunk's, pure.py), or without the
    library a definition in the module."""
    return rtlib.function(g, _KEY, "mma_warp", _FTY, lambda m, name: _define(g, m, name), in_chunk=True)


def _define(g, m: ir.Module, name: str) -> ir.Function:
    """The function, built with g's emitters (f16 conversions: ops_half.py; loops: ops_warp._for)."""
    f = ir.Function(m, _FTY, name=name)
    f.attributes.add("noinline")
    saved = g.b, g.f, g._known, g._known_blk, g.inlined_extra
    g.f, g._known, g._known_blk = f, {}, None
    g.b = b = ir.IRBuilder(f.append_basic_block("e"))
    try:
        _body(g, b, f)
    finally:
        g.b, g.f, g._known, g._known_blk, g.inlined_extra = saved
    return f


def _body(g, b: ir.IRBuilder, f: ir.Function) -> None:
    """Per operand a switch on its type into that type's loops (constant shifts; LLVM's short pipeline that
    compiles the library has no loop unswitching); the product's innermost loop runs over D's columns (independent
    sums, each still in order of k)."""
    slots, lstride, sstride, desc = f.args
    c64, c32 = (lambda v: ir.Constant(I64, v)), (lambda v: ir.Constant(I32, v))
    ty = ir.ArrayType(F64, MAXE)
    ma, mb, mc = (b.alloca(ty) for _ in range(3))  # (D replaces C in mc)

    def d(i):  # desc[i] (i: an int or an i64)
        return b.zext(b.load(b.gep(desc, [c64(i) if isinstance(i, int) else i])), I64)

    def at(mat, i):
        return b.gep(mat, [c32(0), i])

    def by_type(o: int, types: tuple, nest) -> None:
        """nest(type name, elements per lane, first slot, table) in a switch on operand o's type (A B C D)"""
        typ, ne, first, toff = (d(4 + o * FIELDS + j) for j in range(4))
        tab = b.gep(desc, [toff])
        join = f.append_basic_block("typ_done")
        blocks = {t: f.append_basic_block(t) for t in types}
        sw = b.switch(b.trunc(typ, I32), blocks[types[0]])  # (the descriptor names one of types)
        for t, blk in blocks.items():
            sw.add_case(c32(CODES[t]), blk)
            b.position_at_end(blk)
            nest(t, ne, first, tab)
            b.branch(join)
        b.position_at_end(join)

    def regs(t: str, ne, first, tab, body) -> None:
        """body(pointer to the slot, lane's table row, its first element) for every fragment register of every lane"""
        per = per_reg(t)

        def lane(ln):
            row = b.gep(slots, [b.mul(ln, lstride)])
            trow = b.gep(tab, [b.mul(ln, ne)])
            g._for(b, b.udiv(ne, c64(per)), lambda r: body(
                b.gep(row, [b.mul(b.add(first, r), sstride)]), trow, b.mul(r, c64(per))))  # fmt: skip

        g._for(b, c64(32), lane)

    def index(trow, e0, p: int):  # lane's element e0 + p: its index in the matrix
        return b.zext(b.load(b.gep(trow, [b.add(e0, c64(p))])), I64)

    def decode(t: str, bits):  # element bits (i32) -> double, exactly (mma_frag.decode)
        if t in ("s8", "u8"):
            v = b.trunc(bits, ir.IntType(8))
            return b.sitofp(v, F64) if t == "s8" else b.uitofp(v, F64)
        if t == "s32":
            return b.sitofp(bits, F64)
        if t == "f16":
            return b.fpext(g._h2f(b.and_(bits, c32(0xFFFF)), False), F64)
        if t == "bf16":
            return b.fpext(b.bitcast(b.shl(bits, c32(16)), F32), F64)
        return b.fpext(b.bitcast(b.and_(bits, c32(0xFFFFE000)) if t == "tf32" else bits, F32), F64)

    for o, mat in enumerate((ma, mb, mc)):

        def gather(t, ne, first, tab, mat=mat):
            def reg(p, trow, e0):
                word = b.load(p)
                for q in range(per_reg(t)):
                    bits = b.trunc(b.lshr(word, c64(q * ELEM_BITS[t])) if q else word, I32)
                    b.store(decode(t, bits), at(mat, index(trow, e0, q)))

            regs(t, ne, first, tab, reg)

        by_type(o, ("f16", "bf16", "tf32", "s8", "u8") if o < 2 else ("f32", "f16", "s32"), gather)

    mm, nn, kk, sat = (d(i) for i in range(4))

    def row(i):
        def step(q):  # (products exact in f64; each sum in order of k, from C)
            x = b.load(at(ma, b.add(b.mul(i, kk), q)))

            def col(j):
                p = at(mc, b.add(b.mul(i, nn), j))
                b.store(b.fadd(b.load(p), b.fmul(x, b.load(at(mb, b.add(b.mul(q, nn), j))))), p)

            g._for(b, nn, col)

        g._for(b, kk, step)

    g._for(b, mm, row)
    lo, hi = c64(-(2**31)), c64(2**31 - 1)
    satb = b.icmp_unsigned("!=", sat, c64(0))

    def encode(t: str, x):  # double -> the element's bits (i32) (mma_frag.encode)
        if t == "s32":  # exact integers: wraps, or clamps with .satfinite
            v = b.fptosi(x, I64)
            clamped = b.select(b.icmp_signed("<", v, lo), lo, b.select(b.icmp_signed(">", v, hi), hi, v))
            return b.trunc(b.select(satb, clamped, v), I32)
        r = b.fptrunc(x, F32)  # to nearest even
        if t == "f16":  # then once more (NaN: 0x7fff)
            return g._f2h(r)
        return b.select(b.fcmp_unordered("uno", r, r), c32(0x7FFFFFFF), b.bitcast(r, I32))

    def scatter(t, ne, first, tab):
        def reg(p, trow, e0):
            word = None
            for q in range(per_reg(t)):
                v = b.zext(encode(t, b.load(at(mc, index(trow, e0, q)))), I64)
                v = b.shl(v, c64(q * ELEM_BITS[t])) if q else v
                word = v if word is None else b.or_(word, v)
            b.store(word, p)

        regs(t, ne, first, tab, reg)

    by_type(3, ("f32", "f16", "s32"), scatter)
    b.ret_void()
