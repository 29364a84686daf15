"""cvt to bf16 in every rounding mode (PTX ISA, "cvt": .rn/.rz/.rm/.rp for float-to-float conversions): the
engine rounded every mode to nearest, so cuda_fp8.hpp's __nv_cvt_float_to_e8m0 (cvt.rp.bf16.f32 of a value just
above 2^127, NOSAT) gave 0xFE instead of NaN (numba-cuda's test_fp8_bindings test_cvt_float_to_e8m0). Checked
against an exact reference: the nearest bf16 on the mode's side."""

from __future__ import annotations

import bisect
from fractions import Fraction

import numpy as np
import pytest
from harness import Dev

PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry toBf16(.param .u64 out, .param .u64 in32, .param .u64 in64)
{
    .reg .b16 %rs<9>;
    .reg .b32 %r<2>;
    .reg .f32 %f<2>;
    .reg .f64 %fd<2>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [in32];
    ld.param.u64 %rd3, [in64];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd2, %rd4;
    ld.global.f32 %f1, [%rd5];
    mul.wide.u32 %rd4, %r1, 8;
    add.s64 %rd5, %rd3, %rd4;
    ld.global.f64 %fd1, [%rd5];
    cvt.rn.bf16.f32 %rs1, %f1;
    cvt.rz.bf16.f32 %rs2, %f1;
    cvt.rm.bf16.f32 %rs3, %f1;
    cvt.rp.bf16.f32 %rs4, %f1;
    cvt.rn.bf16.f64 %rs5, %fd1;
    cvt.rz.bf16.f64 %rs6, %fd1;
    cvt.rm.bf16.f64 %rs7, %fd1;
    cvt.rp.bf16.f64 %rs8, %fd1;
    mul.wide.u32 %rd4, %r1, 16;
    add.s64 %rd6, %rd1, %rd4;
    st.global.v4.u16 [%rd6], {%rs1, %rs2, %rs3, %rs4};
    st.global.v4.u16 [%rd6+8], {%rs5, %rs6, %rs7, %rs8};
    ret;
}
"""



def _bf16_values() -> list[tuple[int, Fraction]]:
    out = []
    for bits in range(0x0000, 0x7F80):
        f = np.array([bits << 16], np.uint32).view(np.float32)[0]
        out.append((bits, Fraction(float(f))))
    return out


FINITE = _bf16_values()  # non-negative finite bf16, ascending
VALUES = [v for _, v in FINITE]


def _reference(x: float, mode: str) -> int:
    q = Fraction(x)
    neg = q < 0
    a = -q if neg else q
    # the largest non-negative bf16 <= a, and the next one up (inf beyond the largest finite)
    lo = bisect.bisect_right(VALUES, a) - 1
    lo_v = FINITE[lo][1]
    hi = lo + 1 if lo_v != a else lo
    hi_v = FINITE[hi][1] if hi < len(FINITE) else None
    if hi == lo:
        mag = lo
    elif mode == "rz" or (mode == "rm" and not neg) or (mode == "rp" and neg):
        mag = lo
    elif mode in ("rm", "rp"):
        mag = hi
    else:  # nearest, ties to even; past the largest finite by half a step or more: inf
        top = hi_v if hi_v is not None else 2 * FINITE[-1][1] - FINITE[-2][1]
        d_lo, d_hi = a - lo_v, top - a
        mag = lo if d_lo < d_hi or (d_lo == d_hi and lo % 2 == 0) else hi
    return mag | (0x8000 if neg else 0)


@pytest.fixture(scope="module")
def values() -> np.ndarray:
    rng = np.random.default_rng(7)
    special = [np.nextafter(np.float32(2.0**127), np.float32(np.inf)), 1.0, 1.00390625, 1.005859375, 1e-40, 3.0e-39,
               3.3e38, 3.3961e38, 1.5, 2.0**-133 * 1.5]
    rand = (rng.standard_normal(44) * 10.0 ** rng.integers(-30, 30, 44)).astype(np.float32)
    v = np.concatenate([np.array(special, np.float32), rand])
    return np.concatenate([v, -v]).astype(np.float32)


@pytest.mark.parametrize("source", ["f32", "f64"])
def test_bf16_conversion_in_every_rounding_mode(values: np.ndarray, source: str) -> None:
    dev = Dev(PTX)
    n = len(values)
    x64 = values.astype(np.float64) * (1 + 2.0**-40)  # f64 sources: bits below f32's too
    out = dev.empty(16 * n)
    dev.launch("toBf16", 1, n, out, dev.array(values), dev.array(x64))
    got = dev.get(out, np.uint16, 8 * n).reshape(n, 8)
    col = 0 if source == "f32" else 4
    src = values.astype(np.float64) if source == "f32" else x64
    for i, x in enumerate(src.tolist()):
        for k, mode in enumerate(("rn", "rz", "rm", "rp")):
            assert got[i, col + k] == _reference(x, mode), (source, mode, x, hex(got[i, col + k]))
