"""Builtins: vprintf (device printf), __assertfail, createpolicy."""

from __future__ import annotations

import numpy as np

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx.memspaces import locate, split_generic
from gpushim.ptx.nodes import Instr, Plist, Sym
from gpushim.ptx.operands import Ctx
from gpushim.ptx.printf import format_printf


def _slot_reader(ctx: Ctx, op, size: int):
    """Reader of a call-argument slot (a frame variable) as an unsigned integer of `size` bytes."""
    if not isinstance(op, Sym):
        raise ctx.error("builtin call argument is not a parameter slot")
    off = ctx.prog.frame[op.name] + op.offset
    dt = np.dtype(f"u{size}")

    def rd(st, idx):
        views, e = locate(st, idx, "local", np.uint64(off), size, size, "call argument")
        return views[size][e].view(dt)

    return rd


def _slot_writer(ctx: Ctx, op, size: int):
    off = ctx.prog.frame[op.name] + op.offset

    def wr(st, idx, v):
        views, e = locate(st, idx, "local", np.uint64(off), size, size, "call result")
        views[size][e] = v

    return wr


def read_cstring(st, t: int, addr: int, limit: int = 1 << 16) -> bytes:
    """The NUL-terminated string at a generic address, read by batch thread t."""
    if addr == 0:
        return b"(null)"
    sp, a = split_generic(np.uint64(addr))
    a = int(a)
    if sp == "global":
        al = st.mem.find(a)
        if al is None:
            raise CudaError(Err.ILLEGAL_ADDRESS, f"printf/assert string at {addr:#x} is outside every allocation")
        lo = a - st.mem_base
        hi = al.addr + al.size - st.mem_base
        buf = st.mem.arena[lo : min(hi, lo + limit)]
    elif sp == "shared":
        base = int(st.sh_base[t])
        buf = st.shm[base + a : base + st.sh_size]
    elif sp == "local":
        base = int(st.lo_base[t])
        buf = st.loc[base + a : base + st.lo_size]
    else:
        buf = st.par[a : st.par_size]
    raw = bytes(buf)
    end = raw.find(b"\0")
    return raw if end < 0 else raw[:end]


def read_bytes(st, t: int, addr: int, n: int) -> bytes:
    sp, a = split_generic(np.uint64(addr))
    a = int(a)
    if sp == "global":
        return bytes(st.mem.read(a, n))
    if sp == "local":
        base = int(st.lo_base[t])
        if a + n > st.lo_size:
            raise CudaError(Err.ILLEGAL_ADDRESS, "printf argument buffer out of bounds")
        return bytes(st.loc[base + a : base + a + n])
    if sp == "shared":
        base = int(st.sh_base[t])
        return bytes(st.shm[base + a : base + a + n])
    return bytes(st.par[a : a + n])


def printf_text(st, t: int, fmt: bytes, argp: int) -> tuple[bytes, int]:
    """What thread t's vprintf(fmt, argp) prints, and its argument count (also the JIT's, jit/hostcall.py)."""
    return format_printf(
        fmt, lambda off, size: read_bytes(st, t, argp + off, size), lambda addr: read_cstring(st, t, addr)
    )


def assert_text(st, t: int, coords, msg: int, fil: int, line: int, fun: int) -> str:
    """CUDA's line for a failed assert of thread t at (block, thread) coords (also the JIT's)."""
    b, th = coords
    m, f, fn = (read_cstring(st, t, a).decode(errors="replace") for a in (msg, fil, fun))
    return (
        f"{f}:{line}: {fn}: block: [{b[0]},{b[1]},{b[2]}], thread: [{th[0]},{th[1]},{th[2]}] "
        f"Assertion `{m}` failed.\n"
    )


def compile_vprintf(ctx: Ctx, ins: Instr):
    rets, args = ins.args
    assert isinstance(rets, Plist) and isinstance(args, Plist)
    rfmt = _slot_reader(ctx, args.items[0], 8)
    rargs = _slot_reader(ctx, args.items[1], 8) if len(args.items) > 1 else None
    wret = _slot_writer(ctx, rets.items[0], 4) if rets.items else None

    def vprintf(st, idx):
        n = st.n if idx is None else idx.size
        fmts = np.broadcast_to(rfmt(st, idx), (n,))
        argp = np.broadcast_to(rargs(st, idx), (n,)) if rargs is not None else np.zeros(n, np.uint64)
        threads = st.thread if idx is None else idx
        counts = np.zeros(n, np.uint32)
        cache: dict[int, bytes] = {}
        for i in range(n):
            t = int(threads[i])
            fa = int(fmts[i])
            fmt = cache.get(fa)
            if fmt is None:
                fmt = cache[fa] = read_cstring(st, t, fa)
            text, nargs = printf_text(st, t, fmt, int(argp[i]))
            counts[i] = nargs
            st.out(text)
        if wret is not None:
            wret(st, idx, counts)

    return vprintf


def compile_assertfail(ctx: Ctx, ins: Instr):
    _, args = ins.args
    items = args.items
    rmsg = _slot_reader(ctx, items[0], 8)
    rfile = _slot_reader(ctx, items[1], 8)
    rline = _slot_reader(ctx, items[2], 4)
    rfunc = _slot_reader(ctx, items[3], 8)

    def assertfail(st, idx):
        n = st.n if idx is None else idx.size
        threads = st.thread if idx is None else idx
        msg, fil, line, fun = (np.broadcast_to(r(st, idx), (n,)) for r in (rmsg, rfile, rline, rfunc))
        first = None
        for i in range(n):
            t = int(threads[i])
            text = assert_text(st, t, st.coords(t), int(msg[i]), int(fil[i]), int(line[i]), int(fun[i]))
            st.out(text.encode())
            if first is None:
                first = text.strip()
        raise CudaError(Err.ASSERT, f"device-side assert triggered: {first}")

    return assertfail


def compile_createpolicy(ctx: Ctx, ins: Instr):
    w = ctx.writer(ins.args[0])
    z = np.uint64(0)
    return lambda st, idx: w(st, idx, z)


def compile_malloc(ctx: Ctx, ins: Instr):
    from gpushim.ptx import heap

    rets, args = ins.args
    rsize = _slot_reader(ctx, args.items[0], 8)
    wret = _slot_writer(ctx, rets.items[0], 8) if rets.items else None

    def malloc(st, idx):
        n = st.n if idx is None else idx.size
        ptrs = heap.malloc(st.mem, np.broadcast_to(rsize(st, idx), (n,)))
        if wret is not None:
            wret(st, idx, ptrs)

    return malloc


def compile_free(ctx: Ctx, ins: Instr):
    from gpushim.ptx import heap

    _, args = ins.args
    rptr = _slot_reader(ctx, args.items[0], 8)

    def free(st, idx):
        n = st.n if idx is None else idx.size
        heap.free(st.mem, np.broadcast_to(rptr(st, idx), (n,)))

    return free


def compile_stackoverflow(ctx: Ctx, ins: Instr):
    name, depth = ins.args[0].name, int(ins.args[1].value)

    def overflow(st, idx):
        who = 0 if idx is None else int(idx[0])
        raise CudaError(
            Err.HARDWARE_STACK_ERROR,
            f"{st.describe_thread(who)} recursed into {name} more than "
            f"{depth} levels deep, beyond what the emulator inlines (line {ins.line})",
        )

    return overflow
