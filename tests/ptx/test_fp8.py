"""cvt's .relu on 8-bit float pairs (PTX ISA, "cvt": negative results become +0, NaN stays NaN) and its required
.rn.satfinite; the conversions themselves are checked against cuda_fp8.hpp in tests/e2e/test_kernels.py."""

from __future__ import annotations

import numpy as np
import pytest
from harness import Dev

from gpushim.ptx.errors import PtxError

PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry relu(.param .u64 out, .param .f32 a, .param .f32 b)
{
    .reg .b16 %h<3>;
    .reg .b32 %r<2>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out];
    ld.param.f32 %f1, [a];
    ld.param.f32 %f2, [b];
    cvt.rn.satfinite.relu.e4m3x2.f32 %h1, %f1, %f2;
    cvt.rn.satfinite.e5m2x2.f32 %h2, %f1, %f2;
    cvt.rn.relu.f16x2.e5m2x2 %r1, %h2;
    st.global.v2.b16 [%rd1], {%h1, %h2};
    st.global.b32 [%rd1+4], %r1;
    ret;
}
"""


@pytest.mark.parametrize(("a", "b", "e4m3", "e5m2", "f16x2"), [
    (-3.0, 2.0, 0x0040, 0xC240, 0x00004000),  # a (upper byte) negative: relu 0; e5m2 keeps the sign; back: +0, 2.0
    (float("nan"), -1e9, 0x7F00, 0x7FFB, 0x7FFF0000),  # NaN stays NaN; -1e9 saturates (relu then 0)
])
def test_relu_and_satfinite(a: float, b: float, e4m3: int, e5m2: int, f16x2: int) -> None:
    dev = Dev(PTX)
    out = dev.empty(8)
    dev.launch("relu", 1, 1, out, np.float32(a), np.float32(b))
    got = dev.get(out, np.uint16, 4)
    assert (int(got[0]), int(got[1]), int(got[2]) | int(got[3]) << 16) == (e4m3, e5m2, f16x2)


def test_conversion_to_fp8_needs_rn_satfinite() -> None:
    with pytest.raises(PtxError, match="satfinite"):
        Dev(PTX.replace("cvt.rn.satfinite.e5m2x2.f32", "cvt.rn.e5m2x2.f32"))
