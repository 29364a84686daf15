"""What every tier-1 compile pays before its kernel's own code (gpushim/ptx/jit: kernel.py's target machines and
pipeline, the runtime library's allocation lookup (rtlib.py), launchgen.py's scaffolding, codegen.py's register
initialisation): kept small, and the results still the interpreter's."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from harness import ENGINE, Dev

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx import load_module
from gpushim.ptx.jit import kernel as jit_kernel
from gpushim.ptx.jit import rtlib
from gpushim.ptx.jit.codegen import generate

EMPTY = """
.version 7.0
.target sm_75
.address_size 64
.visible .entry empty()
{
	ret;
}
"""

# %r2 is written only by threads below n (a predicated mov), and %r4 is summed into before any write: both read
# the interpreter's initial zero (compiler.py: reg_init) on some path
READ_FIRST = """
.version 7.0
.target sm_75
.address_size 64
.visible .entry readFirst(.param .u64 out, .param .u32 n)
{
	.reg .pred %p<3>;
	.reg .b32 %r<6>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	ld.param.u32 %r1, [n];
	mov.u32 %r3, %tid.x;
	setp.lt.u32 %p1, %r3, %r1;
	@%p1 mov.u32 %r2, 7;
	mov.u32 %r5, 1;
LOOP:
	add.s32 %r4, %r4, %r3;
	add.s32 %r5, %r5, 1;
	setp.lt.u32 %p2, %r5, 4;
	@%p2 bra LOOP;
	add.s32 %r2, %r2, %r4;
	mul.wide.u32 %rd2, %r3, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r2;
	ret;
}
"""


def _tier1(ptx: str):
    m = load_module(ptx)
    name = next(iter(m._compiled))
    return generate(m._mod, m._compiled[name].prog, name, 1)


def test_an_empty_kernels_module_is_small():
    """The scaffolding of a kernel without code: the block loop, one thread loop, the thread function's launch
    constants. 155 IR instructions when this was written (198 before the allocation lookup moved to the
    runtime library, rtlib.py, and the thread loops became one); the bound is loose, it catches scaffolding
    that grows per kernel."""
    g = _tier1(EMPTY)
    assert g.ir_size() <= 180
    text = str(g.m)
    lookup = rtlib.name(("find_alloc",))
    assert f'declare {{i1, i64, i64}} @"{lookup}"' in text  # called, compiled once per process
    assert "define" not in text.split(f'@"{lookup}"')[0].rsplit("\n", 1)[-1]
    assert "define internal i32 @\"run_exact\"" in text and "alwaysinline" in text.split('@"run_exact"')[1][:80]


def test_only_registers_read_before_written_get_their_zero():
    g = _tier1(READ_FIRST)
    assert g.read_first == {"%r2", "%r4"}
    thread = str(g.m).split('@"thread"')[1]
    zeroed = {ln.split("%")[-1].split(".")[0] for ln in thread.splitlines() if ln.strip().startswith("store i32 0")}
    assert zeroed == {'"r_r2', '"r_r4'}  # (the program itself stores no zero)


@pytest.mark.parametrize("engine", ["diff"], indirect=True)
@pytest.mark.parametrize("t1", ["full", "cheap"])
def test_registers_read_before_written_read_zero_as_on_the_interpreter(engine, t1, monkeypatch):
    """diff: both engines from the same memory, bit-identical results (a register left without its zero would
    read whatever LLVM made of an undefined value)."""
    monkeypatch.setenv("GPUSHIM_PTX_JIT_T1", t1)
    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", "off")
    jit_kernel._cache.clear()
    try:
        dev = Dev(READ_FIRST)
        out = dev.array(np.full(64, 0xDEAD, np.uint32))
        dev.launch("readFirst", 1, 64, out, 40)
        t = np.arange(64, dtype=np.uint32)
        assert np.array_equal(dev.get(out, np.uint32, 64), np.where(t < 40, 7, 0) + 3 * t)
        assert dev.mod.jit_kernel("readFirst").t1.codegen == t1
    finally:
        jit_kernel._cache.clear()


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_kernels_compiled_in_several_threads_at_once(engine, monkeypatch):
    """Each compiling thread has its own target machines (kernel._thread_tm); the runtime library's lookup is
    compiled once (rtlib.py) whichever thread comes first. Stores past the allocation fault with the interpreter's
    message, word for word."""
    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", "off")
    jit_kernel._cache.clear()
    devs = [Dev(READ_FIRST.replace("readFirst", f"readFirst{i}")) for i in range(4)]
    outs = [d.empty(4 * 32) for d in devs]
    want = []
    ENGINE["name"] = "interp"
    for i, (dev, out) in enumerate(zip(devs, outs, strict=True)):
        with pytest.raises(CudaError) as e:
            dev.launch(f"readFirst{i}", 1, 64, out, i)  # threads 32.. store past the allocation
        want.append(str(e.value))
    ENGINE["name"] = "jit"
    errors: list[BaseException] = []

    def run(i: int, dev: Dev, out: int) -> None:
        try:
            dev.launch(f"readFirst{i}", 1, 32, out, i)
            t = np.arange(32, dtype=np.uint32)
            assert np.array_equal(dev.get(out, np.uint32, 32), np.where(t < i, 7, 0) + 3 * t)
            with pytest.raises(CudaError) as e:
                dev.launch(f"readFirst{i}", 1, 64, out, i)
            assert e.value.code == Err.ILLEGAL_ADDRESS and str(e.value) == want[i]
            assert dev.mod.jit_kernel(f"readFirst{i}") is not None
        except BaseException as e:  # (re-raised in the test's thread)
            errors.append(e)

    try:
        pairs = enumerate(zip(devs, outs, strict=True))
        threads = [threading.Thread(target=run, args=(i, d, o)) for i, (d, o) in pairs]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors, errors
    finally:
        jit_kernel._cache.clear()
