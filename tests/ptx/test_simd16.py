"""Packed 16-bit integer min/max (min/max{.relu}.{u16x2,s16x2}), checked lane by lane against Python integers.
PTX ISA, "Integer Arithmetic Instructions: min / max": each 16-bit half of d is the min (max) of the same
halves of a and b; .relu clamps a negative result to 0."""

import numpy as np
import pytest

OPS = ["min.u16x2", "min.s16x2", "max.u16x2", "max.s16x2", "min.relu.s16x2", "max.relu.s16x2"]


@pytest.fixture(scope="module")
def simd(dev_for):
    return dev_for("simd16", "sm_90")


def expected(op: str, a: int, b: int) -> int:
    signed = ".s16x2" in op
    out = 0
    for k in (0, 16):
        x, y = (a >> k) & 0xFFFF, (b >> k) & 0xFFFF
        if signed:
            x, y = x - (x >> 15 << 16), y - (y >> 15 << 16)
        r = min(x, y) if op.startswith("min") else max(x, y)
        if ".relu" in op:
            r = max(r, 0)
        out |= (r & 0xFFFF) << k
    return out


def inputs(rng, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    # the lanes' edges: 0, 1, 0x7FFF / 0x8000 (the signed order flips there), 0xFFFF, and halves that differ
    edges = [0x00000000, 0x00010001, 0x7FFF8000, 0x80007FFF, 0xFFFF0000, 0x0000FFFF, 0xFFFFFFFF, 0x12345678]
    x[:8] = edges
    y[:8] = edges[::-1]
    return x, y


def test_packed_min_max_per_thread(simd, rng):
    n = 256
    x, y = inputs(rng, n)
    po = simd.empty(4 * 6 * n)
    simd.launch("simd16", n // 64, 64, simd.array(x), simd.array(y), po)
    o = simd.get(po, np.uint32, 6 * n).reshape(n, 6)
    for i in range(n):
        got = [int(v) for v in o[i]]
        assert got == [expected(op, int(x[i]), int(y[i])) for op in OPS], (hex(x[i]), hex(y[i]))


@pytest.mark.parametrize("a,b", [(0x7FFF8000, 0x80007FFF), (0xFFFF0001, 0x0001FFFF), (5, 0xFFFB0007)])
def test_packed_min_max_uniform(simd, a, b):
    n = 64
    po = simd.empty(4 * 6 * n)
    simd.launch("simd16U", 1, n, np.uint32(a), np.uint32(b), po)
    o = simd.get(po, np.uint32, 6 * n).reshape(n, 6)
    assert [int(v) for v in o[0]] == [expected(op, a, b) for op in OPS]
    assert (o == o[0]).all()


def test_relu_needs_s16x2():
    from gpushim.ptx import PtxError, load_module

    ptx = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p) {
  .reg .b32 %r<3>;
  min.relu.u16x2 %r1, %r1, %r2;
  ret;
}"""
    with pytest.raises(PtxError, match="relu"):
        load_module(ptx)
