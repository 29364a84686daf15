"""Shared fixtures: a fat binary built by the real nvcc (sm_75 and sm_80 cubins, compute_75 PTX)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

NVCC = os.environ.get("NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"

SOURCE = r"""
struct S { char c; double d; int i; };
struct __align__(16) V { float x, y, z, w; };
extern "C" __global__ void mixed(char a, double b, S s, int *p, V v, short h) {
    if (p) *p = a + (int)b + s.i + (int)v.w + h;
}
extern "C" __global__ void nothing() {}
template <typename T> __global__ void scale(T *x, T f, unsigned n) { if (threadIdx.x < n) x[threadIdx.x] *= f; }
template __global__ void scale<float>(float *, float, unsigned);
__device__ int counter;
"""


@pytest.fixture(scope="session")
def fatbin(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    if not os.path.exists(NVCC) and shutil.which(NVCC) is None:
        pytest.skip("nvcc not available")
    d: Path = tmp_path_factory.mktemp("params")
    (d / "k.cu").write_text(SOURCE)
    cmd = [NVCC, "-fatbin", "-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_80,code=sm_80",
           "-gencode", "arch=compute_75,code=compute_75", "-o", str(d / "k.fatbin"), str(d / "k.cu")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return (d / "k.fatbin").read_bytes()
