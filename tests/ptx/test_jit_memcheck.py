"""Tier 1's checked memory accesses (gpushim/ptx/jit/ops_mem.py): every access at the edges of its space (the
last bytes, one past them, misaligned, below, wrapped around the top of the address space) has the interpreter's
outcome: the same values, or the same fault (code and message: instruction, line, address, block and thread),
with both code generators; and what the checks cost in IR instructions (tier 1's compile time grows with them).

The hot path of a check is one unsigned compare of the offset rotated right by log2(size) against a count of
size-byte elements, which holds exactly for an aligned access within bounds; these cases pin that equivalence."""

from __future__ import annotations

import numpy as np
import pytest
from harness import ENGINE, Dev, compile_ptx

from gpushim.cuda_errors import CudaError, Err

M64 = 1 << 64


def _outcome(dev: Dev, eng: str, kernel: str, threads: int, out: int, *args, shared: int = 0):
    """The values the threads wrote to out, or the fault (code, message)."""
    ENGINE["name"] = eng
    dev.mem.fill(out, 0, 8 * threads)
    try:
        dev.launch(kernel, 1, threads, *args, out, shared=shared)
    except CudaError as e:
        return e.code, str(e)
    return dev.get(out, np.int64, threads).tolist()


@pytest.fixture(params=["full", "cheap", "cheap-no-rtlib"])
def dev(request, monkeypatch):
    """The kernels compiled by tier 1 alone with one code generator (a fresh module: no code of other tests);
    no-rtlib: the checked path's helper (mem_miss) defined in the kernel's module, not the runtime library's."""
    from gpushim.ptx.jit import kernel

    gen, _, rt = request.param.partition("-")
    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", "off")  # tier 1 runs every launch
    monkeypatch.setenv("GPUSHIM_PTX_JIT_T1", gen)
    monkeypatch.setenv("GPUSHIM_PTX_JIT_RTLIB", "off" if rt else "on")
    kernel._cache.clear()
    d = Dev(compile_ptx("memcheck"))
    yield d
    for k in ("globalAt", "twoFromOneBase", "sharedAt", "localAt", "genericAt", "writeAt"):
        jk = d.mod.jit_kernel(k)
        assert jk is not None and jk.t1.codegen == gen and jk.tier2_runs == 0, k
        assert any(n.startswith("gsrt.mem_miss.") for n in jk.t1.meta["rtlib"]) != bool(rt), k
    kernel._cache.clear()


def _same(dev: Dev, kernel: str, threads: int, *args, shared: int = 0, expect=None, diff: bool = False) -> None:
    """The same outcome on the interpreter and the JIT (and, with diff, GPUSHIM_PTX_ENGINE=diff: both engines on
    one launch, comparing the memory they leave too)."""
    out = dev.empty(8 * threads)
    ri = _outcome(dev, "interp", kernel, threads, out, *args, shared=shared)
    rj = _outcome(dev, "jit", kernel, threads, out, *args, shared=shared)
    assert rj == ri, (kernel, args)
    if diff:
        assert _outcome(dev, "diff", kernel, threads, out, *args, shared=shared) == ri, (kernel, args)
    if expect is not None:  # (the case tests what it means to: a fault's code, or values)
        assert (ri[0] if isinstance(ri, tuple) else "ok") == expect, (kernel, args, ri)


ILL, MIS = Err.ILLEGAL_ADDRESS, Err.MISALIGNED_ADDRESS


@pytest.mark.parametrize("engine", ["jit"], indirect=True)  # (compares the two engines itself)
def test_global_accesses_at_the_edges(dev, engine):
    a = dev.array(np.arange(40, dtype=np.uint8) * 3 + 1)  # 40 bytes: not a multiple of 16
    dev.empty(256)  # (something after it)
    for size, off, stride, threads, expect in (
        (8, 32, 0, 1, "ok"),  # the last 8 bytes
        (8, 36, 0, 1, ILL),  # past the end and misaligned: out of bounds first (memspaces.py)
        (8, 28, 0, 1, MIS),  # within, misaligned
        (16, 16, 0, 1, "ok"),
        (16, 32, 0, 1, ILL),  # 2 whole 16-byte elements fit, the third does not
        (16, 8, 0, 1, MIS),
        (2, 38, 0, 1, "ok"),
        (2, 39, 0, 1, ILL),
        (1, 39, 0, 1, "ok"),
        (1, 40, 0, 1, ILL),
        (4, 0, 4, 16, ILL),  # threads 0-9 hit the allocation their predecessors cached; thread 10 is past it
        (8, 0, 8, 8, ILL),  # thread 5
        (4, 2, 4, 4, MIS),
        (8, -8, 0, 1, None),  # below the allocation: whatever is there (the same on both engines)
        (4, -a, 0, 1, ILL),  # the null pointer
    ):
        _same(dev, "globalAt", threads, a, off, stride, size, expect=expect)
    # 2**64 - size .. 2**64 - 1 (the end wraps around to 0): in no allocation, out of bounds before misaligned.
    # (The interpreter's check once computed the end in uint64 and let them pass, reading garbage.)
    out = dev.empty(8)
    for size, top in ((8, 8), (8, 4), (16, 8), (16, 16), (4, 4), (1, 1)):
        _same(dev, "globalAt", 1, a, -a - top, 0, size, expect=ILL, diff=True)
        e = _outcome(dev, "interp", "globalAt", 1, out, a, -a - top, 0, size)
        assert f"{size} bytes out of bounds at {M64 - top:#x} by block (0,0,0) thread (0,0,0)" in e[1]
    b = dev.array(np.arange(64, dtype=np.uint8))
    for threads, expect in ((2, "ok"), (3, None)):  # thread t in allocation a + t * (b - a): a cache miss each
        _same(dev, "globalAt", threads, a, 4, b - a, 4, expect=expect)


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_sites_sharing_an_allocation_cache(dev, engine):
    """q[0] and q[5] (one base register, one cache): thread 3's q[0] hits what thread 2 cached, its q[5] does
    not (p holds 8 ints) and faults."""
    p = dev.array(np.arange(8, dtype=np.int32))
    _same(dev, "twoFromOneBase", 3, p, expect="ok")
    _same(dev, "twoFromOneBase", 8, p, expect=ILL)


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_shared_local_and_generic_accesses_at_the_edges(dev, engine):
    for size, off, stride, threads, expect in (  # 20 bytes of dynamic shared memory
        (8, 8, 0, 1, "ok"),
        (8, 16, 0, 1, ILL),
        (8, 12, 0, 1, MIS),  # within (12 + 8 = 20), misaligned
        (16, 0, 0, 1, "ok"),
        (16, 16, 0, 1, ILL),
        (4, 16, 0, 1, "ok"),
        (2, 18, 0, 1, "ok"),
        (4, 0, 4, 8, ILL),  # thread 5
        (4, -4, 0, 1, ILL),  # wraps
    ):
        _same(dev, "sharedAt", threads, off, stride, size, 20, shared=20, expect=expect)
    for size, off, stride, threads, expect in (  # a 48-byte local array (the frame may hold more)
        (16, 32, 0, 1, "ok"),
        (8, 4, 0, 1, MIS),
        (4, 0, 4, 12, "ok"),
        (4, -4, 0, 1, ILL),
        (16, 1 << 20, 0, 1, ILL),
        (8, 40, 1 << 16, 2, ILL),
    ):
        _same(dev, "localAt", threads, off, stride, size, expect=expect)
    g = dev.array(np.arange(40, dtype=np.uint8))
    for which, size, off, threads, expect in (  # 64 bytes of static shared memory, or the 40 bytes of g
        (1, 4, 56, 2, "ok"),
        (1, 4, 60, 2, ILL),  # thread 1 at 64
        (1, 16, 48, 1, "ok"),
        (1, 8, 4, 1, MIS),
        (0, 4, 32, 2, "ok"),
        (0, 4, 36, 2, ILL),
        (0, 8, 4, 1, MIS),
    ):
        _same(dev, "genericAt", threads, g, which, off, size, expect=expect)


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_accesses_near_the_top_of_the_address_space_and_of_each_window(dev, engine):
    """The same fault on both engines (code, message: the thread and its address) where the end of an access
    wraps around: 2**64 in global memory (loads, stores, vector stores, atomics), 2**63 for 64-bit local and
    shared addresses (the interpreter's int64 offset + size wrapped: it named thread 0 at its in-bounds
    address), and the top of each generic window (shared, local, kernel parameters)."""
    from gpushim.ptx.operands import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, WINDOW_SIZE

    a = dev.array(np.arange(64, dtype=np.uint8))
    for size, op in ((1, 0), (4, 0), (8, 0), (16, 0), (4, 1), (8, 1)):
        _same(dev, "writeAt", 1, a, -a - size, 0, size, op, expect=ILL, diff=True)
        _same(dev, "writeAt", 2, a, 0, M64 - a - size, size, op, expect=ILL, diff=True)  # thread 1
        if not op:  # (the last bytes: fine; an atomic's old value differs between the launches)
            _same(dev, "writeAt", 2, a, 64 - size, 0, size, op, expect="ok", diff=True)
    for size in (4, 8, 16):
        _same(dev, "localAt", 2, 0, (1 << 63) - size, size, expect=ILL, diff=True)  # thread 1
        _same(dev, "localAt", 1, (1 << 63) - size, 0, size, expect=ILL)
        _same(dev, "sharedAt", 2, 0, (1 << 63) - size, size, 20, shared=20, expect=ILL, diff=True)
        for w in (SHARED_WINDOW, LOCAL_WINDOW, PARAM_WINDOW):
            _same(dev, "genericAt", 1, a, 0, (w + WINDOW_SIZE - size - a) % M64, size, expect=ILL, diff=True)
        _same(dev, "genericAt", 1, a, 0, (M64 - size - a) % M64, size, expect=ILL, diff=True)


def test_device_memory_checks_do_not_wrap_around(engine):
    """DeviceMemory.check_addresses and PeerView's (peer access): an access whose end passes 2**64 is outside
    every allocation (the allocation with the highest start below it must not take it)."""
    if engine != "interp":  # (nothing launched: once is enough)
        pytest.skip("engine-independent")
    from gpushim.backends.emulator.memory import DEVICE_WINDOW, DeviceMemory
    from gpushim.backends.emulator.peers import PeerSpace, PeerView

    m0 = DeviceMemory(1 << 20)
    m1 = DeviceMemory(1 << 20, base=m0.base + DEVICE_WINDOW)
    space = PeerSpace([m0, m1])
    try:
        p0, p1 = m0.alloc(256), m1.alloc(256)
        view = PeerView(space, m0, [m1])
        for mem, p in ((m0, p0), (view, p0), (view, p1)):
            ok = mem.check_addresses(np.array([p, p + 248], np.uint64), 8)
            assert ok.tolist() == [p - mem.base, p + 248 - mem.base]
            for addr, n in ((M64 - 8, 8), (M64 - 4, 8), (M64 - 1, 1), (M64 - 16, 16), (p + 256, 1), (p + 252, 8)):
                with pytest.raises(CudaError) as e:
                    mem.check_addresses(np.array([p, addr], np.uint64), n)
                assert e.value.code == ILL and f"{n} bytes at {addr:#x}" in str(e.value), (mem, addr, n)
    finally:
        space.close()
        m0.close()
        m1.close()


# -- what the checks cost in IR -------------------------------------------------------------------------------


def _ptx(n: int, kind: str) -> str:
    body = []
    for i in range(n):
        if kind == "global":  # [%rd1+4i]: one base register
            body.append(f"st.global.u32 [%rd1+{4 * i}], %r1;")
        elif kind == "global_regs":  # each address in a register of its own
            body += [f"add.s64 %rd{10 + i}, %rd1, {4 * i};", f"st.global.u32 [%rd{10 + i}], %r1;"]
        elif kind == "shared":
            body.append(f"st.shared.u32 [%r2+{4 * i}], %r1;")
        elif kind == "local":
            body.append(f"st.local.u32 [%rd3+{4 * i}], %r1;")
        else:  # generic
            body.append(f"st.u32 [%rd1+{4 * i}], %r1;")
    lines = "\n".join(body)
    return f""".version 7.0
.target sm_75
.address_size 64
.visible .entry k(.param .u64 p)
{{
.reg .b32 %r<4>;
.reg .b64 %rd<{10 + n}>;
.shared .align 4 .b8 sh[1024];
.local .align 4 .b8 lo[1024];
ld.param.u64 %rd1, [p];
mov.u32 %r1, %tid.x;
mov.u32 %r2, sh;
mov.u64 %rd3, lo;
{lines}
ret;
}}
"""


# IR instructions per store (the store, its address and its checks) at tier 1; before the single-compare checks
# (round 6) they were 51, 52, 20, 19 and 94, now 17, 24, 12, 11 and 38
@pytest.mark.parametrize(("kind", "bound"), [("global", 22), ("global_regs", 30), ("shared", 15), ("local", 15),
                                             ("generic", 48)])  # fmt: skip
def test_ir_instructions_per_checked_access(kind, bound, engine):
    if engine != "interp":  # (nothing launched: once is enough)
        pytest.skip("engine-independent")
    from gpushim.ptx import load_module
    from gpushim.ptx.jit.codegen import generate

    sizes = []
    for n in (8, 40):
        m = load_module(_ptx(n, kind))
        sizes.append(generate(m._mod, m._compiled["k"].prog, "k", 1).ir_size())
    assert (sizes[1] - sizes[0]) / 32 <= bound
