"""Thread groups of the SIMT scheduler: sorted index arrays into the batch, or None for every live thread.

Threads that exited keep computing garbage in full-width (None) groups, which is harmless for registers;
instructions with effects beyond registers (memory, printf, warp votes, barriers) run on `live(st, idx)`.
"""

from __future__ import annotations

import numpy as np


def union(st, a, b):
    if a is None or b is None:
        return None
    m = np.zeros(st.n, bool)
    m[a] = True
    m[b] = True
    r = np.flatnonzero(m)
    return None if r.size == st.n_alive else r


def add(st, d: dict, pc: int, idx) -> None:
    """Put group idx at pc into d, merging with a group already there."""
    old = d.get(pc, False)
    d[pc] = idx if old is False else union(st, old, idx)


def split(st, idx, p):
    """(live threads where p, live threads where not p) as index arrays."""
    if idx is None:
        if st.alive_idx is not None:
            return np.flatnonzero(p & st.alive), np.flatnonzero(~p & st.alive)
        return np.flatnonzero(p), np.flatnonzero(~p)
    return idx[p], idx[~p]


def full(st, idx):
    """idx, or None when it holds every live thread."""
    return None if idx is not None and idx.size == st.n_alive else idx


def live(st, idx):
    """The live threads of group idx as indices (None only while every thread of the batch lives)."""
    return st.alive_idx if idx is None else idx


def alive_only(fn):
    """Wrap an instruction with effects beyond registers so that exited threads never take part."""

    def g(st, idx):
        if idx is None and st.alive_idx is not None:
            idx = st.alive_idx
        fn(st, idx)

    return g


def blocks_of(st, idx):
    return st.blk if idx is None else st.blk[idx]
