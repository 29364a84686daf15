"""Scheduling benchmark (issue 15): several clients sharing one emulated device, with the server's scheduler
(--sched priority) and without it (--sched off), side by side. Prints a table and writes JSON.

- fair: N identical clients (tests/programs/sched_client: KERNELS kernels of ITERS iterations, each launch
  followed by cudaDeviceSynchronize) start together; slowest/fastest completion time (goal <= 1.2).
- priority: one client (GPUSHIM_PRIORITY=1) launching short kernels with a gap between them, alone and with
  N-1 best-effort clients (priority 0) saturating the device with shorter kernels, in alternating rounds (the
  best-effort clients are stopped with SIGSTOP for the alone rounds, so both see the same background load);
  its p99 kernel latency against alone (goal <= 1.2x) and the kernels the best-effort clients completed
  (from `gpushim status`: they must progress).

Numbers are reported, never asserted (tests/e2e/test_scheduling.py asserts generous bounds on a smoke run).
Usage: python3 bench/sched_bench.py [--smoke] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
CLIENT = ROOT / "tests" / "programs" / "bin" / "sched_client"
SHIM = ROOT / "gpushim" / "lib" / "libgpushim.so"


@dataclass
class Sizes:
    clients: int = 8
    fair_kernels: int = 40
    fair_iters: int = 4000
    hp_kernels: int = 150
    hp_iters: int = 4000
    hp_gap_us: int = 2000
    be_iters: int = 400


SMOKE = Sizes(clients=4, fair_kernels=12, fair_iters=2000, hp_kernels=20, hp_iters=3000, hp_gap_us=2000,
              be_iters=200)


@contextmanager
def server(tmp: Path, *args: str) -> Iterator[str]:
    url = f"unix://{tmp}/s.sock"
    log = open(tmp / "server.log", "w")  # noqa: SIM115 - closed below
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "gpushim", "serve", "--listen", url, "--backend", "emulator",
                             "--log-level", "warning", "--module-cache", str(tmp / "modules"), "--max-priority", "1",
                             *args], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 60
        while not Path(url[len("unix://"):]).exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start: {(tmp / 'server.log').read_text()}")
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def start_client(url: str, kernels: int, iters: int, start: Path | None, gap_us: int = 0,
                 priority: int = 0, end: Path | None = None) -> subprocess.Popen:
    env = dict(os.environ, LD_PRELOAD=str(SHIM), GPUSHIM_SERVER=url, GPUSHIM_PRIORITY=str(priority))
    return subprocess.Popen([str(CLIENT), str(kernels), str(iters), "1", str(start or ""), str(gap_us),
                             str(end or "")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_ready(p: subprocess.Popen) -> None:
    line = p.stdout.readline() if p.stdout else ""
    if line.strip() != "ready":
        p.kill()
        raise RuntimeError(f"client did not get ready: {line!r} {p.stderr.read() if p.stderr else ''}")


def finish(p: subprocess.Popen, timeout: float = 600) -> dict[str, Any]:
    out, err = p.communicate(timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"client failed ({p.returncode}): {err.strip()}")
    return json.loads(out.strip().splitlines()[-1])


def p99(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(0.99 * len(s)))]


def fair_run(url: str, tmp: Path, z: Sizes) -> dict[str, Any]:
    start = tmp / "go-fair"
    procs = [start_client(url, z.fair_kernels, z.fair_iters, start) for _ in range(z.clients)]
    for p in procs:
        wait_ready(p)
    go = time.monotonic()  # CLOCK_MONOTONIC, as the clients' steady_clock
    start.touch()
    res = [finish(p) for p in procs]
    # completion time from the common start (a client that noticed the start late still had to finish)
    done = [r["end"] - go for r in res]
    return {"clients": z.clients, "completion_s": [round(e, 4) for e in done],
            "elapsed_s": [round(r["elapsed"], 4) for r in res],
            "slowest_over_fastest": round(max(done) / min(done), 3)}


def priority_run(url: str, tmp: Path, z: Sizes, tag: str, rounds: int = 3) -> dict[str, Any]:
    """Alone and shared alternate (the best-effort clients are stopped with SIGSTOP for the alone rounds), so
    both see the same background load on the machine."""
    from gpushim.cli import query_status

    start = tmp / f"go-{tag}"
    be = [start_client(url, 10**7, z.be_iters, start) for _ in range(z.clients - 1)]
    alone: list[float] = []
    shared: list[float] = []
    try:
        for p in be:
            wait_ready(p)
        start.touch()
        per_round = max(1, z.hp_kernels // rounds)
        for _ in range(rounds):
            for p in be:
                os.kill(p.pid, signal.SIGSTOP)
            time.sleep(0.1)  # their kernels in progress finish
            alone += finish(start_client(url, per_round, z.hp_iters, None, z.hp_gap_us, priority=1))["latencies"]
            for p in be:
                os.kill(p.pid, signal.SIGCONT)
            time.sleep(0.2)  # the best-effort clients saturate the device again
            shared += finish(start_client(url, per_round, z.hp_iters, None, z.hp_gap_us, priority=1))["latencies"]
        st = query_status(url)
        kernels = [s["kernels"] for d in st.get("scheduler", []) for s in d["sessions"] if s["priority"] == 0]
    finally:
        for p in be:
            p.kill()
            p.wait()
    a, s = p99(alone), p99(shared)
    return {"alone_p99_ms": round(a * 1e3, 3), "shared_p99_ms": round(s * 1e3, 3),
            "alone_median_ms": round(sorted(alone)[len(alone) // 2] * 1e3, 3),
            "shared_median_ms": round(sorted(shared)[len(shared) // 2] * 1e3, 3),
            "p99_ratio": round(s / a, 3), "median_ratio": round(sorted(shared)[len(shared) // 2] /
                                                                 sorted(alone)[len(alone) // 2], 3),
            "best_effort_kernels": kernels}


def run(z: Sizes) -> dict[str, Any]:
    if not CLIENT.exists() or not SHIM.exists():
        subprocess.run(["make", "-s", "shim", "programs"], cwd=ROOT, check=True)
    out: dict[str, Any] = {"sizes": z.__dict__, "cpus": os.cpu_count()}
    for policy in ("priority", "off"):
        with tempfile.TemporaryDirectory(prefix="gpushim-sched-") as d:
            tmp = Path(d)
            with server(tmp, "--sched", policy) as url:
                out[policy] = {"fair": fair_run(url, tmp, z), "priority": priority_run(url, tmp, z, policy)}
    return out


def table(r: dict[str, Any]) -> str:
    lines = [f"{'':34}{'--sched priority':>18}{'--sched off':>14}"]
    rows = [("fair: slowest/fastest (<= 1.2)", "fair", "slowest_over_fastest"),
            ("high priority p99 alone, ms", "priority", "alone_p99_ms"),
            ("high priority p99 shared, ms", "priority", "shared_p99_ms"),
            ("p99 shared/alone (<= 1.2)", "priority", "p99_ratio"),
            ("median shared/alone", "priority", "median_ratio")]
    for label, a, b in rows:
        lines.append(f"{label:34}{r['priority'][a][b]:>18}{r['off'][a][b]:>14}")
    be = [sum(r[p]["priority"]["best_effort_kernels"]) for p in ("priority", "off")]
    lines.append(f"{'best-effort kernels meanwhile':34}{be[0]:>18}{be[1]:>14}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="small sizes (seconds), for tests")
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "sched.json")
    args = ap.parse_args()
    r = run(SMOKE if args.smoke else Sizes())
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(r, indent=2) + "\n")
    print(table(r))
    print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
