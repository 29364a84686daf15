"""Thread groups of the SIMT scheduler: sorted index arrays into the batch, or None for every thread."""

from __future__ import annotations

import numpy as np


def union(st, a, b):
    if a is None or b is None:
        return None
    m = np.zeros(st.n, bool)
    m[a] = True
    m[b] = True
    r = np.flatnonzero(m)
    return None if r.size == st.n else r


def add(st, d: dict, pc: int, idx) -> None:
    """Put group idx at pc into d, merging with a group already there."""
    old = d.get(pc, False)
    d[pc] = idx if old is False else union(st, old, idx)


def split(st, idx, p):
    """(threads where p, threads where not p)."""
    if idx is None:
        return np.flatnonzero(p), np.flatnonzero(~p)
    return idx[p], idx[~p]


def blocks_of(st, idx):
    return st.blk if idx is None else st.blk[idx]
