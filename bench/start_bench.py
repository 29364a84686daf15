"""Server start: how soon `gpushim serve` listens, and how much CPU it has used by then; with --client PROGRAM
also until that program (tests/programs/bin/PROGRAM, under the shim) has run. Several checkouts given with
--tree are measured in turn, run by run, so that each sees the same load on the machine; the CPU time is the
supervisor's own (utime + stime from /proc), which the machine's load affects far less than the wall time.

Usage: python3 bench/start_bench.py [--runs N] [--client demo] [--tree DIR ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def one(tree: Path, client: str) -> tuple[float, float]:
    """(wall s, supervisor CPU s) from spawn to listening, or to the client's end."""
    with tempfile.TemporaryDirectory(prefix="gpushim-start-") as d:
        log, url = Path(d) / "server.log", f"unix://{d}/s.sock"
        env = dict(os.environ, PYTHONPATH=str(tree))
        t0 = time.monotonic()
        with open(log, "w") as out:
            p = subprocess.Popen([sys.executable, "-m", "gpushim", "serve", "--listen", url, "--backend", "emulator",
                                  "--log-level", "info", "--module-cache", f"{d}/modules"],
                                 cwd=tree, stdout=out, stderr=subprocess.STDOUT, env=env)
            try:
                while "listening on" not in log.read_text():
                    if p.poll() is not None:
                        raise RuntimeError(f"the server did not start: {log.read_text()}")
                    time.sleep(0.002)
                if client:
                    cenv = dict(os.environ, LD_PRELOAD=str(tree / "gpushim" / "lib" / "libgpushim.so"),
                                GPUSHIM_SERVER=url)
                    r = subprocess.run([str(tree / "tests" / "programs" / "bin" / client)], env=cenv,
                                       capture_output=True, text=True, timeout=600)
                    if r.returncode:
                        raise RuntimeError(f"{client} failed: {r.stderr}")
                return time.monotonic() - t0, cpu_s(p.pid)
            finally:
                p.terminate()
                p.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--client", default="", help="a program of tests/programs/bin to run once it listens")
    ap.add_argument("--tree", type=Path, action="append", help="a checkout to measure (default: this one)")
    args = ap.parse_args()
    trees = [t.resolve() for t in args.tree or [ROOT]]
    res: dict[Path, list[tuple[float, float]]] = {t: [] for t in trees}
    for _ in range(args.runs):
        for t in trees:
            res[t].append(one(t, args.client))
    what = f"until {args.client} ran" if args.client else "until listening"
    for t, r in res.items():
        wall, cpu = [x[0] for x in r], [x[1] for x in r]
        print(f"{t}: {what}: supervisor CPU median {statistics.median(cpu):.3f} s (min {min(cpu):.3f}), "
              f"wall median {statistics.median(wall):.3f} s (min {min(wall):.3f}), {args.runs} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
