"""Empty kernels (every thread's first instruction an unconditional ret or exit) take a fast path in
PtxModule.launch: neither engine starts. Nothing else may change: the launch's configuration and parameter
checks still fail as before, the thread-instructions it reports are those the interpreter counts (one per
thread), and a kernel that only *may* return at once (a guarded ret) still runs."""

from __future__ import annotations

import numpy as np
import pytest

from gpushim.backends.emulator.memory import DeviceMemory
from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx import load_module

PTX = """.version 7.0
.target sm_70
.address_size 64
.visible .entry empty()
{
    ret;
}
.visible .entry emptyUni(.param .u64 p)
{
    ret.uni;
}
.visible .entry exits()
.maxntid 64, 1, 1
{
    exit;
}
.visible .entry deadStore(.param .u64 p)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<2>;
    ret;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, 7;
    st.global.u32 [%rd1], %r1;
}
.visible .entry guarded(.param .u64 p)
{
    .reg .pred %p<2>;
    .reg .b64 %rd<3>;
    .reg .b32 %r<3>;
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 ret;
    ld.param.u64 %rd1, [p];
    mov.u32 %r2, 7;
    st.global.u32 [%rd1], %r2;
    ret;
}
"""


@pytest.fixture
def mod(engine):
    m = load_module(PTX, "sm_70")
    m.engine = engine
    return m


def _launch(m, kernel, grid, block, params=b"", mem=None):
    mem = mem or DeviceMemory(1 << 20)
    return m.launch(kernel, grid, block, 0, params, mem, {}, lambda b: None)


def test_which_kernels_are_empty(mod) -> None:
    # deadStore's store is unreachable: every thread returns first
    assert mod.trivial == {"empty", "emptyUni", "exits", "deadStore"}


@pytest.mark.parametrize("grid,block", [((1, 1, 1), (1, 1, 1)), ((3, 2, 1), (64, 2, 1)), ((70000, 1, 1), (32, 1, 1))])
def test_count_is_the_interpreters(mod, grid, block) -> None:
    fast = _launch(mod, "empty", grid, block)
    threads = int(np.prod(grid)) * int(np.prod(block))
    assert (fast.thread_instructions, fast.blocks) == (threads, int(np.prod(grid)))
    if threads <= 1 << 14:  # the interpreter itself, with the fast path off: the same count
        mod.trivial.discard("empty")
        mod.engine = "interp"
        slow = _launch(mod, "empty", grid, block)
        assert (slow.thread_instructions, slow.blocks) == (fast.thread_instructions, fast.blocks)


def test_checks_still_fail(mod) -> None:
    with pytest.raises(CudaError) as e:  # parameters: emptyUni takes 8 bytes
        _launch(mod, "emptyUni", (1, 1, 1), (1, 1, 1), b"\0" * 16)
    assert e.value.code == Err.INVALID_VALUE
    with pytest.raises(CudaError) as e:
        _launch(mod, "empty", (1, 1, 1), (2048, 1, 1))
    assert e.value.code == Err.INVALID_CONFIGURATION
    with pytest.raises(CudaError) as e:  # .maxntid 64
        _launch(mod, "exits", (1, 1, 1), (65, 1, 1))
    assert e.value.code == Err.LAUNCH_OUT_OF_RESOURCES
    # and the same configurations, once refused, are refused again (no cached plan lets them through)
    with pytest.raises(CudaError):
        _launch(mod, "exits", (1, 1, 1), (65, 1, 1))
    assert _launch(mod, "exits", (1, 1, 1), (64, 1, 1)).thread_instructions == 64


def test_unreachable_store_and_guarded_return(mod) -> None:
    mem = DeviceMemory(1 << 20)
    p = mem.alloc(4)
    mem.fill(p, 0, 4)
    _launch(mod, "deadStore", (4, 1, 1), (32, 1, 1), p.to_bytes(8, "little"), mem)
    assert bytes(mem.read(p, 4)) == b"\0\0\0\0"
    # a guarded ret is not an empty kernel: thread 0 goes on and stores
    assert "guarded" not in mod.trivial
    _launch(mod, "guarded", (1, 1, 1), (32, 1, 1), p.to_bytes(8, "little"), mem)
    assert int.from_bytes(bytes(mem.read(p, 4)), "little") == 7
