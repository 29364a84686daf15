"""mbarrier (init, inval, arrive, arrive_drop, expect_tx, complete_tx, test_wait, try_wait, pending_count),
cp.async.mbarrier.arrive and griddepcontrol.

An mbarrier is a 64-bit object in shared memory (PTX ISA, "Parallel Synchronization and Communication
Instructions: mbarrier"). Its layout on the GPU is opaque; here it is
    bits 0-19 pending arrivals of the current phase, 20-39 expected arrivals, 40-59 pending transaction
    count (tx-count), 60-63 the phase number (its parity is bit 60).
A state returned by arrive is the object's value before the arrival: test_wait with it is true once the
object's phase differs from the state's, and pending_count reads its pending arrivals.

Threads act in thread order, one address at a time (several barriers at one instruction are independent).
try_wait never suspends: it returns false while the phase is incomplete, and the loop nvcc emits around it
spins (the SIMT scheduler lets other threads run after 256 iterations of a backward loop).

cp.async copies complete at once on this engine (ops_mem.compile_cp_async), so cp.async.mbarrier.arrive's
arrival happens at once: with .noinc it is one arrival; without it the pending count is first incremented,
so the net effect is none. griddepcontrol: kernels of one stream run one after the other on the emulator, so
a dependent grid starts after its primary completed; launch_dependents and wait have nothing to do.
"""

from __future__ import annotations

import numpy as np

from gpushim.ptx.memspaces import locate, split_generic
from gpushim.ptx.nodes import Instr
from gpushim.ptx.operands import Ctx

_M20 = (1 << 20) - 1


def _decode(v: int) -> tuple[int, int, int, int]:
    """(phase, pending, expected, tx) of an mbarrier value."""
    return v >> 60, v & _M20, (v >> 20) & _M20, (v >> 40) & _M20


def _encode(phase: int, pending: int, expected: int, tx: int) -> int:
    return ((phase & 15) << 60) | ((tx & _M20) << 40) | ((expected & _M20) << 20) | (pending & _M20)


def _space(parts: list[str]) -> str | None:
    for p in parts:
        if p.startswith("shared"):
            if p == "shared::cluster":
                return "cluster"
            return "shared"
    return None


def _locate(st, idx, space, a, what: str):
    """(u64 view, element index per thread) of the mbarrier objects at addresses a."""
    if space is None:
        sp, aa = split_generic(a)
        if sp != "shared":
            raise st.error_for(what, "an mbarrier object must be in shared memory")
        space, a = sp, aa
    views, e = locate(st, idx, space, a, 8, 8, what)
    n = st.n if idx is None else idx.size
    e = np.broadcast_to(np.asarray(e, np.int64), (n,))
    return views[8].view(np.uint64), e


def _by_address(e: np.ndarray):
    """Runs of threads per address, each in thread order: [(element index, positions)]."""
    order = np.argsort(e, kind="stable")
    es = e[order]
    cut = np.flatnonzero(es[1:] != es[:-1]) + 1
    return [(int(es[s[0]]), s) for s in np.split(order, cut)] if e.size else []


def _address_reader(ctx: Ctx, op, parts):
    from gpushim.ptx.ops_mem import _resolve_space

    _, ra = ctx.address(op)
    space = _resolve_space(ctx, _space(parts), op)
    if space == "cluster":
        raise ctx.fail("mbarrier on distributed shared memory (shared::cluster)")
    if space not in (None, "shared"):
        raise ctx.error(f"mbarrier in .{space} memory")
    return space, ra


def _count_reader(ctx: Ctx, ins: Instr, pos: int):
    if len(ins.args) > pos:
        return ctx.reader(ins.args[pos], "u32")
    return lambda st, idx: np.uint32(1)


def _arrive_one(v: int, count: int, drop: bool, tx_add: int) -> int:
    """One thread's arrive-on operation (with its drop of expected arrivals and added transactions)."""
    phase, pending, expected, tx = _decode(v)
    if drop:
        expected = max(expected - count, 0)
    tx += tx_add
    pending -= count
    if pending <= 0 and tx == 0:
        return _encode(phase + 1, expected, expected, 0)
    return _encode(phase, max(pending, 0), expected, tx)


def _arrive_plain(v: int, counts: np.ndarray):
    """Vectorised arrivals without drops or transactions: (state before each arrival, final value)."""
    phase, pending, expected, _ = _decode(v)
    c = counts.astype(np.int64)
    prior = np.cumsum(c) - c
    total = int(prior[-1] + c[-1])
    done = prior >= pending
    k = np.where(done, (prior - pending) // expected + 1, 0)
    pend = np.where(done, expected - (prior - pending) % expected, pending - prior)
    states = (
        (((phase + k) & 15).astype(np.uint64) << np.uint64(60))
        | np.uint64(expected << 20)
        | (pend.astype(np.uint64) & np.uint64(_M20))
    )
    if total < pending:
        return states, _encode(phase, pending - total, expected, 0)
    kf = (total - pending) // expected + 1
    return states, _encode(phase + kf, expected - (total - pending) % expected, expected, 0)


def _arrive_run(v: int, counts: np.ndarray, drop: bool, txs: np.ndarray | None):
    """The arrivals of one address's threads in thread order: (state before each arrival, final value)."""
    _, _, expected, tx = _decode(v)
    if not drop and txs is None and tx == 0 and expected > 0:
        return _arrive_plain(v, counts)
    states = np.empty(counts.size, np.uint64)
    for j in range(counts.size):
        states[j] = np.uint64(v)
        v = _arrive_one(v, int(counts[j]), drop, int(txs[j]) if txs is not None else 0)
    return states, v


def _check_live(st, what: str, v: int) -> None:
    if v & _M20 == 0 and (v >> 20) & _M20 == 0 and (v >> 40) & _M20 == 0:
        raise st.error_for(what, "arrive on an mbarrier that was not initialised (or was invalidated)")


def compile_mbarrier(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    what = f"{ins.op} (line {ins.line})"
    kind = parts[1] if len(parts) > 1 else ""
    if kind == "pending_count":
        w = ctx.writer(ins.args[0])
        rs = ctx.reader(ins.args[1], "b64")
        m20 = np.uint64(_M20)
        return lambda st, idx: w(st, idx, (np.asarray(rs(st, idx)).astype(np.uint64) & m20).astype(np.uint32))
    if kind == "init":
        return _compile_init(ctx, ins, parts, what)
    if kind == "inval":
        space, ra = _address_reader(ctx, ins.args[0], parts)

        def inval(st, idx):
            arr, e = _locate(st, idx, space, ra(st, idx), what)
            arr[e] = np.uint64(0)

        return inval
    if kind in ("expect_tx", "complete_tx"):
        return _compile_tx(ctx, ins, parts, what, kind == "expect_tx")
    if kind in ("arrive", "arrive_drop"):
        return _compile_arrive(ctx, ins, parts, what, kind == "arrive_drop")
    if kind in ("test_wait", "try_wait"):
        return _compile_wait(ctx, ins, parts, what)
    raise ctx.fail(f"{ins.op}")


def _compile_init(ctx, ins, parts, what):
    space, ra = _address_reader(ctx, ins.args[0], parts)
    rc = ctx.reader(ins.args[1], "u32")

    def init(st, idx):
        arr, e = _locate(st, idx, space, ra(st, idx), what)
        n = e.size
        c = np.broadcast_to(np.asarray(rc(st, idx), np.uint64), (n,))
        if n and ((c == 0) | (c > _M20)).any():
            raise st.error_for(what, "mbarrier count must be between 1 and 2^20 - 1")
        arr[e] = (c << np.uint64(20)) | c  # phase 0, pending = expected = count, tx 0

    return init


def _compile_tx(ctx, ins, parts, what, expect: bool):
    space, ra = _address_reader(ctx, ins.args[0], parts)
    rt = ctx.reader(ins.args[1], "u32")

    def tx(st, idx):
        arr, e = _locate(st, idx, space, ra(st, idx), what)
        t = np.broadcast_to(np.asarray(rt(st, idx), np.int64), (e.size,))
        for el, pos in _by_address(e):
            v = int(arr[el])
            for p in pos:
                phase, pending, expected, cur = _decode(v)
                cur = cur + int(t[p]) if expect else cur - int(t[p])
                if cur < 0 or cur > _M20:
                    raise st.error_for(what, "mbarrier transaction count out of range")
                if not expect and cur == 0 and pending == 0:
                    v = _encode(phase + 1, expected, expected, 0)
                else:
                    v = _encode(phase, pending, expected, cur)
            arr[el] = np.uint64(v)

    return tx


def _compile_arrive(ctx, ins, parts, what, drop: bool):
    w = ctx.writer(ins.args[0])
    space, ra = _address_reader(ctx, ins.args[1], parts)
    with_tx = "expect_tx" in parts
    if with_tx:
        rt = ctx.reader(ins.args[2], "u32")
        rc = lambda st, idx: np.uint32(1)  # noqa: E731
    else:
        rt = None
        rc = _count_reader(ctx, ins, 2)

    def arrive(st, idx):
        arr, e = _locate(st, idx, space, ra(st, idx), what)
        n = e.size
        c = np.broadcast_to(np.asarray(rc(st, idx), np.int64), (n,))
        t = np.broadcast_to(np.asarray(rt(st, idx), np.int64), (n,)) if rt is not None else None
        states = np.empty(n, np.uint64)
        for el, pos in _by_address(e):
            v = int(arr[el])
            _check_live(st, what, v)
            states[pos], v = _arrive_run(v, c[pos], drop, t[pos] if t is not None else None)
            arr[el] = np.uint64(v)
        w(st, idx, states)

    return arrive


def _compile_wait(ctx, ins, parts, what):
    w = ctx.writer(ins.args[0])
    space, ra = _address_reader(ctx, ins.args[1], parts)
    parity = "parity" in parts
    rs = ctx.reader(ins.args[2], "u32" if parity else "b64")

    def wait(st, idx):
        arr, e = _locate(st, idx, space, ra(st, idx), what)
        phase = arr[e] >> np.uint64(60)
        s = np.asarray(rs(st, idx)).astype(np.uint64)
        if parity:
            done = (phase & np.uint64(1)) != (s & np.uint64(1))
        else:
            done = phase != (s >> np.uint64(60))
        w(st, idx, done)

    return wait


def compile_cp_async_arrive(ctx: Ctx, ins: Instr):
    """cp.async.mbarrier.arrive{.noinc}{.shared{::cta}}.b64 [addr]: the thread's earlier cp.async copies are
    complete already, so the arrival happens now (.noinc: one arrival; without it the instruction first adds
    one to the pending count, which leaves the count unchanged)."""
    parts = ins.op.split(".")
    if "noinc" not in parts:
        return lambda st, idx: None
    space, ra = _address_reader(ctx, ins.args[0], parts)
    what = f"{ins.op} (line {ins.line})"

    def arrive(st, idx):
        arr, e = _locate(st, idx, space, ra(st, idx), what)
        for el, pos in _by_address(e):
            v = int(arr[el])
            _check_live(st, what, v)
            arr[el] = np.uint64(_arrive_run(v, np.ones(pos.size, np.int64), False, None)[1])

    return arrive


def compile_griddepcontrol(ctx: Ctx, ins: Instr):
    parts = ins.op.split(".")
    if len(parts) != 2 or parts[1] not in ("launch_dependents", "wait"):
        raise ctx.fail(f"{ins.op}")
    return None
