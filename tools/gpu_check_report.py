"""The table `make gpu-check` ends with: the end-to-end suite's result on the cuda backend, and
bench/cuda_bench's sync latency, launch cost and pageable copy bandwidth through gpushim beside the same
program run natively. Usage: gpu_check_report.py OUT_DIR E2E_EXIT_STATUS (OUT_DIR holds e2e.xml,
gpushim.jsonl and native.jsonl). Exits 1 when the suite did not pass."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

ROWS = [
    ("sync call latency (cudaMemGetInfo, median)", ("sync", "cudaMemGetInfo"), "median_us", "{:.1f} us"),
    ("launch cost (empty kernel, amortised)", ("launch", "empty<<<1,1>>>"), "amortised_us", "{:.2f} us"),
    ("launch issue time (per call, median)", ("launch", "empty<<<1,1>>>"), "median_us", "{:.2f} us"),
    ("H2D 64 MiB pageable (median)", ("copy", "H2D pageable 67108864"), "gbps_median", "{:.2f} GB/s"),
    ("D2H 64 MiB pageable (median)", ("copy", "D2H pageable 67108864"), "gbps_median", "{:.2f} GB/s"),
]


def suite_result(out: Path, rc: int) -> tuple[str, list[str], bool]:
    try:
        root = ET.parse(out / "e2e.xml").getroot()
    except (OSError, ET.ParseError):
        return f"no result (pytest exit {rc}; see {out / 'e2e.log'})", [], False
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return f"no result (pytest exit {rc})", [], False
    n, f, e, s = (int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
    failed = [f"{c.get('classname')}::{c.get('name')}" for c in suite.iter("testcase")
              if c.find("failure") is not None or c.find("error") is not None]
    return f"{n - f - e - s} passed, {f + e} failed, {s} skipped", failed, rc == 0 and not failed


def load(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        text = path.read_text()
    except OSError:
        return rows
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            rows[(r.get("bench", ""), r.get("op", ""))] = r
    return rows


def report(out: Path, rc: int) -> tuple[str, bool]:
    tests, failed, ok = suite_result(out, rc)
    shim, native = load(out / "gpushim.jsonl"), load(out / "native.jsonl")

    def cell(rows: dict, key: tuple[str, str], field: str, fmt: str) -> str:
        r = rows.get(key)
        return fmt.format(r[field]) if r and field in r else "-"

    table = [(label, cell(shim, key, f, fmt), cell(native, key, f, fmt)) for label, key, f, fmt in ROWS]
    w = max(len(label) for label, _, _ in table)
    lines = ["", f"{'e2e suite on the cuda backend':{w}}  {tests}", "",
             f"{'':{w}}  {'through gpushim':>16}  {'native':>12}"]
    lines += [f"{label:{w}}  {a:>16}  {b:>12}" for label, a, b in table]
    lines += [f"  failed: {name}" for name in failed]
    lines += [f"  bench error ({who}): {r['error']}" for who, rows in (("gpushim", shim), ("native", native))
              for r in rows.values() if "error" in r]
    lines.append(f"logs: {out}")
    return "\n".join(lines), ok


def main() -> int:
    text, ok = report(Path(sys.argv[1]), int(sys.argv[2]))
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
