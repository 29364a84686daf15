"""PyTorch (the CUDA 13 wheel) under the shim against a real server: torch.cuda.is_available(), device
properties, tensor copies to and from the device checked on the host, the caching allocator on the driver's
virtual memory management (expandable segments), and on the emulator the refusal of torch's kernels (they
carry only cubins, no PTX) with a message naming the kernel; on a GPU (`make gpu-check`, cuda backend)
add, sum and matmul.

torch is not in the test extra: the wheel and its nvidia-* dependencies take about 5.2 GB and 3 minutes to
install. The tests use the Python of GPUSHIM_TORCH_PYTHON (e.g. a venv made with --system-site-packages),
else this interpreter when it has torch, else they skip saying so."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import BACKEND, ROOT, SHIM, Server, emulator_only

SCRIPT = ROOT / "tests" / "programs" / "python" / "drv_torch.py"
DRIVER_DIR = SHIM.parent / "driver"
MODE = "emulator" if BACKEND == "emulator" else "gpu"


def _torch_python() -> str:
    py = os.environ.get("GPUSHIM_TORCH_PYTHON")
    if py:
        return py
    if importlib.util.find_spec("torch") is not None:
        return sys.executable
    pytest.skip("torch is not installed (not in the test extra: the CUDA 13 wheel is about 5.2 GB); "
                "pip install torch, or set GPUSHIM_TORCH_PYTHON to a Python that has it")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, built: Path) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("torch"))
    yield s
    s.stop()


def run_torch(server: Server, *args: str, **env: str) -> subprocess.CompletedProcess:
    py = _torch_python()
    p = subprocess.run([py, str(SCRIPT), MODE, *args], capture_output=True, text=True, timeout=600,
                       env=server.env(LD_LIBRARY_PATH=str(DRIVER_DIR), **env))
    assert p.returncode == 0, f"drv_torch.py {MODE} {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n" \
                              f"{p.stderr[-4000:]}"
    return p


def test_torch_devices_copies_and_kernels(server: Server) -> None:
    p = run_torch(server)
    assert "copies ok" in p.stdout and "cublas handle ok" in p.stdout
    if BACKEND == "emulator":
        # the emulated GPU's model, as gpushim serve presents it (--emulate-gpu h100 by default)
        assert "device NVIDIA H100 80GB HBM3 cc 9.0" in p.stdout and "132 SMs" in p.stdout
        # torch raises cudaErrorNoKernelImageForDevice; the shim prints why, naming the kernel
        assert "kernel refused: CUDA error: no kernel image is available" in p.stdout
        reason = next(ln for ln in p.stderr.splitlines() if "carries no PTX" in ln)
        assert "sm_90" in reason and "the emulator runs PTX" in reason
        refused = next(ln for ln in p.stderr.splitlines() if "cannot run: the server refused its module" in ln)
        assert "vectorized_elementwise_kernel" in refused and "CUDAFunctorOnSelf_add" in refused
        # torch.mm: a small product runs on cuBLAS's gemmSN kernel (it has PTX); larger ones' gemm kernels are
        # refused the same way, and cuBLAS reports it (no private-table slot refused)
        assert "small matmul ok" in p.stdout
        assert "matmul refused: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED" in p.stdout
        assert any("carries no PTX" in ln and "gemm" in ln for ln in p.stderr.splitlines())
        assert "is not supported by gpushim" not in p.stderr
    else:
        assert "torch kernels ok: add, sum, matmul" in p.stdout


def test_torch_expandable_segments_on_virtual_memory(server: Server) -> None:
    """PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the caching allocator reserves address space and maps
    physical memory into it in 20 MiB segments (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess,
    cuMemUnmap, cuMemRelease). TORCH_CUDA_EXPANDABLE_SEGMENTS_IPC=0: otherwise torch asks NVML whether the
    device has fabric handles, and torch 2.14 calls a null NVML function when the client host has no
    libnvidia-ml.so.1 (as here) — a crash in torch, before gpushim is asked anything."""
    p = run_torch(server, "expandable", PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True",
                  TORCH_CUDA_EXPANDABLE_SEGMENTS_IPC="0")
    assert "copies ok" in p.stdout and "expandable segments ok" in p.stdout


@emulator_only
def test_torch_two_devices_expandable(tmp_path: Path, built: Path) -> None:
    """Two emulated GPUs with expandable segments: each device's allocator reserves and maps its own memory,
    torch grants the other device access to it (cuMemSetAccess, with peer access enabled), and tensors
    copied within and across devices arrive intact."""
    s = Server(tmp_path, "--emulate-devices", "2")
    try:
        p = run_torch(s, "expandable", PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True",
                      TORCH_CUDA_EXPANDABLE_SEGMENTS_IPC="0")
    finally:
        s.stop()
    assert "second device ok" in p.stdout and "expandable segments ok" in p.stdout
