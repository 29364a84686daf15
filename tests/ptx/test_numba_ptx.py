"""PTX shapes numba-cuda emits that the engine refused (found by running numba-cuda's own test suite,
tests/e2e/test_numba_suite.py): `.reg.b16` without a space in cuda_fp16.hpp's inline asm (numba's fp16
intrinsics, linked from NVRTC output), and a call whose prototype has a return value to a definition without
one (numba's declare_device(abi="c") of a void function); an indirect call no function can be the target of
(numba's NRT destructor call through a pointer its kernels leave null)."""

from __future__ import annotations

import numpy as np
import pytest
from harness import Dev

from gpushim.cuda_errors import CudaError, Err

PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .func store(.param .b64 p, .param .b32 v)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<3>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [v];
    mul.lo.s32 %r2, %r1, 3;
    st.u32 [%rd1], %r2;
    ret;
}
.visible .entry halfAbs(.param .u64 out, .param .u64 in)
{
    .reg .b16 %rs<3>;
    .reg .b64 %rd<5>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [in];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 2;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u16 %rs1, [%rd4];
    {
      .reg.b16 r,t;
      mov.b16 r, %rs1;
      abs.f16 t, r;
      mov.b16 %rs2, t;
    }
    add.s64 %rd4, %rd1, %rd3;
    st.global.u16 [%rd4], %rs2;
    ret;
}
.visible .entry callVoid(.param .u64 out)
{
    .reg .b64 %rd<3>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd1, %rd1, %rd2;
    {
    .param .b64 param0;
    st.param.b64 [param0+0], %rd1;
    .param .b32 param1;
    st.param.b32 [param1+0], %r1;
    .param .b64 retval0;
    call.uni (retval0), store, (param0, param1);
    }
    ret;
}
.visible .entry icallUnreached(.param .u64 out, .param .u64 fp)
{
    .reg .pred %p<2>;
    .reg .b64 %rd<3>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [fp];
    setp.eq.s64 %p1, %rd2, 0;
    @%p1 bra $L_skip;
    {
    .param .b64 param0;
    st.param.b64 [param0+0], %rd1;
    prototype_1 : .callprototype ()_ (.param .b64 _);
    call %rd2, (param0), prototype_1;
    }
$L_skip:
    mov.u32 %r1, 7;
    st.global.u32 [%rd1], %r1;
    ret;
}
"""


def test_dotted_reg_declaration_in_inline_asm() -> None:
    dev = Dev(PTX)
    x = (np.arange(32, dtype=np.float16) - 16) / 4
    out = dev.empty(64)
    dev.launch("halfAbs", 1, 32, out, dev.array(x))
    np.testing.assert_array_equal(dev.get(out, np.float16, 32), np.abs(x))


def test_call_with_return_slot_to_void_definition() -> None:
    dev = Dev(PTX)
    out = dev.empty(4 * 32)
    dev.launch("callVoid", 1, 32, out)
    np.testing.assert_array_equal(dev.get(out, np.int32, 32), 3 * np.arange(32))


def test_indirect_call_without_candidates_traps_only_when_reached() -> None:
    dev = Dev(PTX)
    out = dev.empty(4)
    dev.launch("icallUnreached", 1, 1, out, 0)
    assert dev.get(out, np.int32, 1)[0] == 7
    with pytest.raises(CudaError) as e:  # a pointer to no function of the module: the call traps
        dev.launch("icallUnreached", 1, 1, out, 0x1234)
    assert e.value.code == Err.LAUNCH_FAILURE
