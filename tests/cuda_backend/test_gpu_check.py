"""`make gpu-check` without a GPU fails at once saying why; its report turns the suite's JUnit XML and
bench/cuda_bench's JSON lines into the table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpushim.backends.probe import probe_cuda

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from gpu_check_report import report  # noqa: E402

USABLE, WHY = probe_cuda()


def test_script_parses() -> None:
    subprocess.run(["bash", "-n", str(ROOT / "tools/gpu_check.sh")], check=True)


@pytest.mark.skipif(USABLE, reason="a GPU is usable here")
def test_gpu_check_fails_fast_without_a_driver(tmp_path: Path) -> None:
    # its logs in tmp_path: by default the script makes a /tmp folder for them and leaves it for the reader
    r = subprocess.run(["make", "-s", "gpu-check"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "GPU_CHECK_OUT": str(tmp_path / "out")})
    assert r.returncode != 0
    assert "gpu-check: FAILED" in r.stderr and ("libcuda.so.1" in r.stderr or "NVML" in r.stderr)


def _bench(op: tuple[str, str], **fields: float) -> str:
    return json.dumps({"bench": op[0], "op": op[1], **fields})


def test_report_table(tmp_path: Path) -> None:
    (tmp_path / "e2e.xml").write_text(
        '<testsuites><testsuite name="pytest" errors="0" failures="0" skipped="1" tests="3">'
        '<testcase classname="tests.e2e.test_runtime" name="a"/><testcase classname="tests.e2e.test_cli" name="b"/>'
        '<testcase classname="tests.e2e.test_cli" name="c"><skipped/></testcase></testsuite></testsuites>')
    lines = [_bench(("sync", "cudaMemGetInfo"), median_us=21.5),
             _bench(("launch", "empty<<<1,1>>>"), median_us=0.8, amortised_us=3.25),
             _bench(("copy", "H2D pageable 67108864"), gbps_median=4.5),
             json.dumps({"bench": "copy", "error": "D2H: cudaErrorInvalidValue (1)"})]
    (tmp_path / "gpushim.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "native.jsonl").write_text(_bench(("sync", "cudaMemGetInfo"), median_us=1.25) + "\nnot json\n")
    text, ok = report(tmp_path, 0)
    assert ok
    assert "2 passed, 0 failed, 1 skipped" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("sync call latency"))
    assert row.split()[-4:] == ["21.5", "us", "1.2", "us"] or row.split()[-4:] == ["21.5", "us", "1.3", "us"]
    assert "3.25 us" in text and "4.50 GB/s" in text and "bench error (gpushim)" in text
    assert not report(tmp_path, 1)[1]
    (tmp_path / "e2e.xml").unlink()
    text, ok = report(tmp_path, 5)
    assert not ok and "no result (pytest exit 5" in text
