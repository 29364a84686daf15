"""tanh.approx and ex2.approx of half types (PTX ISA, "Half Precision Floating-Point Instructions: tanh, ex2"):
.f16/.f16x2 and .bf16/.bf16x2, each lane as a correctly rounded value of the function (within the ISA's error bound
for the approximations). numba-cuda's test_bfloat16_bindings (test_math_func) found tanh.approx.bf16 refused."""

from __future__ import annotations

import numpy as np
from harness import Dev

PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry special(.param .u64 out, .param .u64 in)
{
    .reg .b16 %h<5>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [in];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.b32 %r2, [%rd4];
    mov.b32 {%h1, %h2}, %r2;
    tanh.approx.f16 %h3, %h1;
    tanh.approx.bf16 %h4, %h2;
    tanh.approx.bf16x2 %r3, %r2;
    ex2.approx.f16x2 %r4, %r2;
    ex2.approx.ftz.bf16x2 %r5, %r2;
    mul.wide.u32 %rd3, %r1, 16;
    add.s64 %rd5, %rd1, %rd3;
    st.global.v2.b16 [%rd5], {%h3, %h4};
    st.global.b32 [%rd5+4], %r3;
    st.global.b32 [%rd5+8], %r4;
    st.global.b32 [%rd5+12], %r5;
    ret;
}
"""


def _bf16(x: np.ndarray) -> np.ndarray:
    """f64 values to bf16 bits, nearest even (exactly: through f32 rounded to odd)."""
    from gpushim.ptx.ops_cvt import _f64_to_bf16

    return _f64_to_bf16(np.asarray(x, np.float64), "rn")


def _bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def test_tanh_and_ex2_of_half_types() -> None:
    dev = Dev(PTX)
    n = 64
    rng = np.random.default_rng(3)
    lo = rng.uniform(-4, 4, n).astype(np.float16)  # f16 lane
    hi = _bf16(rng.uniform(-4, 4, n))  # bf16 lane
    lo_bits = lo.view(np.uint16).astype(np.uint32)
    packed = lo_bits | (hi.astype(np.uint32) << 16)
    out = dev.empty(16 * n)
    dev.launch("special", 1, n, out, dev.array(packed))
    got = dev.get(out, np.uint16, 8 * n).reshape(n, 8)
    lo64, hi64 = lo.astype(np.float64), _bf16_value(hi)
    np.testing.assert_array_equal(got[:, 0], np.tanh(lo64).astype(np.float16).view(np.uint16))
    np.testing.assert_array_equal(got[:, 1], _bf16(np.tanh(hi64)))
    # tanh.approx.bf16x2: both lanes read as bf16
    np.testing.assert_array_equal(got[:, 2], _bf16(np.tanh(_bf16_value(lo.view(np.uint16)))))
    np.testing.assert_array_equal(got[:, 3], _bf16(np.tanh(hi64)))
    # ex2.approx.f16x2: both lanes read as f16
    np.testing.assert_array_equal(got[:, 4], np.exp2(lo64).astype(np.float16).view(np.uint16))
    np.testing.assert_array_equal(got[:, 5], np.exp2(hi.view(np.float16).astype(np.float64)).astype(np.float16)
                                  .view(np.uint16))
    np.testing.assert_array_equal(got[:, 7], _bf16(np.exp2(hi64)))
