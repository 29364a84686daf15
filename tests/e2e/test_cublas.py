"""cuBLAS through gpushim's driver: the private-table slots libcublasLt calls (TOOLS_TLS slot 2, the context
table's slot 4; shim/drv_export_tools.c) compared with the documented calls they stand for, and a real
cublasCreate + cublasSgemm/Dgemm program (tests/programs/cublas/cublas_gemm.cu) checked against a host GEMM.

libcublas is not part of the toolkit on every machine: the program is built here against libcublas.so.13
and cublas_v2.h from $GPUSHIM_CUBLAS_HOME (a directory with include/ and lib/), the toolkit, the
nvidia-cublas / nvidia-cu13 wheel of this Python or of GPUSHIM_TORCH_PYTHON's; without one the gemm test
skips saying so.

On the emulator: cuBLAS 13.1 runs gemms of at most 16 columns with its gemmSN kernel, which carries PTX: those
give the right answer there. Its other gemm kernels (cutlass_80_*, sm90_xmma_*) are sm_90 cubins without PTX, so
those gemms must fail with cuBLAS's error status and gpushim's message naming the kernel and saying why (no
PTX). On a GPU (cuda backend) every result must match the host GEMM."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import BACKEND, CUDA_HOME, CUDA_LIB, NVCC, ROOT, Server

SOURCE = ROOT / "tests" / "programs" / "cublas" / "cublas_gemm.cu"


def kv(out: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def _candidates() -> Iterator[Path]:
    if os.environ.get("GPUSHIM_CUBLAS_HOME"):
        yield Path(os.environ["GPUSHIM_CUBLAS_HOME"])
    yield CUDA_HOME
    pythons = [os.environ.get("GPUSHIM_TORCH_PYTHON", ""), sys.executable]
    for py in filter(None, pythons):
        try:
            out = subprocess.run([py, "-c", "import nvidia, sys; print('\\n'.join(nvidia.__path__))"],
                                 capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        for base in out.split():
            yield Path(base) / "cu13"
            yield Path(base) / "cublas"


def find_cublas() -> tuple[Path, Path] | None:
    """(include dir, lib dir) of a CUDA 13 cuBLAS, or None."""
    for home in _candidates():
        for lib in (home / "lib64", home / "lib"):
            if (lib / "libcublas.so.13").exists() and (home / "include" / "cublas_v2.h").exists():
                return home / "include", lib
    return None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, built: Path) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("cublas"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def gemm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    found = find_cublas()
    if not found:
        pytest.skip("no CUDA 13 libcublas.so.13 + cublas_v2.h (toolkit, nvidia-cublas/nvidia-cu13 wheel, or "
                    "GPUSHIM_CUBLAS_HOME)")
    inc, lib = found
    out = tmp_path_factory.mktemp("cublas_bin") / "cublas_gemm"
    subprocess.run([str(NVCC), "-std=c++17", "-cudart", "shared", f"-I{inc}", "-o", str(out), str(SOURCE),
                    f"-L{lib}", "-l:libcublas.so.13", "-Xlinker", f"-rpath,{lib}", "-Xlinker",
                    f"-rpath,{CUDA_LIB}"], check=True, capture_output=True, timeout=300)
    return out


def test_context_slots_agree_with_documented_calls(server: Server) -> None:
    r = server.run("drv_export_tools")
    assert r.returncode == 0, r.stderr + r.stdout
    v = kv(r.stdout)
    assert v["context_info.size"] == "760"  # a size header and 94 slots, as the real driver's table
    assert v["current_before"] == "null"
    # slots cuBLAS has not been seen to call are refused with an error naming table and slot, not a crash
    assert v["context_info.slot51"] == "801"
    assert "CONTEXT_INFO slot 51 is not supported by gpushim" in r.stderr


def run_gemm(server: Server, gemm: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(gemm), *args], env=server.env(LD_LIBRARY_PATH=str(ROOT / "gpushim/lib/driver")),
                          capture_output=True, text=True, timeout=600)


# (what, M N K, runs on the emulator): cuBLAS 13.1 answers a gemm with at most 16 columns with its gemmSN kernel,
# which carries PTX, so it runs on the emulator; larger ones and every dgemm go to cutlass/xmma kernels that are
# sm_90 cubins only.
CASES = [("sgemm", "37 8 45", True), ("sgemm", "37 29 45", False), ("dgemm", "37 29 45", False)]


@pytest.mark.parametrize(("which", "mnk", "runs"), CASES, ids=[f"{w}-{m.replace(' ', 'x')}" for w, m, _ in CASES])
def test_cublas_gemm(server: Server, gemm: Path, which: str, mnk: str, runs: bool) -> None:
    r = run_gemm(server, gemm, which[0], *mnk.split())
    assert "handle ok" in r.stdout, r.stdout + r.stderr[-3000:]
    # libcublasLt's questions to the driver are answered: no table or slot it needs is refused
    assert "TOOLS_TLS slot 2 is not supported" not in r.stderr
    assert "gpushim offers no such table" not in r.stderr
    if BACKEND != "emulator" or runs:
        # the result matches the host GEMM (checked by the program)
        assert r.returncode == 0, r.stdout + r.stderr[-3000:]
        assert f"{which} ok" in r.stdout
    else:
        # cuBLAS's kernels for it are sm_90 cubins only: a clear refusal naming the kernel, and cuBLAS reports
        # the failure (its status, not wrong numbers)
        assert r.returncode == 2, r.stdout + r.stderr[-3000:]
        assert f"cublas{which.capitalize()}" in r.stdout and "cublas status" in r.stdout
        assert "the binary carries no PTX (only cubins for sm_90)" in r.stderr
        # the image is refused when cuBLAS loads it (CUDA_ERROR_NO_BINARY_FOR_GPU), naming its gemm kernels
        assert any("carries no PTX" in ln and "gemm" in ln for ln in r.stderr.splitlines()), r.stderr[-3000:]
        assert f"{which} ok" not in r.stdout
