"""Builds the small CUDA programs the fatbin tests inspect, once per session, in parallel."""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

SRC = Path(__file__).parent / "src"
NVCC = os.environ.get("NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
MULTI = ["-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_90,code=sm_90",
         "-gencode", "arch=compute_90,code=compute_90"]

# name -> (source, output file name, extra nvcc flags)
BUILDS: dict[str, tuple[str, str, list[str]]] = {
    "default": ("kernels.cu", "default", []),
    "none": ("kernels.cu", "none", ["-compress-mode=none"]),
    "no_compress": ("kernels.cu", "no_compress.o", ["-c", "--no-compress"]),
    "zstd_all": ("kernels.cu", "zstd_all", ["-Xfatbin", "-compress-all"]),
    "lz": ("kernels.cu", "lz", ["-compress-mode=speed"]),
    "lz_all": ("kernels.cu", "lz_all", ["-compress-mode=speed", "-Xfatbin", "-compress-all"]),
    "multi_lz": ("kernels.cu", "multi_lz", [*MULTI, "-compress-mode=speed", "-Xfatbin", "-compress-all"]),
    "multi_none": ("kernels.cu", "multi_none", [*MULTI, "-compress-mode=none"]),
    "rdc": ("kernels.cu", "rdc", ["-rdc=true"]),
    "cudart_shared": ("kernels.cu", "cudart_shared", ["-cudart", "shared"]),
    "shared_lib": ("lib.cu", "libscale.so", ["-shared", "-Xcompiler", "-fPIC", "-cudart", "shared"]),
    "features_ptx": ("features.cu", "features.ptx", ["-ptx", "-arch=sm_90"]),
}


def _build(outdir: Path, name: str) -> tuple[str, Path]:
    src, out, flags = BUILDS[name]
    target = outdir / out
    cmd = [NVCC, *flags, "-o", str(target), str(SRC / src)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return name, target


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """name -> path of every program in BUILDS (skips the tests when nvcc is not available)."""
    if not os.path.exists(NVCC) and shutil.which(NVCC) is None:
        pytest.skip("nvcc not available")
    outdir = tmp_path_factory.mktemp("cuda_builds")
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(pool.map(lambda n: _build(outdir, n), BUILDS))
