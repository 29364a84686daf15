"""adapters/cudadrv: the driver's entry points, regenerated from the toolkit's headers when they are the same
CUDA version, and the version rule cuGetProcAddress relies on."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "adapters" / "cudadrv" / "13.0" / "entry_points.json"
INCLUDE = Path("/usr/local/cuda/include")


def _tool():
    spec = importlib.util.spec_from_file_location("gen_cudadrv", ROOT / "adapters" / "tools" / "gen_cudadrv.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_data_is_what_the_headers_give() -> None:
    cuda_h = INCLUDE / "cuda.h"
    if not cuda_h.exists() or not re.search(r"#define\s+CUDA_VERSION\s+13000\b", cuda_h.read_text()):
        pytest.skip("needs the CUDA 13.0 headers at /usr/local/cuda/include")
    tool = _tool()
    assert tool.dump(tool.entry_points(INCLUDE)) == DATA.read_text()


def test_versions_and_names() -> None:
    d = json.loads(DATA.read_text())
    eps = d["entry_points"]
    assert len(d["exports"]) == 637 and len(eps) == 450  # cuda.h and cudaProfiler.h
    assert eps["cuProfilerStart"]["versions"] == [[4000, "cuProfilerStart"]]
    assert eps["cuMemAlloc"]["versions"] == [[2000, "cuMemAlloc"], [3020, "cuMemAlloc_v2"]]
    assert eps["cuCtxCreate"]["versions"][-1] == [12050, "cuCtxCreate_v4"]
    assert eps["cuMemcpyHtoD"]["per_thread"] == [[7000, "cuMemcpyHtoD_v2_ptds"]]
    assert eps["cuLaunchKernel"]["per_thread"] == [[7000, "cuLaunchKernel_ptsz"]]
    for name, e in eps.items():  # oldest first, every exported name covered exactly once
        versions = [v for v, _ in e["versions"]]
        assert versions == sorted(versions) and len(set(versions)) == len(versions), name
    covered = [n for e in eps.values() for _, n in e["versions"] + e.get("per_thread", [])]
    assert sorted(covered) == sorted(d["exports"])
    codes = {e["name"]: e["code"] for e in d["errors"]}
    assert codes["CUDA_ERROR_NOT_FOUND"] == 500 and codes["CUDA_ERROR_INVALID_VALUE"] == 1
