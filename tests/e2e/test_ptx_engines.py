"""Differential test of the two PTX engines on the e2e programs' kernels: a server with GPUSHIM_PTX_ENGINE=diff
runs every launch of a kernel the JIT compiles on the interpreter and on the JIT from the same device memory and
fails the launch unless memory and outcome are identical (gpushim/ptx/jit/diff.py). The programs must then
pass their own checks, and the server log must show compared launches and no difference."""

from __future__ import annotations

import subprocess

import pytest

from .conftest import BACKEND, ROOT, Server, kv
from .test_kernels import check_kernel_program, nvcc

pytestmark = pytest.mark.skipif(BACKEND != "emulator", reason="compares the emulator's two PTX engines")
SRC = ROOT / "tests" / "programs" / "kernels"


@pytest.fixture(params=["hot", "now"])
def diff_server(request, tmp_path, built, monkeypatch):
    monkeypatch.setenv("GPUSHIM_PTX_ENGINE", "diff")  # the server process inherits it
    # the JIT's tier 1 (short programs never get hot) or, from each kernel's first launch, tier 2 (check pass,
    # unchecked vectorised code); a fresh disk cache, else tier 2 code stored by an earlier run would be used
    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", request.param)
    monkeypatch.setenv("GPUSHIM_PTX_JIT_CACHE", str(tmp_path / "ptx-jit"))
    s = Server(tmp_path)
    yield s
    s.stop()


def test_engines_agree_on_e2e_programs(diff_server, tmp_path):
    main = tmp_path / "main"
    nvcc(main, str(SRC / "main.cu"), str(SRC / "tu2.cu"))
    fault = tmp_path / "fault"
    nvcc(fault, str(SRC / "fault.cu"))
    r = subprocess.run([str(main)], env=diff_server.env(), capture_output=True, text=True, timeout=300)
    check_kernel_program(r)
    for prog in ("misc", "streams", "memory", "graphs"):
        r = diff_server.run(prog)
        assert r.returncode == 0, (prog, r.stdout, r.stderr)
    # an out-of-bounds store: both engines fault with the same error, which the program sees
    r = subprocess.run([str(fault), "oob"], env=diff_server.env(), capture_output=True, text=True, timeout=120)
    assert "cudaErrorIllegalAddress" in r.stdout, r.stdout + r.stderr
    log = diff_server.log.read_text()
    assert "PTX engines differ" not in log
    agreed = {line.rsplit(" ", 1)[1] for line in log.splitlines() if "PTX engines agree on kernel" in line}
    assert len(agreed) >= 5, sorted(agreed)


def _check_warp_reduce(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 0, r.stdout + r.stderr
    v = kv(r.stdout)
    assert v["sum"] == v["sum_expected"] and v["positives"] == v["positives_expected"], r.stdout
    assert v["ballot_mismatch"] == "0" and v["warps_all"] == v["warps_all_expected"] != "0", r.stdout


def test_engines_agree_on_warp_collectives(diff_server):
    """tests/programs/warp_reduce.cu: a __shfl_down_sync block sum, __ballot_sync / __reduce_add_sync /
    __all_sync over the live lanes of a partial last warp. Both kernels run on the JIT (warp collectives,
    gpushim/ptx/jit/ops_warp.py) and on the interpreter, with identical memory afterwards."""
    _check_warp_reduce(diff_server.run("warp_reduce", timeout=300))
    log = diff_server.log.read_text()
    assert "PTX engines differ" not in log
    for kernel in ("block_sum", "count_positive"):
        assert f"PTX engines agree on kernel {kernel}" in log, log[-3000:]


def test_warp_collectives_run_on_the_jit(server):
    """The default engine compiles the warp-collective kernels: the server's debug log names each compile and
    no fallback to the interpreter."""
    _check_warp_reduce(server.run("warp_reduce", timeout=300))
    log = server.log.read_text()
    for kernel in ("block_sum", "count_positive"):
        assert f"compiled {kernel} in" in log and f"PTX kernel {kernel} runs on the interpreter" not in log, log[-3000:]


def test_printf_and_assert_kernels_run_on_the_jit(tmp_path, built, monkeypatch):
    """kernels/main.cu's `hello` (device printf) and fault.cu's `asserter` (a failing assert) run compiled
    (gpushim/ptx/jit/ops_sys.py, hostcall.py): each is compiled at its first launch (tier 1 "sync": no
    interpreter meanwhile) and the server logs no fallback for them; the programs see the same output."""
    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER1", "sync")
    monkeypatch.setenv("GPUSHIM_PTX_JIT_CACHE", str(tmp_path / "ptx-jit"))
    s = Server(tmp_path)
    try:
        main, fault = tmp_path / "main", tmp_path / "fault"
        nvcc(main, str(SRC / "main.cu"), str(SRC / "tu2.cu"))
        nvcc(fault, str(SRC / "fault.cu"))
        r = subprocess.run([str(main)], env=s.env(), capture_output=True, text=True, timeout=300)
        check_kernel_program(r)
        hello = [ln for ln in r.stdout.splitlines() if ln.startswith("hello from")]
        assert sorted(hello) == sorted(f"hello from block {b} thread {t} tag 7" for b in (0, 1) for t in (0, 1))
        r = subprocess.run([str(fault), "assert"], env=s.env(), capture_output=True, text=True, timeout=120)
        v = kv(r.stdout)
        assert v["sync"] == v["sticky"] == "cudaErrorAssert", r.stdout + r.stderr
        assert "Assertion `v == 42` failed" in r.stdout + r.stderr
        log = s.log.read_text()
        for kernel in ("_Z5helloi", "_Z8asserteri"):
            assert f"compiled {kernel} in" in log, log[-3000:]
            assert f"PTX kernel {kernel} runs on the interpreter" not in log
    finally:
        s.stop()
