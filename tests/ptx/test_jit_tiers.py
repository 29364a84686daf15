"""The JIT's two tiers (gpushim/ptx/jit/kernel.py): tier 1 checks every access; tier 2 runs a check pass over
the launch and then code without checks, barrier regions as loops over the threads. Each test compiles its
kernels with the tier it names and compares with the interpreter ("diff": both engines from the same memory,
bit-identical memory and outcome, or the launch fails)."""

from __future__ import annotations

import numpy as np
import pytest
from harness import ENGINE, Dev, compile_ptx

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx.jit import kernel as jit_kernel
from gpushim.ptx.jit import layout


@pytest.fixture
def tiers(monkeypatch):
    def dev(policy: str, name: str = "jittiers") -> Dev:
        monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", policy)
        jit_kernel._cache.clear()  # the policy applies when a kernel is compiled
        return Dev(compile_ptx(name))

    yield dev
    jit_kernel._cache.clear()


def _jk(dev: Dev, kernel: str):
    jk = dev.mod.jit_kernel(kernel)
    assert jk is not None, kernel
    return jk


@pytest.mark.parametrize("engine", ["diff"], indirect=True)
@pytest.mark.parametrize("policy", ["now", "off"])
def test_barrier_regions_match_the_interpreter(tiers, engine, policy, rng):
    dev = tiers(policy)
    data = rng.random(4 * 256, dtype=np.float32)
    p = dev.array(data)
    dev.launch("ring", 4, 256, p, 7)
    jk = _jk(dev, "ring")
    assert jk.unchecked is None  # shared-memory indices from the thread index: it has a check pass
    assert (jk.t2 is not None) == (policy == "now")
    if policy == "now":
        assert jk.tier2_runs == 1 and jk.tier2_declined == 0
    out = dev.empty(4 * 2 * 256)
    for n in (200, 1, 200):  # threads past n exit before the barrier: rounds that are not uniform
        dev.launch("partial", 2, 256, out, n)
    got = dev.get(out, np.float32, 512).reshape(2, 256)[:, :200]
    t = np.arange(200)
    want = np.stack([(t + 1) % 200 * 1.5 + b for b in range(2)]).astype(np.float32)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("engine", ["diff"], indirect=True)
def test_vectorised_kernels_match_the_interpreter(tiers, engine, rng):
    basic, linalg = tiers("now", "basic"), Dev(compile_ptx("linalg"))
    n = 1000  # not a multiple of the vector width: the loops' remainders run too
    x = rng.random(n, dtype=np.float32)
    px, po = basic.array(x), basic.empty(4 * n)
    basic.launch("vectorAdd", 4, 256, px, px, po, n)
    assert np.array_equal(basic.get(po, np.float32, n), x + x)
    m = 48
    a = rng.standard_normal((m, m)).astype(np.float32)
    b = rng.standard_normal((m, m)).astype(np.float32)
    pa, pb, pc = linalg.array(a), linalg.array(b), linalg.empty(4 * m * m)
    linalg.launch("matmul", (m // 16, m // 16), (16, 16), pa, pb, pc, m)
    assert np.allclose(linalg.get(pc, np.float32, m * m).reshape(m, m), a @ b, atol=1e-4)
    for dev, k in ((basic, "vectorAdd"), (linalg, "matmul")):
        assert _jk(dev, k).tier2_runs == 1 and _jk(dev, k).tier2_declined == 0, k


@pytest.mark.parametrize("engine", ["diff"], indirect=True)
def test_one_instruction_over_two_allocations_runs_on_tier_1(tiers, engine):
    dev = tiers("now")
    n = 512
    a, b = np.arange(n, dtype=np.int32), np.arange(n, dtype=np.int32) * -7
    pa, pb, po = dev.array(a), dev.array(b), dev.empty(4 * n)
    dev.launch("eitherArray", n // 128, 128, pa, pb, po, n)
    want = np.where((np.arange(n) // 128) & 1, a, b) * 3 + 1
    assert np.array_equal(dev.get(po, np.int32, n), want)
    jk = _jk(dev, "eitherArray")
    assert jk.tier2_runs == 1 and jk.tier2_declined == 1  # the check pass could not vouch for the loads


@pytest.mark.parametrize("engine", ["diff"], indirect=True)
def test_addresses_read_from_memory_get_no_check_pass(tiers, engine):
    dev = tiers("now")
    n = 300
    idx = (np.arange(n, dtype=np.int32) * 37) % n
    x = np.arange(n, dtype=np.float32) / 3
    pi, px, po = dev.array(idx), dev.array(x), dev.empty(4 * n)
    dev.launch("gatherIdx", 2, 256, pi, px, po, n)
    assert np.array_equal(dev.get(po, np.float32, n), x[idx])
    jk = _jk(dev, "gatherIdx")
    assert jk.unchecked is not None and "address read from memory" in jk.unchecked
    assert jk.t2 is not None and jk.tier2_declined == 0  # tier 2: the exact code, optimised further


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
@pytest.mark.parametrize("policy", ["now", "off"])
def test_fault_found_by_the_check_pass_is_reported_as_the_interpreter(tiers, engine, policy):
    dev = tiers(policy)
    p = dev.empty(4 * 100)
    errs = {}
    for eng in ("interp", "jit"):
        ENGINE["name"] = eng
        with pytest.raises(CudaError) as e:
            dev.launch("tailOob", 1, 128, p, 100)
        errs[eng] = e.value
    assert errs["jit"].code == errs["interp"].code == Err.ILLEGAL_ADDRESS
    assert str(errs["jit"]) == str(errs["interp"])
    assert "thread (100,0,0)" in str(errs["jit"])
    if policy == "now":
        assert _jk(dev, "tailOob").tier2_declined == 1


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
@pytest.mark.parametrize("policy", ["now", "off"])
def test_watchdog_stops_an_endless_barrier_loop(tiers, engine, policy):
    """The loop's every cycle passes a barrier, so its branch has no poll of its own: the rounds poll."""
    dev = tiers(policy)
    dev.mod.watchdog_s = 0.3
    with pytest.raises(CudaError) as e:
        dev.launch("barrierSpin", 2, 128, dev.empty(4 * 128), 5)
    assert e.value.code == Err.LAUNCH_TIMEOUT


def test_hot_kernels_get_tier_2_in_the_background(tiers, monkeypatch):
    monkeypatch.setattr(jit_kernel, "HOT_S", 0.0)  # hot after its first launch
    dev = tiers("hot")
    ENGINE["name"] = "jit"
    data = np.ones(256, np.float32)
    p = dev.array(data)
    dev.launch("ring", 1, 256, p, 3)
    jk = _jk(dev, "ring")
    assert jk.t2_state in ("queued", "ready")
    assert jk.tier2() is not None and jk.t2_state == "ready"  # waits for (or does) the compile
    dev.launch("ring", 1, 256, p, 3)
    assert jk.tier2_runs == 1
    assert np.array_equal(dev.get(p, np.float32, 256), data)  # a constant ring stays constant


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_check_verdict_is_reused_only_while_the_allocations_stay(tiers, engine):
    """Tier 2 skips the check pass of a launch identical to one it passed, until the allocations change."""
    dev = tiers("now")
    p = dev.mem.alloc(4 * 256)
    for _ in range(2):
        dev.launch("tailOob", 1, 256, p, 0)
    (ws,) = [w for pool in _jk(dev, "tailOob")._pools.values() for w in pool]
    assert ws["ctx"][layout.SKIPCHECK] == 1  # the second launch skipped the check pass
    assert np.array_equal(dev.get(p, np.float32, 256), np.arange(256, dtype=np.float32) * 2)
    dev.mem.free(p)
    q = dev.mem.alloc(4 * 100)
    assert q == p  # the same address, so the same parameters: only the allocation is smaller
    errs = {}
    for eng in ("jit", "interp"):
        ENGINE["name"] = eng
        with pytest.raises(CudaError) as e:
            dev.launch("tailOob", 1, 256, q, 0)
        errs[eng] = e.value
    assert str(errs["jit"]) == str(errs["interp"]) and "thread (100,0,0)" in str(errs["jit"])
    jk = _jk(dev, "tailOob")
    assert jk.tier2_runs == 3 and jk.tier2_declined == 1


@pytest.mark.parametrize("engine", ["diff"], indirect=True)
@pytest.mark.parametrize("policy", ["now", "off"])
def test_saturating_add_and_bfind_match_the_interpreter(tiers, engine, policy, rng):
    dev = tiers(policy)
    edges = np.array([0, 1, -1, 2**31 - 1, -(2**31), 2**30, -(2**30) - 1, 12345], np.int64)
    n = 1024
    x = np.concatenate([edges, rng.integers(-(2**31), 2**31, n - len(edges))]).astype(np.int32)
    y = np.concatenate([edges, [2**63 - 1, -(2**63)], rng.integers(-(2**63), 2**63, n - len(edges) - 2)])
    y = y.astype(np.int64)
    px, py, po = dev.array(x), dev.array(y), dev.empty(4 * 8 * n)
    dev.launch("satFind", n // 256, 256, px, py, po, n)  # "diff": bit-identical to the interpreter
    _jk(dev, "satFind")  # compiled by the JIT (not a fallback)
    out = dev.get(po, np.uint32, 8 * n).reshape(n, 8)
    b = np.roll(x, -3).astype(np.int64)
    want_add = np.clip(x.astype(np.int64) + b, -(2**31), 2**31 - 1).astype(np.int32).view(np.uint32)
    assert np.array_equal(out[:, 0], want_add)
    u = x.view(np.uint32).astype(np.uint64)
    pos = np.array([int(v).bit_length() - 1 if v else 0xFFFFFFFF for v in u], np.uint64).astype(np.uint32)
    assert np.array_equal(out[:, 2], pos)  # bfind.u32: the highest set bit, 0xffffffff for 0


@pytest.mark.parametrize("engine", ["diff"], indirect=True)
def test_mul24_matches_the_interpreter(tiers, engine, rng):
    dev = tiers("now")
    edges = np.array([0, 1, -1, 0x7FFFFF, 0x800000, 0xFFFFFF, 2**31 - 1, -(2**31), 0x12345678], np.int64)
    n = 512
    x = np.concatenate([edges, rng.integers(-(2**31), 2**31, n - len(edges))]).astype(np.int32)
    px, po = dev.array(x), dev.empty(4 * 6 * n)
    dev.launch("mul24Ops", n // 256, 256, px, po, n)  # "diff": bit-identical to the interpreter
    _jk(dev, "mul24Ops")  # compiled by the JIT
    out = dev.get(po, np.uint32, 6 * n).reshape(n, 6)
    a24 = (x.astype(np.int64) & 0xFFFFFF) ^ 0x800000
    a24 -= 0x800000  # the low 24 bits, sign-extended
    b24 = np.roll(a24, -5)
    assert np.array_equal(out[:, 0], ((a24 * b24) & 0xFFFFFFFF).astype(np.uint32))  # PTX ISA: mul24.lo


@pytest.mark.parametrize("engine", ["diff"], indirect=True)
def test_constant_shifts_match_the_interpreter(tiers, engine):
    dev = tiers("off")
    x = np.array([0, 1, -1, 2**31 - 1, -(2**31), 0x12345678, -0x1234567, 77] * 32, np.int32)
    n = len(x)
    px, po = dev.array(x), dev.empty(4 * 6 * n)
    dev.launch("constShifts", 1, n, px, po, n)  # "diff": bit-identical to the interpreter
    _jk(dev, "constShifts")
    out = dev.get(po, np.uint32, 6 * n).reshape(n, 6)
    assert not out[:, 0].any() and not out[:, 2].any()  # PTX ISA, shl/shr: amounts past the width give 0
    assert np.array_equal(out[:, 1], np.where(x < 0, 0xFFFFFFFF, 0).astype(np.uint32))  # or the sign


@pytest.mark.parametrize("engine", ["diff"], indirect=True)
def test_prmt_matches_the_interpreter(tiers, engine, rng):
    dev = tiers("off")
    n = 512
    x = rng.integers(0, 2**32, n, dtype=np.uint32)
    px, po = dev.array(x), dev.empty(4 * 8 * n)
    dev.launch("prmtOps", n // 256, 256, px, po, n)  # "diff": bit-identical to the interpreter
    _jk(dev, "prmtOps")  # compiled by the JIT
    out = dev.get(po, np.uint32, 8 * n).reshape(n, 8)
    assert np.array_equal(out[:, 1], x)  # PTX ISA, prmt: selector 0x3210 gives a back
