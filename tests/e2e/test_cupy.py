"""CuPy (cupy-cuda13x from PyPI, its CUDA runtime linked statically into its extension modules) runs on the
emulator with nothing but `gpushim run` (issue 13): elementwise kernels, reductions, cupy.asnumpy, a user
RawKernel and an ElementwiseKernel, checked against numpy. On the emulator `gpushim run` asks CuPy for PTX
(CUPY_COMPILE_WITH_PTX=1) and leaves CuPy's accelerators alone: CUB's reductions run (its module's only PTX
is compute_120, which the emulator runs on every model)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, emulator_only, kv

pytest.importorskip("cupy", reason="cupy-cuda13x is not installed (pip install cupy-cuda13x)")

SCRIPT = ROOT / "tests" / "programs" / "python" / "cupy_ops.py"


def run_cupy(server, *args: str, timeout: float = 300, path: str = "", **extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, GPUSHIM_SERVER=server.url, **extra)
    if path:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (path, env.get("PYTHONPATH", "")) if p)
    for key in ("CUPY_COMPILE_WITH_PTX", "CUPY_ACCELERATORS", "LD_PRELOAD"):
        env.pop(key, None)
    return subprocess.run([sys.executable, "-m", "gpushim", "run", "--", sys.executable, str(SCRIPT), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@emulator_only
def test_cupy_array_work_matches_numpy(server):
    r = run_cupy(server, "base", "status")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "env 1 None" in r.stdout  # what gpushim run chose for the emulator: PTX, CuPy's own accelerators
    v = kv(r.stdout)
    # CuPy connects (cuInit, cuDriverGetVersion) before its static runtime starts: the runtime's version,
    # learned from its driver look-ups afterwards, reaches the server (gpushim status) all the same
    assert v["status_runtime"] == "13020", v["status_runtime"]  # cupy-cuda13x 14.2 links the 13.2 runtime
    assert "client runtime: CUDA 13020 (learned after the handshake" in server.log.read_text()
    assert v["asnumpy"] == "True" and v["elementwise"] == "True"
    assert v["sum"] == "499500.0 499500.0"
    assert v["max_mean"] == "999.0 499.5"
    assert v["axis_sum"] == "[6.0, 22.0, 38.0]"
    assert v["argmax"] == "1"
    assert v["rawkernel"] == "True" and v["elementwise_kernel"] == "True"
    assert r.stdout.strip().endswith("OK")


def cub_launches(server) -> set[str]:
    """CUB kernels the server launched (the server logs every launch at debug level)."""
    return {line.split("detail", 1)[1].split("INS", 1)[0] for line in server.log.read_text().splitlines()
            if " launch _ZN3cub" in line}


@emulator_only
def test_cupy_cub_on_blackwell(make_server):
    """CUB's device-wide reductions and scan (CUPY_ACCELERATORS=cub, CuPy 14's default) on the Blackwell model,
    the device its compute_120 PTX is for: packed 16-bit min/max (min.s16x2, max.u16x2), multi-block
    reductions, argmin/argmax and the decoupled look-back scan, each checked against numpy; Thrust's sort too."""
    server = make_server("--emulate-gpu", "rtxpro6000")
    r = run_cupy(server, "cub", CUPY_ACCELERATORS="cub")
    assert r.returncode == 0, r.stderr + r.stdout
    v = kv(r.stdout)
    assert v["cub_on"] == "True"
    for name in ("sum_f64", "sum_i32", "min_i16", "max_i16", "min_u16", "max_u16", "argmax_f32", "argmin_i64",
                 "cumsum", "thrust_sort"):
        assert v[name].startswith("True"), (name, v[name])
    assert r.stdout.strip().endswith("OK")
    # the answers came from CUB's kernels, not from CuPy falling back to its own
    launched = cub_launches(server)
    assert {k for k in launched if "DeviceReduce" in k} and {k for k in launched if "DeviceScan" in k}, launched
    assert "RTX PRO 6000 Blackwell" in server.log.read_text()


@emulator_only
def test_cupy_kernel_the_emulator_cannot_run_raises(server):
    """A kernel with an instruction the PTX engine lacks (multimem.red) is found like any other; its
    launch fails with cudaErrorNotSupported, which the next synchronising call reports (CuPy raises there),
    naming the kernel and the instruction, instead of leaving output that reads as if the kernel had run.
    The error is not sticky: the next kernel runs."""
    r = run_cupy(server, "unrunnable")
    assert r.returncode == 0, r.stderr + r.stdout
    v = kv(r.stdout)
    assert "unrunnable_result" not in v
    assert v["unrunnable_error"].startswith("CUDARuntimeError cudaErrorNotSupported"), v["unrunnable_error"]
    assert "kernel multicast_add: the emulator cannot run it" in r.stderr and "multimem" in r.stderr
    assert v["after_error"] == "True"


@emulator_only
def test_cupy_random_state_says_why_it_cannot_run(server):
    """cupy.random.RandomState uses cuRAND's host API. cuRAND picks, by the device's compute capability, a fat
    binary holding one sm_XX cubin (its PTX builds serve only devices newer than all its cubins) and loads it
    with cudaLibraryLoadData. The emulator runs PTX, so the load fails (CUDA_ERROR_NO_BINARY_FOR_GPU, as
    cuModuleLoadData documents for an image with no code for the device), stderr names the kernel, and CuPy
    raises CURANDError rather than returning numbers no kernel made."""
    r = run_cupy(server, "randomstate")
    assert r.returncode == 0, r.stderr + r.stdout
    v = kv(r.stdout)
    assert v["randomstate_error"] == "CURANDError CURAND_STATUS_INITIALIZATION_FAILED", v
    assert "the binary carries no PTX (only cubins for sm_90)" in r.stderr
    assert "include pseudo_random_sequence_generator" in r.stderr


@emulator_only
@pytest.mark.skipif(not os.environ.get("GPUSHIM_SLOW_TESTS"), reason="about 90 s on the emulator (every generator "
                    "state runs curand_init's skip-ahead on the CPU); set GPUSHIM_SLOW_TESTS=1")
def test_cupy_random_numbers(server):
    r = run_cupy(server, "base", "random", timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    assert kv(r.stdout)["random"] == "True"


CUPY12 = os.environ.get("GPUSHIM_CUPY12", "")


@emulator_only
@pytest.mark.skipif(not (CUPY12 and Path(CUPY12, "cupy").is_dir()),
                    reason="set GPUSHIM_CUPY12 to a directory holding cupy-cuda12x (pip install --target DIR "
                    "cupy-cuda12x 'nvidia-cuda-nvrtc-cu12==12.*'; 580 MB) to check the CUDA 12.9 static runtime")
def test_cupy_cuda12x_static_runtime_12_9(server):
    """The CUDA 12.9 static runtime inside cupy-cuda12x asks for the same tables and checks the keyed hash."""
    r = run_cupy(server, path=CUPY12, GPUSHIM_LOG="2")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "INTEGRITY_CHECK(12092)" in r.stderr
    v = kv(r.stdout)
    assert v["sum"] == "499500.0 499500.0" and v["rawkernel"] == "True"
