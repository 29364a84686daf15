"""CTA barriers: bar.sync / barrier.sync / bar.red / bar.arrive with barrier ids and thread counts.

Each block of the batch counts arrivals per barrier id. A barrier completes for a block when its arrivals reach
the expected count (the instruction's count, or every live thread of the block); its waiting threads then
continue after the barrier instruction they wait at, bar.red results computed over them. When nothing else can
run, every waiting group is released anyway (exited threads, unusual counts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpushim.ptx.groups import add, blocks_of, live


@dataclass
class BarOp:
    bar_id: object  # reader
    count: object  # reader or None: every thread of the block
    red: object  # bar.red action on the released threads, or None
    arrive_only: bool


def _uniform(v) -> int:
    return int(v) if v.__class__ is not np.ndarray else int(v.max())


def arrive(st, blocks: dict, pc: int, idx, groups: dict) -> None:
    """A group reaches the barrier instruction at pc: count it, park it (or let it go on for bar.arrive) and
    release every block whose barrier completed."""
    op: BarOp = blocks[pc].op
    idx = live(st, idx)
    bid = _uniform(op.bar_id(st, idx)) & 15
    nb = st.alive_per_block.size
    st.bar_arrived[:, bid] += np.bincount(blocks_of(st, idx), minlength=nb)
    if op.arrive_only:
        add(st, groups, blocks[pc].next, idx)
    else:
        add(st, st.bar_wait.setdefault(bid, {}), pc, idx)
    expected = st.alive_per_block if op.count is None else _uniform(op.count(st, idx))
    done = st.bar_arrived[:, bid] >= expected
    if done.any():
        _release(st, blocks, bid, done, groups)


def _release(st, blocks: dict, bid: int, done, groups: dict) -> None:
    st.bar_arrived[done, bid] = 0
    waiting = st.bar_wait.get(bid, {})
    for pc in list(waiting):
        w = live(st, waiting.pop(pc))
        if w is None:  # every thread of the batch, all alive
            m = done[st.blk]
            go, stay = np.flatnonzero(m), np.flatnonzero(~m)
        else:
            m = done[st.blk[w]]
            go, stay = w[m], w[~m]
        if go.size:
            blk = blocks[pc]
            if blk.op.red is not None:
                blk.op.red(st, go if go.size < st.n else None)
            add(st, groups, blk.next, None if go.size == st.n_alive else go)
        if stay is not None and stay.size:
            waiting[pc] = stay
    if not waiting:
        st.bar_wait.pop(bid, None)


def release_all(st, blocks: dict, groups: dict) -> bool:
    """Nothing else can run: release every waiting group. False when none waits."""
    if not st.bar_wait:
        return False
    for bid in list(st.bar_wait):
        _release(st, blocks, bid, np.ones(st.alive_per_block.size, bool), groups)
    return True


def recheck(st, blocks: dict, groups: dict) -> None:
    """After threads exit: barriers without a count may now be complete."""
    for bid in list(st.bar_wait):
        done = (st.bar_arrived[:, bid] >= st.alive_per_block) & (st.bar_arrived[:, bid] > 0)
        if done.any():
            _release(st, blocks, bid, done, groups)
