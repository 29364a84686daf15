"""The SIMT scheduler of one batch of whole blocks.

Threads are grouped by program counter; the group with the lowest PC always runs next, one basic block at a
time, and a group arriving at a PC where another group waits merges with it. For the block layout nvcc emits
this reconverges divergent threads where an immediate-post-dominator stack would.

- Barriers (barriers.py) count arrivals per block and barrier id and release a block's waiting threads when
  its count is reached; when nothing else can run, every waiting group is released.
- A warp-synchronous instruction (shfl, vote, match, redux, bar.warp.sync) runs once every live thread of each
  warp involved has arrived at it; a group waits for the others otherwise. When nothing else can run, the
  lowest waiting group runs anyway (starvation override).
- A group that keeps looping backward while other groups are runnable yields after YIELD_AFTER iterations,
  so spin-waits on other threads make progress.
- A watchdog turns launches running longer than the deadline into cudaErrorLaunchTimeout.
"""

from __future__ import annotations

import time

import numpy as np

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx import barriers
from gpushim.ptx.groups import add as _add
from gpushim.ptx.groups import full, live, union
from gpushim.ptx.groups import split as _split

YIELD_AFTER = 256
_NO_THREADS = np.zeros(0, np.int64)  # alive_idx once every thread exited (shared: index arrays are never written)
_NO_THREADS.flags.writeable = False


def warp_complete(st, idx) -> bool:
    if idx is None:
        return True
    cnt = np.bincount(st.warp[idx], minlength=st.nwarps)
    present = cnt > 0
    return bool(np.array_equal(cnt[present], st.warp_alive[present]))


def _exit(st, idx, blocks, groups) -> None:
    idx = live(st, idx)
    if idx is None:
        # alive, warp_alive and alive_per_block are made again from alive_idx if something still needs them
        d = st.__dict__
        d.pop("alive", None)
        d.pop("warp_alive", None)
        d.pop("alive_per_block", None)
        st.alive_idx = _NO_THREADS
        st.n_alive = 0
    else:
        # each of these is made (from the alive_idx before this exit) on first use, then updated
        st.alive[idx] = False
        st.warp_alive -= np.bincount(st.warp[idx], minlength=st.nwarps)
        st.alive_per_block -= np.bincount(st.blk[idx], minlength=st.alive_per_block.size)
        st.alive_idx = np.flatnonzero(st.alive)
        st.n_alive = st.alive_idx.size
    if st.bar_wait:
        barriers.recheck(st, blocks, groups)


def run_batch(kern, st, deadline: float) -> None:
    blocks = kern.blocks
    groups: dict = {0: None}
    warpw: dict = {}
    deferred: dict = {}
    steps = 0
    while True:
        force = False
        if groups:
            pc = min(groups)
            idx = groups.pop(pc)
        elif deferred:
            for k, v in deferred.items():
                _add(st, groups, k, v)
            deferred = {}
            continue
        elif warpw:
            pc = min(warpw)
            idx = warpw.pop(pc)
            force = True
        elif barriers.release_all(st, blocks, groups):
            continue
        else:
            return
        back = 0
        while True:
            blk = blocks[pc]
            steps += 1
            if not steps & 255 and time.monotonic() > deadline:
                raise CudaError(
                    Err.LAUNCH_TIMEOUT,
                    f"kernel {kern.prog.kernel} ran past the watchdog deadline (line {blk.line}: {blk.text})",
                )
            n = st.n_alive if idx is None else idx.size
            st.count += n * blk.n
            for f in blk.fns:
                f(st, idx)
            kind = blk.kind
            if kind == "fall":
                npc = blk.next
            elif kind == "bra":
                g = blk.guard
                if g is None:
                    npc = blk.target
                else:
                    p = g(st, idx)
                    if blk.neg:
                        p = ~p
                    if p.__class__ is np.bool_:
                        npc = blk.target if p else blk.next
                    elif p.all():
                        npc = blk.target
                    elif not p.any():
                        npc = blk.next
                    else:
                        t, fl = _split(st, idx, p)
                        if fl.size == 0:
                            idx, npc = full(st, t), blk.target
                        elif t.size == 0:
                            idx, npc = full(st, fl), blk.next
                        elif blocks[blk.target].pure_exit:
                            # threads leaving for a bare `ret` retire now, so the others run full width again
                            st.count += t.size
                            _exit(st, t, blocks, groups)
                            idx, npc = full(st, fl), blk.next
                        elif blocks[blk.next].pure_exit:
                            st.count += fl.size
                            _exit(st, fl, blocks, groups)
                            idx, npc = full(st, t), blk.target
                        else:
                            _add(st, groups, blk.target, full(st, t))
                            _add(st, groups, blk.next, full(st, fl))
                            break
            elif kind == "exit":
                g = blk.guard
                if g is None:
                    _exit(st, idx, blocks, groups)
                    break
                p = g(st, idx)
                if blk.neg:
                    p = ~p
                if p.__class__ is np.bool_:
                    if p:
                        _exit(st, idx, blocks, groups)
                        break
                    npc = blk.next
                else:
                    t, fl = _split(st, idx, p)
                    if t.size:
                        _exit(st, t, blocks, groups)
                    if fl.size == 0:
                        break
                    idx = full(st, fl)
                    npc = blk.next
            elif kind == "bar":
                g = blk.guard
                if g is None:
                    barriers.arrive(st, blocks, pc, idx, groups)
                    break
                p = g(st, idx)
                if blk.neg:
                    p = ~p
                if p.__class__ is np.bool_:
                    if p:
                        barriers.arrive(st, blocks, pc, idx, groups)
                        break
                    npc = blk.next
                else:
                    t, fl = _split(st, idx, p)
                    if t.size:
                        barriers.arrive(st, blocks, pc, full(st, t), groups)
                    if fl.size == 0:
                        break
                    idx = full(st, fl)
                    npc = blk.next
            elif kind == "warp":
                w = warpw.pop(pc, False)
                if w is not False:
                    idx = union(st, idx, w)
                if force or warp_complete(st, idx):
                    force = False
                    _run_guarded(blk, st, idx)
                    npc = blk.next
                else:
                    warpw[pc] = idx
                    break
            elif kind == "trap":
                g = blk.guard
                if g is None:
                    lv = live(st, idx)
                    who = 0 if lv is None else int(lv[0])
                else:
                    p = g(st, idx)
                    if blk.neg:
                        p = ~p
                    if p.__class__ is np.bool_:
                        lv = live(st, idx)
                        who = (0 if lv is None else int(lv[0])) if p else -1
                    else:
                        t, _ = _split(st, idx, p)
                        who = int(t[0]) if t.size else -1
                if who >= 0:
                    raise CudaError(Err.LAUNCH_FAILURE, f"trap executed by {st.describe_thread(who)} (line {blk.line})")
                npc = blk.next
            elif kind == "brx":
                idx = live(st, idx)
                sel = blk.op(st, idx)
                table = blk.table
                if sel.__class__ is not np.ndarray:
                    npc = table[int(sel)] if int(sel) < len(table) else -1
                    if npc < 0:
                        raise CudaError(Err.ILLEGAL_INSTRUCTION, f"brx.idx index {int(sel)} out of range")
                else:
                    if int(sel.max()) >= len(table):
                        raise CudaError(Err.ILLEGAL_INSTRUCTION, "brx.idx index out of range")
                    for v in np.unique(sel):
                        m = sel == v
                        sub = np.flatnonzero(m) if idx is None else idx[m]
                        _add(st, groups, table[int(v)], full(st, sub))
                    break
            else:
                raise AssertionError(kind)
            # continue at npc unless a lower group is waiting to run
            if npc in groups:
                idx = union(st, idx, groups.pop(npc))
            if groups and min(groups) < npc:
                _add(st, groups, npc, idx)
                break
            if npc <= pc:
                back += 1
                if back > YIELD_AFTER and groups:
                    _add(st, deferred, npc, idx)
                    break
            pc = npc


def _run_guarded(blk, st, idx) -> None:
    g = blk.guard
    if g is None:
        blk.op(st, idx)
        return
    p = g(st, idx)
    if blk.neg:
        p = ~p
    if p.__class__ is np.bool_:
        if p:
            blk.op(st, idx)
        return
    t, _ = _split(st, idx, p)
    if t.size:
        blk.op(st, full(st, t))
