"""Smoke tests of bench/launch_bench.py (a posted launch through Session.dispatch and its layers, with a real
scheduler) and bench/meminfo_bench.py (cudaMemGetInfo with other processes in the host-RAM ledger): each runs
and reports every case. Numbers are never asserted."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(script: str, *args: str) -> list[tuple[str, float]]:
    p = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return [(name.strip(), float(v)) for name, v in re.findall(r"^  (.+?)\s+([\d.]+)$", p.stdout, re.M)]


def test_launch_bench_reports_every_layer() -> None:
    rows = _run("launch_bench.py", "--n", "200", "--repeat", "1")
    assert [r[0] for r in rows] == [
        "Session.dispatch (all of it)", "Session.op_launch", "EmulatorBackend session .launch",
        "the scheduler's gate alone", "PtxModule.launch alone", "Session.dispatch, store<<<1,1>>> (one st.global)",
        "the scheduler's gate, charging work", "PtxModule.launch alone, store"], rows
    assert all(v > 0 for _, v in rows)


def test_meminfo_bench_reports_both_cases() -> None:
    rows = _run("meminfo_bench.py", "--peers", "2", "--n", "200", "--repeat", "1")
    assert [r[0] for r in rows] == ["Session.dispatch of MEM_INFO (all of it)", "HostLedger.used alone"], rows
    assert all(v > 0 for _, v in rows)
