"""set with half sources or a half destination (PTX ISA, "Half Precision Comparison Instructions: set"): 1.0 / 0.0
in a half destination, all ones / 0 in an integer one, per lane for pairs. cuda_bf16.hpp's __hisnan is
set.nan.bf16.bf16, which the engine refused (numba-cuda's test_bfloat16 found it)."""

from __future__ import annotations

import numpy as np
from harness import Dev

PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry sets(.param .u64 out, .param .b32 x, .param .b32 y, .param .f32 f)
{
    .reg .b16 %h<5>;
    .reg .b32 %r<8>;
    .reg .f32 %f<2>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out];
    ld.param.b32 %r1, [x];
    ld.param.b32 %r2, [y];
    ld.param.f32 %f1, [f];
    mov.b32 {%h1, %h2}, %r1;
    set.nan.bf16.bf16 %h3, %h2, %h2;
    set.eq.f16.f32 %h4, %f1, %f1;
    set.lt.f16x2.f16x2 %r3, %r1, %r2;
    set.gt.u32.f16x2 %r4, %r1, %r2;
    set.num.u32.bf16 %r5, %h1, %h1;
    set.ltu.bf16x2.bf16x2 %r6, %r1, %r2;
    st.global.v2.b16 [%rd1], {%h3, %h4};
    st.global.v4.b32 [%rd1+16], {%r3, %r4, %r5, %r6};
    ret;
}
"""


def test_half_set() -> None:
    dev = Dev(PTX)
    # x: low lane 1.0 (f16 0x3C00; as bf16 a tiny number), high lane NaN (bf16 0x7FC0; as f16 also NaN)
    x = np.uint32(0x7FC0 << 16 | 0x3C00)
    y = np.uint32(0x4000 << 16 | 0x4000)  # 2.0 in both lanes (f16); as bf16, 2.0 too
    out = dev.empty(32)
    dev.launch("sets", 1, 1, out, x, y, np.float32(1.5))
    h = dev.get(out, np.uint16, 2)
    r = dev.get(out, np.uint32, 8)[4:]
    assert (int(h[0]), int(h[1])) == (0x3F80, 0x3C00)  # bf16 1.0: NaN is NaN; f16 1.0: 1.5 == 1.5
    assert int(r[0]) == 0x00003C00  # f16x2: 1.0 < 2.0 true (low), NaN < 2.0 false (high)
    assert int(r[1]) == 0  # u32 from f16x2: neither lane greater
    assert int(r[2]) == 0xFFFFFFFF  # u32 from bf16: a number
    assert int(r[3]) == 0x3F803F80  # bf16x2, unordered-or-less: tiny < 2.0, NaN unordered
