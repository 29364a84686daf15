"""Smoke test of the scheduling benchmark (bench/sched_bench.py --smoke): both policies, both runs, JSON with
every measurement. Numbers are not asserted here (tests/e2e/test_scheduling.py bounds the guarantees)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not Path("/usr/local/cuda/bin/nvcc").exists() and shutil.which("nvcc") is None,
                    reason="nvcc is needed to build the scheduling client")
def test_sched_bench_smoke(tmp_path: Path) -> None:
    subprocess.run(["make", "-s", "shim", "programs"], cwd=ROOT, check=True)
    out = tmp_path / "sched.json"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "sched_bench.py"), "--smoke", "--json", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(out.read_text())
    for policy in ("priority", "off"):
        fair, prio = r[policy]["fair"], r[policy]["priority"]
        assert len(fair["completion_s"]) == r["sizes"]["clients"] and fair["slowest_over_fastest"] >= 1
        assert prio["alone_p99_ms"] > 0 and prio["shared_p99_ms"] > 0
        assert len(prio["best_effort_kernels"]) == r["sizes"]["clients"] - 1
    assert "--sched priority" in p.stdout and "p99 shared/alone" in p.stdout
