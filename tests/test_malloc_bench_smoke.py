"""Smoke test of bench/malloc_bench.py (where a cudaMalloc + cudaFree goes in the server, issue 16): every case
runs and reports a time. Numbers are never asserted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_malloc_bench_reports_every_case(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "malloc_bench.py"), "--n", "200", "--repeat", "1"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "TMPDIR": str(tmp_path)})
    assert p.returncode == 0, p.stdout + p.stderr
    rows = re.findall(r"^  (\S+).*?([\d.]+) µs \(([\d.]+)\)$", p.stdout, re.M)
    assert [r[0] for r in rows] == ["MemoryAccount", "DeviceMemory", "DeviceMemory", "Session.dispatch"], p.stdout
    assert all(float(med) > 0 for _, med, _ in rows)
