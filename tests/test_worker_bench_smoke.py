"""Smoke test of bench/worker_bench.py (the session worker's CPU time per frame, issue 16): it runs a real
worker loop against pre-packed frames and reports every case. Numbers are never asserted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_worker_bench_reports_every_case(tmp_path: Path) -> None:
    # TMPDIR: the benchmark's worker keeps its module store in a temporary folder it does not remove
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "worker_bench.py"), "--n", "1000", "--repeat", "1"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "TMPDIR": str(tmp_path)})
    assert p.returncode == 0, p.stdout + p.stderr
    rows = re.findall(r"^\s+(\S+).*worker CPU\s+([\d.]+) µs\s+wall per call\s+([\d.]+) µs$", p.stdout, re.M)
    assert [r[0] for r in rows] == ["STREAM_QUERY", "EVENT_QUERY", "MEMSET", "LAUNCH"], p.stdout
    assert all(float(cpu) > 0 and float(wall) > 0 for _, cpu, wall in rows)
