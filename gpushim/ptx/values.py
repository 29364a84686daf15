"""Register values: conversion between widths and kinds, and in-place partial register writes.

A register holds either a numpy scalar (a value uniform over the batch) or a 1-D array over all threads of
the batch, always in the register's storage dtype (types.storage_type). Instructions read registers as
their own type through zero-copy views, and write results back the same way.
"""

from __future__ import annotations

import sys

import numpy as np

from gpushim.ptx.types import BOOL, S, U

ndarray = np.ndarray
_getrefcount = sys.getrefcount


def conv(v, dt: np.dtype):
    """Reinterpret or resize v to dtype dt the way PTX moves bits between registers and instruction types."""
    vd = v.dtype
    if vd is dt:
        return v
    if vd.itemsize == dt.itemsize and vd.kind != "b" and dt.kind != "b":
        return v.view(dt)
    if dt.kind == "b":
        return v != 0
    if vd.kind == "b":
        return v.astype(dt)
    if vd.kind == "f" or dt.kind == "f":
        if vd.itemsize > dt.itemsize:  # e.g. a 64-bit register read as .f32: low bits
            return v.view(U[vd.itemsize]).astype(U[dt.itemsize]).view(dt)
        return v.view(U[vd.itemsize]).astype(U[dt.itemsize]).view(dt)
    if dt.itemsize > vd.itemsize:  # widen, by the source's signedness
        w = v.astype(S[dt.itemsize]) if vd.kind == "i" else v.astype(U[dt.itemsize])
        return w if w.dtype is dt else w.view(dt)
    t = v.astype(U[dt.itemsize]) if vd.kind == "u" else v.view(U[vd.itemsize]).astype(U[dt.itemsize])
    return t if t.dtype is dt else t.view(dt)


def partial_write(regs: list, k: int, idx: np.ndarray, v, dt: np.dtype, n: int) -> None:
    """regs[k][idx] = v, copying the register first unless its array is referenced by nothing else."""
    cur = regs[k]
    if (
        cur.__class__ is not ndarray
        or cur.base is not None
        or _getrefcount(cur) > 3
        or not cur.flags.writeable
        or cur.dtype is not dt
    ):
        new = np.empty(n, dt)
        if cur.dtype is not dt:
            cur = conv(cur, dt)
        new[...] = cur
        regs[k] = cur = new
    cur[idx] = v


def const(value, dt: np.dtype):
    """A numpy scalar of dtype dt from a Python int (wrapped to the width) or float."""
    if dt.kind == "f":
        return dt.type(value)
    if dt.kind == "b":
        return np.bool_(bool(value))
    bits = int(value) & ((1 << (8 * dt.itemsize)) - 1)
    return np.array(bits, U[dt.itemsize]).view(dt)[()]


def as_bool(v):
    return v if v.dtype is BOOL else v != 0
