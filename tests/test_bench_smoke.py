"""Smoke test of the benchmark suite (bench/run.py --quick): it builds, runs through gpushim over a Unix socket
and TCP loopback, and writes JSON with every measurement. Numbers are never asserted."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NVCC = Path("/usr/local/cuda/bin/nvcc")


@pytest.mark.skipif(not NVCC.exists() and shutil.which("nvcc") is None, reason="nvcc is needed to build the bench")
def test_bench_quick(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--sizes", "4096,65536",
                        "--out", str(out), "--no-table"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads(out.read_text())
    assert res["errors"] == []
    assert res["params"]["sizes"] == [4096, 65536]
    assert res["meta"]["pinned_cpu"] is not None or shutil.which("taskset") is None  # issue 16: one core
    base = res["baselines"]
    for key in ("unix_pingpong", "tcp_pingpong", "unix_stream", "tcp_stream"):
        assert base[key]["median_us"] > 0 and base[key]["p99_us"] >= base[key]["median_us"]
    assert set(base["memcpy"]) == {"4096", "65536"}
    for tr in ("unix", "tcp"):
        g = res["gpushim"][tr]
        for key in ("local", "sync", "sync_event", "sync_meminfo", "async_memset", "launch", "malloc"):
            assert g[key]["n"] > 0 and g[key]["median_us"] > 0, (tr, key)
        assert {"amortised_us", "final_sync_us", "calls"} <= set(g["async_memset"])
        assert set(g["copies"]) == {f"{d} {h} {s}" for d in ("H2D", "D2H") for h in ("pageable", "pinned")
                                    for s in (4096, 65536)}
        for c in g["copies"].values():
            assert c["gbps_median"] > 0 and "call_median_us" in c
    names = {g["name"] for g in res["goals"]}
    assert "sync_round_trip_unix" in names
    assert {"async_memset_unix", "launch_unix", "async_memset_tcp", "launch_tcp"} <= names
    assert {f"{d}_pinned_65536_unix_vs_memcpy" for d in ("H2D", "D2H")} <= names
    assert {f"{d}_{h}_65536_tcp_vs_raw_tcp" for d in ("H2D", "D2H") for h in ("pageable", "pinned")} <= names
    assert all(isinstance(g["met"], bool) and g["ratio"] > 0 for g in res["goals"])
    assert res["rows"]
