"""Address translation and checks for the state spaces.

`locate(st, idx, space, addr, size, align)` turns addresses of the running threads into (typed buffer views,
element indices) after the bounds and alignment checks; loads and stores then gather and scatter on
`views[size]` (unsigned dtypes). Global and const addresses are device addresses in the arena; shared
addresses are offsets in the block's window, local addresses offsets in the thread's frame, kernel-parameter
addresses offsets in the parameter buffer. Generic addresses carry the shared, local and parameter windows
of operands.py and otherwise are global.
"""

from __future__ import annotations

import numpy as np

from gpushim.backends.emulator.memory import fits
from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx.operands import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, WINDOW_SIZE
from gpushim.ptx.values import ndarray

_SHIFT = {1: 0, 2: 1, 4: 2, 8: 3, 16: 4}
_SHIFT64 = {k: np.int64(v) for k, v in _SHIFT.items()}
_amin = np.minimum.reduce
_amax = np.maximum.reduce
_bor = np.bitwise_or.reduce
_WINDOWS = (("shared", SHARED_WINDOW), ("local", LOCAL_WINDOW), ("kparam", PARAM_WINDOW))
_LOW = SHARED_WINDOW
_HIGH = PARAM_WINDOW + WINDOW_SIZE


def _first_bad(st, idx, bad) -> int:
    """Batch thread index of the first thread flagged in bad (aligned with idx)."""
    j = int(np.argmax(bad)) if isinstance(bad, ndarray) else 0
    if idx is None:
        return j
    return int(idx[j])


def fault(st, code: int, what: str, thread: int, addr: int) -> CudaError:
    return CudaError(code, f"{what} at {addr:#x} by {st.describe_thread(thread)}")


def locate(st, idx, space: str, a, size: int, align: int, what: str):
    """(views by element size, element indices) for `size`-byte elements at addresses a (align: the access
    size, a vector's total size)."""
    if space == "global" or space == "const":
        return st.av, _global(st, idx, a, size, align, what)
    if space == "shared":
        return st.shv, _window(st, idx, a, size, align, what, st.sh_base, st.sh_size, "shared")
    if space == "local":
        return st.lov, _window(st, idx, a, size, align, what, st.lo_base, st.lo_size, "local")
    if space == "kparam":
        return st.parv, _param(st, idx, a, size, align, what)
    raise AssertionError(space)


def _global(st, idx, a, size, align, what):
    base = st.mem_base
    shift = _SHIFT[size]
    if a.__class__ is not ndarray:
        ai = int(a)
        al = st.mem.find(ai)
        if al is None or ai + align > al.addr + al.size:
            raise fault(st, Err.ILLEGAL_ADDRESS, f"{what}: {align} bytes out of bounds", _first_bad(st, idx, True), ai)
        if ai & (align - 1):
            raise fault(
                st, Err.MISALIGNED_ADDRESS, f"{what}: misaligned {align}-byte access", _first_bad(st, idx, True), ai
            )
        return (ai - base) >> shift
    if a.size == 0:
        return a.astype(np.int64)
    lo = int(a.min())
    hi = int(a.max())
    al = st.mem.find(lo)
    if al is None or hi + align > al.addr + al.size:
        try:
            st.mem.check_addresses(a, align)
        except CudaError:
            bad = _bad_global(st, a, align)
            raise fault(
                st,
                Err.ILLEGAL_ADDRESS,
                f"{what}: {align} bytes out of bounds",
                _first_bad(st, idx, bad),
                int(a[np.argmax(bad)]),
            ) from None
    if align > 1 and int(np.bitwise_or.reduce(a)) & (align - 1):
        bad = (a & np.uint64(align - 1)) != 0
        raise fault(
            st,
            Err.MISALIGNED_ADDRESS,
            f"{what}: misaligned {align}-byte access",
            _first_bad(st, idx, bad),
            int(a[np.argmax(bad)]),
        )
    off = a - np.uint64(base)
    if shift:
        off >>= np.uint64(shift)
    return off.view(np.int64)


def _bad_global(st, a, align):
    bad = np.ones(a.shape, bool)
    for al in st.mem.allocations():
        bad &= ~fits(a, align, np.uint64(al.addr), np.uint64(al.addr + al.size))
    return bad


def _window(st, idx, a, size, align, what, bases, limit, name):
    shift = _SHIFT[size]
    if a.__class__ is not ndarray:
        ai = int(a)
        if ai + align > limit:
            raise fault(
                st,
                Err.ILLEGAL_ADDRESS,
                f"{what}: {name} access of {align} bytes out of bounds",
                _first_bad(st, idx, True),
                ai,
            )
        if ai & (align - 1):
            raise fault(st, Err.MISALIGNED_ADDRESS, f"{what}: misaligned {name} access", _first_bad(st, idx, True), ai)
        b = bases if idx is None else bases[idx]
        e = b + np.int64(ai)
        if shift:
            e >>= _SHIFT64[size]
        return e
    if a.size == 0:
        return a.astype(np.int64)
    a64 = a.astype(np.int64) if a.dtype.itemsize < 8 else a.view(np.int64)
    hi = int(a.max())
    if hi + align > limit or int(a64.min()) < 0:
        bad = (a64 > limit - align) | (a64 < 0)  # (not a64 + align: it wraps near 2**63)
        raise fault(
            st,
            Err.ILLEGAL_ADDRESS,
            f"{what}: {name} access of {align} bytes out of bounds",
            _first_bad(st, idx, bad),
            int(a[np.argmax(bad)]),
        )
    if align > 1 and int(np.bitwise_or.reduce(a)) & (align - 1):
        bad = (a64 & (align - 1)) != 0
        raise fault(
            st,
            Err.MISALIGNED_ADDRESS,
            f"{what}: misaligned {name} access",
            _first_bad(st, idx, bad),
            int(a[np.argmax(bad)]),
        )
    b = bases if idx is None else bases[idx]
    e = b + a64
    if shift:
        e >>= _SHIFT64[size]
    return e


def _param(st, idx, a, size, align, what):
    limit = st.par_size
    if a.__class__ is not ndarray:
        ai = int(a)
        if ai + size > limit or ai & (size - 1):
            raise fault(
                st, Err.ILLEGAL_ADDRESS, f"{what}: kernel parameter access out of bounds", _first_bad(st, idx, True), ai
            )
        return ai >> _SHIFT[size]
    a64 = a.astype(np.int64)
    bad = (a64 > limit - size) | (a64 < 0) | ((a64 & (size - 1)) != 0)
    if bad.any():
        raise fault(
            st,
            Err.ILLEGAL_ADDRESS,
            f"{what}: kernel parameter access out of bounds",
            _first_bad(st, idx, bad),
            int(a[np.argmax(bad)]),
        )
    return a64 >> _SHIFT[size]


def split_generic(a):
    """For generic addresses: a single space name with the addresses translated into it, or None when the
    addresses mix spaces (then use generic_masks)."""
    if a.__class__ is not ndarray:
        ai = int(a)
        if _LOW <= ai < _HIGH:
            for name, w in _WINDOWS:
                if w <= ai < w + WINDOW_SIZE:
                    return name, np.uint64(ai - w)
        return "global", a
    if a.size == 0:
        return "global", a
    lo = int(a.min())
    hi = int(a.max())
    if lo >= _HIGH or hi < _LOW:
        return "global", a
    for name, w in _WINDOWS:
        if lo >= w and hi < w + WINDOW_SIZE:
            return name, a - np.uint64(w)
    return None, None


def generic_masks(a):
    """[(space, mask, translated addresses)] for mixed generic addresses."""
    out = []
    rest = np.ones(a.shape, bool)
    for name, w in _WINDOWS:
        m = (a >= np.uint64(w)) & (a < np.uint64(w + WINDOW_SIZE))
        if m.any():
            out.append((name, m, a[m] - np.uint64(w)))
            rest &= ~m
    if rest.any():
        out.append(("global", rest, a[rest]))
    return out


def locate_reg(st, idx, space: str, k: int, off: int, size: int, align: int, what: str):
    """locate() for the address `[%reg + off]` in an explicit space, reusing the translated element indices of
    the register across instructions (nvcc addresses arrays as one base register plus many constant offsets).

    The cache holds a reference to the register's array, so an in-place partial write to the register copies
    it (values.partial_write) and the identity check below sees the change. Returns None when the fast path
    does not apply; the caller then uses locate()."""
    v = st.regs[k]
    if v.__class__ is not ndarray or (space != "shared" and space != "local" and space != "global"):
        return None
    key = (k, space, size)
    ent = st.acache.get(key)
    if ent is None or ent[0] is not v or ent[1] is not idx:
        a = v if idx is None else v[idx]
        if a.size == 0:
            return None
        if a.dtype.itemsize == 4:
            a64 = a.view(np.uint32).astype(np.int64)
        else:
            a64 = a.view(np.int64)
        lo = int(_amin(a64))
        hi = int(_amax(a64))
        low = int(_bor(a64)) & 15
        if low & (size - 1):
            return None
        # numpy scalars, not Python ints, as operands: numpy 2 converts a Python int at every operation (slow)
        shift = _SHIFT64[size]
        if space == "global":
            al = st.mem.find(lo)
            if al is None:
                return None
            start, end = al.addr, al.addr + al.size
            if lo < 0:  # a 64-bit address above 2**63: never in the arena
                return None
            e0 = a64 - np.int64(st.mem_base)
        else:
            start, end = 0, (st.sh_size if space == "shared" else st.lo_size)
            if lo < 0:
                return None
            bases = st.sh_base if space == "shared" else st.lo_base
            e0 = (bases if idx is None else bases[idx]) + a64
        if shift:
            e0 >>= shift
        ent = (v, idx, e0, lo, hi, low, start, end)
        st.acache[key] = ent
    _, _, e0, lo, hi, low, start, end = ent
    if lo + off < start or hi + off + align > end or (low | off) & (align - 1):
        return None
    views = st.av if space == "global" else (st.shv if space == "shared" else st.lov)
    if off == 0:
        return views, e0
    return views, e0 + np.int64(off >> _SHIFT[size])
