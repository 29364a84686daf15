"""PTX scalar types and their numpy storage."""

from __future__ import annotations

import numpy as np

from gpushim.ptx.errors import PtxError

_SIZES = {
    "b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2, "b32": 4, "u32": 4, "s32": 4,
    "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8, "pred": 1, "f16x2": 4, "bf16x2": 4, "b128": 16, "u128": 16,
    "s128": 16, "e4m3x2": 2, "e5m2x2": 2, "tf32": 4,
}  # fmt: skip

U = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
S = {1: np.dtype(np.int8), 2: np.dtype(np.int16), 4: np.dtype(np.int32), 8: np.dtype(np.int64)}
F = {2: np.dtype(np.float16), 4: np.dtype(np.float32), 8: np.dtype(np.float64)}
BOOL = np.dtype(np.bool_)

TYPES = frozenset(_SIZES)


def type_size(t: str) -> int:
    try:
        return _SIZES[t]
    except KeyError:
        raise PtxError(f"unknown type .{t}") from None


def is_float(t: str) -> bool:
    return t in ("f16", "f32", "f64", "bf16")


def is_signed(t: str) -> bool:
    return t[0] == "s"


def np_type(t: str) -> np.dtype:
    """numpy dtype holding values of PTX type t for arithmetic (f16/bf16 are held as raw 16-bit bits)."""
    if t == "pred":
        return BOOL
    n = type_size(t)
    if t in ("f32", "f64"):
        return F[n]
    if t[0] == "s":
        return S[n]
    return U[n]


def storage_type(t: str) -> np.dtype:
    """dtype of a register declared with type t: floats as floats, every integer kind as unsigned bits."""
    if t == "pred":
        return BOOL
    if t in ("f32", "f64"):
        return F[type_size(t)]
    return U[type_size(t)]
