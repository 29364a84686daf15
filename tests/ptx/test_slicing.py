"""Slices of a large PTX module (gpushim/ptx/slicing.py): a kernel's slice keeps its own definition and the
functions it calls, blanks the rest with the same number of lines, and runs like the whole module."""

import numpy as np
import pytest

from gpushim.ptx import load_module
from gpushim.ptx.slicing import PtxSlicer

HEADER = """.version 8.0
.target sm_75
.address_size 64

.global .align 4 .u32 counter;
.func (.param .b32 r) twice(.param .b32 a);
"""
TWICE = """.func (.param .b32 r) twice(.param .b32 a)
{
  .reg .b32 %r<3>;
  ld.param.b32 %r1, [a];
  { .reg .b32 t; add.s32 t, %r1, %r1; mov.b32 %r2, t; }
  st.param.b32 [r], %r2;
  ret;
}
"""
USES_TWICE = """.visible .entry uses_twice(.param .u64 out)
{
  .reg .b32 %r<3>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  mov.b32 %r1, 21;
  {
  .param .b32 a0;
  st.param.b32 [a0], %r1;
  .param .b32 r0;
  call.uni (r0), twice, (a0);
  ld.param.b32 %r2, [r0];
  }
  st.global.u32 [%rd2], %r2;
  ret;
}
"""
OTHER = """.visible .entry other(.param .u64 out)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  mov.b32 %r1, 7;
  st.global.u32 [%rd2], %r1;
  ret;
}
"""
TEXT = HEADER + TWICE + USES_TWICE + OTHER


def test_slice_keeps_the_kernel_and_its_callees():
    s = PtxSlicer.of(TEXT, min_bytes=0)
    assert s is not None and sorted(s.kernels()) == ["other", "uses_twice"]
    assert s.closure("uses_twice") == {"uses_twice", "twice"}
    assert s.closure("other") == {"other"}
    text = s.slice("other")
    assert text.count("\n") == TEXT.count("\n")  # line numbers in messages stay the module's
    assert "uses_twice" not in text and ".func (.param .b32 r) twice(.param .b32 a);" in text
    def line(t: str) -> int:
        return t[: t.index(".visible .entry other")].count("\n")

    assert line(text) == line(TEXT)
    mod = load_module(s.slice("uses_twice"))
    assert set(mod.kernels) == {"uses_twice"} and "counter" in mod.globals
    assert set(load_module(s.slice(None)).kernels) == set()  # the variables' slice


def test_slice_runs_like_the_whole_module():
    from harness import Dev

    for kernel, want in (("uses_twice", 42), ("other", 7)):
        d = Dev(PtxSlicer.of(TEXT, min_bytes=0).slice(kernel))
        p = d.empty(4)
        d.launch(kernel, 1, 1, p)
        assert int(d.get(p, np.uint32, 1)[0]) == want


@pytest.mark.parametrize("change", [
    ("mov.b32 %r1, 7;", "mov.u64 %rd1, twice;"),  # a function's address taken: kernels could share pointers
    (".global .align 4 .u32 counter;", ".global .align 8 .u64 p = generic(counter);"),  # an address initialiser
])
def test_modules_that_load_whole(change):
    assert PtxSlicer.of(TEXT.replace(*change), min_bytes=0) is None


def test_comments_do_not_count():
    text = TEXT.replace("mov.b32 %r1, 7;", "// a comment with a brace }\n  mov.b32 %r1, 7; /* and {\n another */")
    s = PtxSlicer.of(text, min_bytes=0)
    assert s is not None and s.closure("other") == {"other"}
    sliced = s.slice("other")
    assert sliced.count("\n") == text.count("\n") and "brace" not in sliced
    mod = load_module(sliced)
    assert set(mod.kernels) == {"other"}


def test_small_modules_load_whole():
    assert PtxSlicer.of(TEXT) is None
