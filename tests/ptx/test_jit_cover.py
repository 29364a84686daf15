"""Instruction families of the compiling engine (gpushim/ptx/jit/ops_timer.py, ...; kernels in
kernels/jitcover.cu) against the interpreter and the PTX ISA's definitions."""

from __future__ import annotations

import time

import numpy as np
import pytest
from harness import ENGINE, Dev, compile_ptx

from gpushim.ptx.jit import kernel as jit_kernel


@pytest.fixture
def tiered(monkeypatch):
    """a Dev of jitcover.cu whose kernels compile with tier 2 now or not at all ("off": tier 1 runs them)"""

    def dev(tier2: str) -> Dev:
        monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", tier2)
        jit_kernel._cache.clear()  # the policy applies when a kernel is compiled
        return Dev(compile_ptx("jitcover"))

    yield dev
    jit_kernel._cache.clear()


def _check_tier(dev: Dev, kernel: str, tier2: str) -> None:
    jk = dev.mod.jit_kernel(kernel)
    assert jk is not None, kernel
    assert (jk.tier2_runs > 0) == (tier2 == "now"), (kernel, tier2)


@pytest.mark.parametrize("tier2", ["now", "off"])
@pytest.mark.parametrize("engine", ["jit"], indirect=True)  # runs both engines itself
def test_timers_count_as_the_interpreters_do(engine, tier2, tiered):
    """PTX ISA, special registers %clock/%clock_hi/%clock64 (a cycle counter; %clock is its low 32 bits,
    %clock_hi the high ones) and %globaltimer(_lo/_hi) (ns). Here the clock counts 1.5 GHz of perf_counter_ns
    and strictly increases (gpushim/ptx/state.py clock_now), the global timer is time.time_ns(): both engines
    give values inside the launch's interval in those units, in increasing order within each thread."""
    dev = tiered(tier2)
    nb, tpb = 4, 96
    n = nb * tpb
    slack = 10**6  # cycles: the strict increase may run ahead of the clock by one per read
    for eng in ("interp", "jit"):
        ENGINE["name"] = eng
        po = dev.empty(64 * n)
        c_lo, t_lo = int(time.perf_counter_ns() * 1.5), time.time_ns()
        dev.launch("timers", nb, tpb, po)
        c_hi, t_hi = int(time.perf_counter_ns() * 1.5) + slack, time.time_ns() + 256
        o = dev.get(po, np.uint64, 8 * n).reshape(n, 8).astype(object)
        c0, lo, hi, g0, glo, ghi, c1 = (o[:, k] for k in range(7))
        assert all(c_lo <= a < b <= c_hi for a, b in zip(c0, c1, strict=True)), eng
        assert all(0 <= (x - a) % 2**32 < slack for x, a in zip(lo, c0, strict=True)), eng  # %clock: low bits
        assert all(a >> 32 <= h <= b >> 32 for h, a, b in zip(hi, c0, c1, strict=True)), eng
        assert all(t_lo <= g <= t_hi for g in g0), eng
        assert all(t_lo >> 32 <= h <= t_hi >> 32 for h in ghi), eng
        assert all(0 <= (x - g) % 2**32 <= t_hi - t_lo for x, g in zip(glo, g0, strict=True)), eng
    _check_tier(dev, "timers", tier2)
