"""The compiling engine (gpushim/ptx/jit) beside the interpreter: same faults with the same messages, fallback
of unsupported kernels, the compile cache, the engine switch. (Every other test in tests/ptx also runs on both
engines: conftest.py's engine fixture.)"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from harness import ENGINE, Dev, compile_ptx

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx.jit import engine


@pytest.fixture(scope="module")
def misc():
    return Dev(compile_ptx("misc"))


def _fault(dev: Dev, eng: str, *launch) -> CudaError:
    ENGINE["name"] = eng
    with pytest.raises(CudaError) as e:
        dev.launch(*launch)
    return e.value


@pytest.mark.parametrize("engine", ["jit"], indirect=True)  # this test compares the two engines itself
def test_faults_match_the_interpreter(misc, engine):
    assert misc.mod.jit_kernel("oob") is not None and misc.mod.jit_kernel("misaligned") is not None
    p = misc.empty(64)
    for launch, code in (
        (("oob", 1, 16, p, 5), Err.ILLEGAL_ADDRESS),  # threads 4.. store past the 64 bytes (p[t * 5])
        (("oob", 2, 4, 0, 1), Err.ILLEGAL_ADDRESS),  # a null pointer
        (("misaligned", 1, 8, p), Err.MISALIGNED_ADDRESS),
    ):
        ei, ej = _fault(misc, "interp", *launch), _fault(misc, "jit", *launch)
        assert ei.code == ej.code == code
        assert str(ej) == str(ei)  # instruction, line, address, block and thread
    assert "thread (4,0,0)" in str(_fault(misc, "jit", "oob", 1, 16, p, 5))


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_tier1_cheap_code_generator(engine, monkeypatch, rng):
    """Tier 1 compiles kernels of an estimated cost of kernel.CHEAP_COST or more (Codegen.t1_cost: IR
    instructions and basic blocks) with LLVM's -O0 code generator (and the greedy register allocator; their
    thread function outlined; test_jit_stops.py: kernels with stops), smaller ones with the full one
    ($GPUSHIM_PTX_JIT_T1 forces either): the code differs, the results and the fault messages do not."""
    from gpushim.ptx.jit import kernel

    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", "off")  # tier 1 runs every launch below
    monkeypatch.setenv("GPUSHIM_PTX_JIT_T1", "cheap")
    kernel._cache.clear()
    try:
        misc = Dev(compile_ptx("misc"))
        assert misc.mod.jit_kernel("oob").t1.codegen == "cheap"
        p = misc.empty(64)
        for launch in (("oob", 1, 16, p, 5), ("oob", 2, 4, 0, 1), ("misaligned", 1, 8, p)):
            ei, ej = _fault(misc, "interp", *launch), _fault(misc, "jit", *launch)
            assert (ej.code, str(ej)) == (ei.code, str(ei))
        counts = []
        for _ in range(2):  # the same instruction count (kept per thread, added to the launch's at the exit)
            basic = Dev(compile_ptx("basic"))
            n = 1000
            x = np.arange(n, dtype=np.float32)
            px, po = basic.array(x), basic.empty(4 * n)
            counts.append(basic.launch("vectorAdd", 4, 256, px, px, po, n).thread_instructions)
            assert np.array_equal(basic.get(po, np.float32, n), 2 * x)
            monkeypatch.setenv("GPUSHIM_PTX_JIT_T1", "auto")  # the default: by size
            kernel._cache.clear()
        assert counts[0] == counts[1] > 0
        mathlib = Dev(compile_ptx("mathlib"))
        big, small = mathlib.mod.jit_kernel("mathf"), basic.mod.jit_kernel("vectorAdd")
        assert big.t1.outlined and not small.t1.outlined  # (mathf: a call per thread)
        assert (big.t1.codegen, small.t1.codegen) == ("cheap", "full")
        n = 256
        x, y = rng.uniform(-8, 8, n).astype(np.float32), rng.uniform(-3, 3, n).astype(np.float32)
        ENGINE["name"] = "diff"  # both engines; the launch fails unless memory and outcome are bit-identical
        from gpushim.ptx.jit.diff import stats

        compared = stats["compared"]
        mathlib.launch("mathf", n // 128, 128, mathlib.array(x), mathlib.array(y), mathlib.empty(4 * 12 * n), n)
        assert stats["compared"] == compared + 1
    finally:
        kernel._cache.clear()  # (other tests compile these kernels anew, as configured)


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_unsupported_kernels_fall_back_to_the_interpreter(engine, caplog):
    dev = Dev(compile_ptx("jittierup"))
    caplog.set_level(logging.INFO, "gpushim.ptx.jit")
    assert dev.mod.jit_kernel("stampSmid") is None, "%pm0: the JIT leaves it to the interpreter"
    assert any("runs on the interpreter" in r.message and "stampSmid" in r.message for r in caplog.records)
    caplog.clear()
    dev.mod.jit_kernel("stampSmid")
    assert not caplog.records  # logged once per kernel
    out = dev.empty(8 * 2)
    dev.launch("stampSmid", 1, 2, out, 2)  # and it runs there
    assert dev.get(out, np.int64, 2).tolist() == [1, 2]


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_compiled_kernels_are_cached_by_ptx(engine):
    ptx = compile_ptx("basic")
    a, b = Dev(ptx), Dev(ptx)
    ka = a.mod.jit_kernel("vectorAdd")
    assert ka is not None and b.mod.jit_kernel("vectorAdd") is ka
    n = 1000
    x = np.arange(n, dtype=np.float32)
    px, po = b.array(x), b.empty(4 * n)
    st = b.launch("vectorAdd", 4, 256, px, px, po, n)
    assert st.thread_instructions > 0
    assert np.array_equal(b.get(po, np.float32, n), 2 * x)


def test_engine_switch(monkeypatch, caplog):
    for value, want in (("", "auto"), ("jit", "jit"), ("INTERP", "interp"), ("diff", "diff")):
        monkeypatch.setenv("GPUSHIM_PTX_ENGINE", value)
        assert engine() == want
    monkeypatch.setenv("GPUSHIM_PTX_ENGINE", "fast")
    assert engine() == "auto"
    assert "GPUSHIM_PTX_ENGINE=fast" in caplog.text


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_disk_cache(engine, tmp_path, monkeypatch):
    from gpushim.ptx.jit import kernel

    monkeypatch.setenv("GPUSHIM_PTX_JIT_CACHE", str(tmp_path))
    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", "now")  # both tiers on disk
    dev = Dev(compile_ptx("basic"))
    n = 300
    x = np.arange(n, dtype=np.float32)
    px, po = dev.array(x), dev.empty(4 * n)
    for round_ in ("compile", "from disk", "corrupt entry: compile again"):
        kernel._cache.clear()
        if round_.startswith("corrupt"):
            for f in tmp_path.glob("*.o"):
                f.write_bytes(b"junk")
        jk = dev.mod.jit_kernel("vectorAdd")
        assert jk is not None and jk.from_disk == (round_ == "from disk"), round_
        assert jk.t2 is not None and jk.t2.from_disk == (round_ == "from disk"), round_
        dev.mem.fill(po, 0, 4 * n)
        dev.launch("vectorAdd", 2, 256, px, px, po, n)
        assert np.array_equal(dev.get(po, np.float32, n), 2 * x), round_
    kernels = [p for p in tmp_path.iterdir() if not p.name.startswith("rtlib-")]  # (the runtime library's: rtlib.py)
    assert sum(p.suffix == ".o" for p in kernels) == 2 and sum(p.suffix == ".json" for p in kernels) == 2  # tiers 1, 2


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_bit_field_and_select_instructions_match_the_interpreter(engine, rng):
    dev = Dev(compile_ptx("jitops"))
    assert dev.mod.jit_kernel("bitOps") is not None
    n = 4096
    x = rng.integers(0, 2**32, n, dtype=np.uint32)
    y = rng.integers(0, 2**64, n, dtype=np.uint64)
    # positions and lengths: small ones, the type's edges and the 8-bit wrap (PTX uses the low 8 bits)
    pl = rng.choice(np.array([0, 1, 7, 31, 32, 33, 63, 64, 65, 200, 255, 256, 300], np.uint32), (n, 2))
    pl = (pl[:, 0] | (pl[:, 1] << 8)).astype(np.uint32)
    args = dev.array(x), dev.array(y), dev.array(pl)
    outs = {}
    for eng in ("interp", "jit"):
        ENGINE["name"] = eng
        o32, o64 = dev.empty(32 * n), dev.empty(32 * n)
        dev.launch("bitOps", n // 256, 256, *args, o32, o64, n)
        outs[eng] = dev.get(o32, np.uint32, 8 * n), dev.get(o64, np.uint64, 4 * n)
    for k, name in enumerate(("bfe.u32", "bfe.s32", "bfi.b32", "lop3", "sad.s32", "slct.s32", "slct.f32", "copysign")):
        assert np.array_equal(outs["interp"][0][k::8], outs["jit"][0][k::8]), name
    for k, name in enumerate(("bfe.u64", "bfe.s64", "bfi.b64", "sad.u64")):
        assert np.array_equal(outs["interp"][1][k::4], outs["jit"][1][k::4]), name
    # and the shared answer is right where it is simple: bfe.u32 with the field inside the word
    p, ln = (pl & 0xFF).astype(np.uint64), ((pl >> 8) & 0xFF).astype(np.uint64)
    inside = (p + ln <= 32) & (ln < 32)
    want = (x.astype(np.uint64) >> p) & ((np.uint64(1) << ln) - np.uint64(1))
    assert inside.sum() > 100 and np.array_equal(outs["jit"][0][0::8][inside], want[inside].astype(np.uint32))
