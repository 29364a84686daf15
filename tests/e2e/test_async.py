"""sm_90 asynchronous features end to end (tests/programs/async_barrier.cu, built for sm_90): CUB's merge
sort (griddepcontrol in its kernels), programmatic dependent launch through cudaLaunchKernelEx, and
cuda::barrier / cuda::memcpy_async / cuda::pipeline (mbarrier, cp.async)."""

from __future__ import annotations

from .conftest import emulator_only, kv


@emulator_only
def test_merge_sort_pdl_barrier_pipeline(server):
    r = server.run("async_barrier")
    assert r.returncode == 0, r.stdout + r.stderr
    v = kv(r.stdout)
    assert v["merge_sort_ok"] == "1"
    assert v["pdl_errors"] == "0"
    assert v["null_attrs"] == "1"  # cudaErrorInvalidValue: numAttrs > 0 with no attribute array
    assert v["barrier_errors"] == "0"
    assert v["pipeline_errors"] == "0"
