"""dp4a, dp2a and bmsk on the compiling engine (gpushim/ptx/jit/ops_intx.py) against the interpreter and the
PTX ISA's definitions, on random operands."""

from __future__ import annotations

import numpy as np
import pytest
from harness import ENGINE, Dev, compile_ptx


def _lanes(x: np.ndarray, signed: bool, n: int, width: int) -> list[np.ndarray]:
    out = []
    for k in range(n):
        v = (x.astype(np.int64) >> (width * k)) & ((1 << width) - 1)
        out.append(np.where(v >= 1 << (width - 1), v - (1 << width), v) if signed else v)
    return out


@pytest.mark.parametrize("engine", ["jit"], indirect=True)  # compares the two engines itself
def test_dot_products_and_bmsk_match_the_interpreter(engine, rng):
    dev = Dev(compile_ptx("jitintx", "sm_75"))
    assert dev.mod.jit_kernel("dotBits") is not None
    n = 4096
    x = rng.integers(0, 2**32, 3 * n, dtype=np.uint64).astype(np.uint32)
    x[: 3 * 64] = rng.choice(np.array([0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFFFFFF], np.uint32), 3 * 64)
    px = dev.array(x)
    outs = {}
    for eng in ("interp", "jit"):
        ENGINE["name"] = eng
        po = dev.empty(56 * n)
        dev.launch("dotBits", n // 256, 256, px, po, n)
        outs[eng] = dev.get(po, np.uint32, 14 * n).reshape(n, 14)
    assert np.array_equal(outs["interp"], outs["jit"])
    # PTX ISA, dp4a / dp2a: d = c + the sum of the products of a's and b's lanes (32-bit wraparound)
    a, b, c = x[0::3], x[1::3], x[2::3].astype(np.int64)
    got = outs["jit"]
    for col, (sa, sb) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
        s = sum(p * q for p, q in zip(_lanes(a, sa, 4, 8), _lanes(b, sb, 4, 8), strict=True))
        assert np.array_equal(got[:, col], ((c + s) & 0xFFFFFFFF).astype(np.uint32)), col
        for half in (0, 1):
            bl = _lanes(b, sb, 4, 8)[2 * half : 2 * half + 2]
            s = sum(p * q for p, q in zip(_lanes(a, sa, 2, 16), bl, strict=True))
            assert np.array_equal(got[:, 4 + 4 * half + col], ((c + s) & 0xFFFFFFFF).astype(np.uint32))
    # bmsk: width b bits from position a; in range both modes agree
    pa, pb = (a & 0x3F).astype(np.int64), (b & 0x3F).astype(np.int64)
    inside = (pa + pb < 32) & (pb > 0)
    want = (((1 << pb) - 1) << pa) & 0xFFFFFFFF
    assert inside.sum() > 100
    assert np.array_equal(got[inside, 12], want[inside]) and np.array_equal(got[inside, 13], want[inside])


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_carry_chains_match_the_interpreter_and_integer_arithmetic(engine, rng):
    """PTX ISA, add.cc/addc, sub.cc/subc, mad.cc/madc: the carry (borrow) out of one word feeds the next."""
    dev = Dev(compile_ptx("jitintx", "sm_75"))
    assert dev.mod.jit_kernel("carries") is not None
    n = 2048
    x = rng.integers(0, 2**32, 6 * n, dtype=np.uint64).astype(np.uint32)
    x[: 6 * 64] = rng.choice(np.array([0, 1, 0xFFFFFFFF, 0xFFFFFFFE, 0x80000000], np.uint32), 6 * 64)
    px = dev.array(x)
    outs = {}
    for eng in ("interp", "jit"):
        ENGINE["name"] = eng
        po = dev.empty(64 * n)
        dev.launch("carries", n // 256, 256, px, po, n)
        outs[eng] = dev.get(po, np.uint32, 16 * n).reshape(n, 16)
    assert np.array_equal(outs["interp"], outs["jit"])
    got = outs["jit"].astype(object)
    for i in range(0, n, 7):
        w = [int(v) for v in x[6 * i : 6 * i + 6]]
        a, c = w[0] | w[1] << 32 | w[2] << 64, w[3] | w[4] << 32 | w[5] << 64
        m96 = (1 << 96) - 1
        assert got[i, 0] | got[i, 1] << 32 | got[i, 2] << 64 == (a + c) & m96
        assert got[i, 3] | got[i, 4] << 32 | got[i, 5] << 64 == (a - c) & m96
        mac = w[0] * w[2] + (w[3] | w[4] << 32) + ((w[1] * w[2]) >> 32 << 64)  # what the chain adds up
        assert got[i, 6] | got[i, 7] << 32 | got[i, 8] << 64 == mac & m96
        a128, c128 = w[0] | w[1] << 32 | w[2] << 64, w[3] | w[4] << 32 | w[5] << 64
        s = (a128 + c128) & ((1 << 128) - 1)
        assert got[i, 9] | got[i, 10] << 32 | got[i, 11] << 64 == s & m96


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_funnel_shifts_match_the_interpreter(engine, rng):
    """PTX ISA, shf: the 64-bit b:a shifted left (upper 32 bits kept) or right (lower 32), by c clamped to 32
    (.clamp) or taken mod 32 (.wrap)."""
    dev = Dev(compile_ptx("jitintx", "sm_75"))
    assert dev.mod.jit_kernel("funnel") is not None
    n = 2048
    x = rng.integers(0, 2**32, 3 * n, dtype=np.uint64).astype(np.uint32)
    px = dev.array(x)
    outs = {}
    for eng in ("interp", "jit"):
        ENGINE["name"] = eng
        po = dev.empty(16 * n)
        dev.launch("funnel", n // 256, 256, px, po, n)
        outs[eng] = dev.get(po, np.uint32, 4 * n).reshape(n, 4)
    assert np.array_equal(outs["interp"], outs["jit"])
    for i in range(0, n, 3):
        a, b, c = int(x[3 * i]), int(x[3 * i + 1]), int(x[3 * i + 2]) & 63
        v = b << 32 | a
        for col, k in ((0, min(c, 32)), (1, c & 31)):
            assert outs["jit"][i, col] == (v << k) >> 32 & 0xFFFFFFFF
        for col, k in ((2, min(c, 32)), (3, c & 31)):
            assert outs["jit"][i, col] == (v >> k) & 0xFFFFFFFF
