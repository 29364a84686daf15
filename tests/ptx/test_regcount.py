"""numRegs of a kernel loaded from PTX (gpushim/ptx/regcount.py): the most 32-bit registers live at once (a 64-bit
register two, predicates none), capped by the entry's .maxnreg (PTX ISA, "Performance-Tuning Directives:
.maxnreg": ptxas spills to stay within it) and by 255. numba-cuda's test_linker compares its kernels' counts
against 57 (CU_JIT_MAX_REGISTERS), which a fixed 32 could not show."""

from __future__ import annotations

from gpushim.ptx.module import load_module

# %fd1..%fd4 are all live at the first add: 4 doubles = 8 registers, plus the pointer %rd1 (2): 10
PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry wide(.param .u64 p) DIRECTIVE
{
    .reg .pred %p<2>;
    .reg .b64 %rd<2>;
    .reg .f64 %fd<8>;
    ld.param.u64 %rd1, [p];
    ld.global.f64 %fd1, [%rd1];
    ld.global.f64 %fd2, [%rd1+8];
    ld.global.f64 %fd3, [%rd1+16];
    ld.global.f64 %fd4, [%rd1+24];
    setp.gt.f64 %p1, %fd1, 0d0000000000000000;
    add.f64 %fd5, %fd1, %fd2;
    add.f64 %fd6, %fd3, %fd4;
    add.f64 %fd7, %fd5, %fd6;
    @%p1 st.global.f64 [%rd1], %fd7;
    ret;
}
.visible .entry none()
{
    ret;
}
"""


def _regs(directive: str = "") -> dict[str, int]:
    mod = load_module(PTX.replace("DIRECTIVE", directive))
    return {name: info.registers for name, info in mod.kernels.items()}


def test_live_registers_counted_in_32_bit_units() -> None:
    assert _regs() == {"wide": 10, "none": 1}


def test_maxnreg_caps_the_count() -> None:
    assert _regs(".maxnreg 6")["wide"] == 6
    assert _regs(".maxnreg 64")["wide"] == 10  # a limit above the need changes nothing
