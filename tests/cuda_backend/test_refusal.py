"""`--backend cuda` where no GPU is usable exits at once, non-zero, saying what is missing; `--backend auto`
falls back to the emulator and says why. And CudaBackend built from discovery answers (no GPU needed)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpushim.backends.cuda.backend import CudaBackend, CudaUnavailable, check_bindings_for_driver
from gpushim.backends.probe import probe_cuda
from tests.cuda_backend.test_discovery import GPUS, UUID0, UUID1, FakeNvml, _raw

ROOT = Path(__file__).resolve().parents[2]
USABLE, WHY = probe_cuda()
no_gpu = pytest.mark.skipif(USABLE, reason=f"a GPU is usable here ({WHY}): nothing to refuse")


def gpushim(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpushim", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@no_gpu
def test_serve_backend_cuda_refuses_at_once(tmp_path: Path) -> None:
    t0 = time.monotonic()
    r = gpushim("serve", "--backend", "cuda", "--listen", f"unix://{tmp_path}/s.sock")
    assert r.returncode != 0
    assert time.monotonic() - t0 < 30
    assert "--backend cuda" in r.stderr and WHY in r.stderr, r.stderr
    assert not (tmp_path / "s.sock").exists()


@no_gpu
def test_devices_backend_cuda_refuses_and_auto_falls_back() -> None:
    r = gpushim("devices", "--backend", "cuda")
    assert r.returncode != 0 and WHY in r.stderr
    r = gpushim("devices", "--backend", "auto")
    assert r.returncode == 0
    assert r.stdout.startswith("emulator backend (auto: ") and WHY in r.stdout


def test_bindings_must_fit_the_driver() -> None:
    assert check_bindings_for_driver("12.9.4", 12040) is None
    assert check_bindings_for_driver("12.9.4", 13000) is None
    assert check_bindings_for_driver("13.0.3", 13000) is None
    why = check_bindings_for_driver("13.4.4", 12080)
    assert why and "CUDA 12.8" in why and "cuda-bindings>=12.4,<13" in why
    assert "not installed" in (check_bindings_for_driver(None, 12080) or "")
    assert "CUDA 12 driver" in (check_bindings_for_driver("12.9.4", 11080) or "")


def test_backend_from_discovery_answers() -> None:
    raws = [_raw("h100", 0, UUID1, "0000:3B:00.0"), _raw("h100", 1, UUID0, "0000:1B:00.0")]
    be = CudaBackend(reason="2 GPU(s) on driver 570.124.06", nvml=FakeNvml(GPUS),
                     driver_devices={"driver_version": 12080, "devices": raws})
    assert be.driver_version() == 12080
    assert [d.ordinal for d in be.devices()] == [0, 1]
    assert be.devices()[0].props["multiProcessorCount"] == 132
    assert be.devices()[0].extra["nvml_index"] == 1
    line = be.describe()
    assert line.startswith("cuda backend (2 GPU(s) on driver 570.124.06): 2 x NVIDIA H100 80GB HBM3 (sm_90)")
    assert "driver API 12.8" in line and "MIG enabled on [0]" in line
    with pytest.raises(CudaUnavailable) as ei:
        CudaBackend(nvml=FakeNvml(GPUS), driver_devices={"driver_version": 12080, "devices": []})
    assert "CUDA sees no GPU" in ei.value.message
