"""Smoke tests of bench/worker_bench.py (the session worker's CPU time per frame, issue 16: it runs a real
worker loop against pre-packed frames) and bench/malloc_bench.py (where a cudaMalloc + cudaFree goes in the
server, in process): every case runs and reports a time. Numbers are never asserted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_bench(script: str, args: list[str], tmp_path: Path) -> str:
    # TMPDIR: the benchmarks keep a module store in a temporary folder they do not remove
    p = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=120, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_worker_bench_reports_every_case(tmp_path: Path) -> None:
    out = run_bench("worker_bench.py", ["--n", "1000", "--repeat", "1"], tmp_path)
    rows = re.findall(r"^\s+(\S+).*worker CPU\s+([\d.]+) µs\s+wall per call\s+([\d.]+) µs$", out, re.M)
    assert [r[0] for r in rows] == ["STREAM_QUERY", "EVENT_QUERY", "MEMSET", "LAUNCH"], out
    assert all(float(cpu) > 0 and float(wall) > 0 for _, cpu, wall in rows)


def test_malloc_bench_reports_every_case(tmp_path: Path) -> None:
    out = run_bench("malloc_bench.py", ["--n", "200", "--repeat", "1"], tmp_path)
    rows = re.findall(r"^  (\S+).*?([\d.]+) µs \(([\d.]+)\)$", out, re.M)
    assert [r[0] for r in rows] == ["MemoryAccount", "DeviceMemory", "DeviceMemory", "Session.dispatch"], out
    assert all(float(med) > 0 for _, med, _ in rows)
