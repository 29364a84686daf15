"""The end-to-end suite against the cuda backend, where a GPU is usable; skipped with the reason otherwise.
(`make gpu-check` runs the same suite and adds the latency and bandwidth table.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpushim.backends.probe import probe_cuda

ROOT = Path(__file__).resolve().parents[2]
USABLE, WHY = probe_cuda()


@pytest.mark.timeout(900)
@pytest.mark.skipif(not USABLE, reason=f"no usable GPU: {WHY}")
@pytest.mark.skipif(os.environ.get("GPUSHIM_TEST_BACKEND") == "cuda",
                    reason="this run already points tests/e2e at the cuda backend")
def test_e2e_suite_on_the_cuda_backend() -> None:
    env = dict(os.environ, GPUSHIM_TEST_BACKEND="cuda")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/e2e"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=880)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
