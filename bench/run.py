"""gpushim's benchmark suite (`make bench`, issue 7).

    python bench/run.py [--quick] [--out PATH] [--transports unix,tcp] [--ptx]

Builds bench/cuda_bench.cu (an ordinary CUDA program, `nvcc -cudart shared`) and bench/raw_baselines.c into
bench/bin/, starts two `gpushim serve --backend emulator` servers (a Unix socket and TCP loopback), runs the
CUDA program through the shim against each, and measures the raw baselines in the same run: a Unix-socket and
a TCP ping-pong, Unix-socket and TCP loopback throughput, memcpy bandwidth. Prints a table of each measurement
beside its baseline, the ratio and the goal, and writes bench/results/latest.json.

Goals (issues 7 and 16, same machine, same run; the per-call measurements and the raw ping-pong run on one CPU,
--pin, issue 16's method; copies and their baselines run unpinned):
  - a synchronous call's round trip (cudaStreamQuery) <= 2x the raw Unix-socket round trip (cudaEventQuery and
    cudaMemGetInfo are reported beside it);
  - an asynchronous call, amortised over a batch and one synchronise: cudaMemsetAsync <= 0.25x and an empty
    launch <= 0.5x the synchronous round trip;
  - pinned H2D/D2H of the largest size (256 MiB) over the Unix socket >= 60 % of memcpy bandwidth;
  - the largest size (256 MiB) over TCP loopback >= 50 % of raw TCP loopback throughput.
Copies count when they have completed as CUDA defines it (docs/semantics.md): D2H and H2D from pinned memory
when cudaMemcpy returns, H2D from pageable memory after a cudaDeviceSynchronize that follows it.
Numbers are reported, never asserted: a goal not met is a finding, not a failure. The exit status is 1 only
when something could not be measured (a build, a server or a CUDA call failed; the JSON says what).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
BIN = BENCH / "bin"
RESULTS = BENCH / "results"
SHIM = ROOT / "gpushim" / "lib" / "libgpushim.so"
MiB = 1 << 20
# `taskset -c CPU` before the processes of the per-call measurements (their server, cuda_bench, the raw
# ping-pong): issue 16's method, one core for the application and the server (cross-core wakeups are erratic on
# this VM). Copies and the streaming and memcpy baselines run unpinned: a copy may use both cores, as raw ones do.
PER_CALL_PARTS = "lsakm"
COPY_PARTS = "c"

Json = dict[str, Any]


@dataclass
class Params:
    """Iteration counts and sizes; --quick shrinks them so the suite runs in seconds (smoke test)."""

    sync: int = 20000
    async_calls: int = 100000
    launches: int = 20000
    reps: int = 3
    malloc: int = 5000
    sizes: list[int] = field(default_factory=lambda: [4096, MiB, 256 * MiB])
    copy_budget: int = 1 << 30
    pingpongs: int = 20000
    stream_reps: int = 5

    @classmethod
    def quick(cls) -> Params:
        return cls(sync=500, async_calls=1000, launches=100, reps=2, malloc=200, sizes=[4096, 64 * 1024, MiB],
                   copy_budget=8 * MiB, pingpongs=2000, stream_reps=3)


# ---- building ----


def find_nvcc() -> str:
    for cand in (os.environ.get("NVCC"), "/usr/local/cuda/bin/nvcc", shutil.which("nvcc")):
        if cand and Path(cand).exists():
            return cand
    raise SystemExit("bench: nvcc not found (set NVCC or install CUDA at /usr/local/cuda)")


def stale(out: Path, *srcs: Path) -> bool:
    return not out.exists() or any(s.stat().st_mtime > out.stat().st_mtime for s in srcs)


def build() -> tuple[Path, Path]:
    """Builds the shim (make, incremental) and the two benchmark programs into bench/bin/."""
    subprocess.run(["make", "-s", "shim"], cwd=ROOT, check=True)
    BIN.mkdir(exist_ok=True)
    cuda, raw = BIN / "cuda_bench", BIN / "raw_baselines"
    if stale(cuda, BENCH / "cuda_bench.cu"):
        nvcc = find_nvcc()
        lib64 = Path(nvcc).resolve().parents[1] / "lib64"
        subprocess.run([nvcc, "-O2", "-cudart", "shared", "-o", str(cuda), str(BENCH / "cuda_bench.cu"),
                        "-Xlinker", f"-rpath,{lib64}"], check=True)
    if stale(raw, BENCH / "raw_baselines.c"):
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(raw),
                        str(BENCH / "raw_baselines.c")], check=True)
    return cuda, raw


# ---- servers ----


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ready(url: str) -> bool:
    """The server accepts connections (a Unix socket's file exists from bind(), before listen())."""
    try:
        if url.startswith("unix://"):
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(0.5)
                s.connect(url[len("unix://"):])
                return True
        host, port = url[len("tcp://"):].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def server(url: str, tmp: Path, pin: list[str] | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A `gpushim serve` process on the emulator backend, listening on url, stopped with SIGTERM; pin: a taskset
    prefix (its session workers inherit the CPU)."""
    log = tmp / f"server-{url.split(':')[0]}.log"
    with open(log, "w") as logf:
        proc = subprocess.Popen(
            [*(pin or []), sys.executable, "-m", "gpushim", "serve", "--listen", url, "--backend", "emulator",
             "--log-level", "error", "--module-cache", str(tmp / "modules"),
             *(["--insecure-no-token"] if url.startswith("tcp://") else [])],  # loopback, for measurements
            cwd=ROOT, stdout=logf, stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while not ready(url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"bench: the server on {url} did not start:\n{log.read_text()}")
                time.sleep(0.05)
            yield url, proc
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# ---- running ----


def json_lines(text: str) -> list[Json]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def run_program(cmd: list[str], env: dict[str, str] | None, timeout: float, errors: list[str],
                label: str) -> list[Json]:
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        errors.append(f"{label}: timed out after {timeout:.0f} s")
        return json_lines(out)
    if p.returncode != 0:
        errors.append(f"{label}: exit status {p.returncode}: {p.stderr.strip()[-2000:]}")
    elif p.stderr.strip():
        sys.stderr.write(p.stderr)
    recs = json_lines(p.stdout)
    errors.extend(f"{label}: {r['bench']}: {r['error']}" for r in recs if "error" in r)
    return [r for r in recs if "error" not in r]


def _better(a: Json | None, b: Json) -> Json:
    """The better of two measurements of one baseline: the faster one (the stricter comparison)."""
    if a is None:
        return b
    if "gbps_median" in b:
        return b if b["gbps_median"] > a["gbps_median"] else a
    return b if b["median_us"] < a["median_us"] else a


def run_baselines(raw: Path, prm: Params, errors: list[str], pin: list[str]) -> list[Json]:
    """One run of raw_baselines: its measurements, as they came. With pin, the ping-pongs run pinned (beside
    the per-call measurements) and the streaming and memcpy baselines in a second, unpinned run."""
    cmd = [str(raw), "-n", str(prm.pingpongs), "-t", str(max(prm.sizes)), "-r", str(prm.stream_reps),
           "-z", ",".join(map(str, prm.sizes)), "-b", str(prm.copy_budget)]
    if not pin:
        return run_program(cmd, None, 600, errors, "raw_baselines")
    pings = run_program([*pin, str(raw), "-n", str(prm.pingpongs), "-t", "4096", "-r", "1", "-z", "4096", "-b",
                         "4096"], None, 600, errors, "raw_baselines (pinned)")
    cmd[2] = "0"  # no ping-pong
    return [r for r in pings if r["bench"] == "pingpong"] + run_program(cmd, None, 600, errors, "raw_baselines")


def merge_baselines(runs: list[list[Json]]) -> Json:
    """Baselines by name, each the best over the runs (before and after the gpushim runs) and, for memcpy,
    over 4 KiB and huge pages: a busy machine slows the baseline down too, and gpushim is judged against the
    best the machine did."""
    out: Json = {"memcpy": {}}
    for run in runs:
        for r in run:
            if r["bench"] == "memcpy":
                out["memcpy"][str(r["bytes"])] = _better(out["memcpy"].get(str(r["bytes"])), r)
            else:
                key = f"{r['transport']}_{r['bench']}"
                out[key] = _better(out.get(key), r)
    return out


def run_cuda(cuda: Path, url: str, prm: Params, errors: list[str], timeout: float, parts: str,
             pin: list[str], out: Json) -> None:
    """Runs the parts (cuda_bench -w) of the CUDA program against the server at url; results go into out."""
    env = dict(os.environ, LD_PRELOAD=str(SHIM), GPUSHIM_SERVER=url, GPUSHIM_LOG="1")
    cmd = [*pin, str(cuda), "-w", parts, "-s", str(prm.sync), "-a", str(prm.async_calls), "-k", str(prm.launches),
           "-r", str(prm.reps), "-m", str(prm.malloc), "-z", ",".join(map(str, prm.sizes)), "-b", str(prm.copy_budget)]
    out.setdefault("copies", {})
    names = {"async": "async_memset"}
    for r in run_program(cmd, env, timeout, errors, f"cuda_bench over {url.split(':')[0]}"):
        if r["bench"] == "copy":
            out["copies"][f"{r['dir']} {r['host']} {r['bytes']}"] = r
        else:
            out[names.get(r["bench"], r["bench"])] = r


# ---- goals and the table ----


def fmt_size(n: int) -> str:
    for unit, k in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1024)):
        if n >= k and n % k == 0:
            return f"{n // k} {unit}"
    return f"{n} B"


def fmt_us(us: float | None) -> str:
    if us is None:
        return "—"
    if us >= 10000:
        return f"{us / 1000:.1f} ms"
    return f"{us:.2f} µs" if us < 100 else f"{us:.0f} µs"


@dataclass
class Row:
    name: str
    transport: str
    median: str
    p99: str
    baseline_name: str = "—"
    baseline: str = "—"
    ratio: float | None = None
    goal: str = "—"
    met: bool | None = None

    def as_json(self) -> Json:
        return dict(self.__dict__)


def build_rows(res: Json) -> tuple[list[Row], list[Json]]:
    """One row per measurement; goals evaluated where issue 7 sets one."""
    rows: list[Row] = []
    goals: list[Json] = []
    base = res["baselines"]
    large = max(res["params"]["sizes"])

    def goal(name: str, value: float, baseline: float, op: str, limit: float) -> tuple[float, str, bool]:
        ratio = value / baseline if baseline else float("inf")
        met = ratio <= limit if op == "<=" else ratio >= limit
        goals.append({"name": name, "value": value, "baseline": baseline, "ratio": ratio, "op": op, "limit": limit,
                      "met": met})
        return ratio, f"{op} {limit:g}×", met

    for name in ("unix_pingpong", "tcp_pingpong"):
        if name in base:
            r = base[name]
            rows.append(Row(f"{r['op']} round trip", "raw", fmt_us(r["median_us"]), fmt_us(r["p99_us"])))
    for name in ("unix_stream", "tcp_stream"):
        if name in base:
            r = base[name]
            rows.append(Row(f"{r['transport']} stream {fmt_size(r['bytes'])}", "raw",
                            f"{r['gbps_median']:.2f} GB/s", f"{r['gbps_p99']:.2f} GB/s"))
    for size, r in sorted(base["memcpy"].items(), key=lambda kv: int(kv[0])):
        huge = " (huge pages)" if r.get("hugepages") else ""
        rows.append(Row(f"memcpy {fmt_size(int(size))}{huge}", "raw", f"{r['gbps_median']:.2f} GB/s",
                        f"{r['gbps_p99']:.2f} GB/s"))

    for tr, g in res["gpushim"].items():
        pp = base.get(f"{tr}_pingpong")
        if "local" in g:
            rows.append(Row("local call cudaGetDevice", tr, fmt_us(g["local"]["median_us"]),
                            fmt_us(g["local"]["p99_us"])))
        sync = g.get("sync")
        if sync:
            row = Row(f"sync call {sync['op']}", tr, fmt_us(sync["median_us"]), fmt_us(sync["p99_us"]))
            if pp:
                row.baseline_name, row.baseline = f"raw {tr} ping-pong", fmt_us(pp["median_us"])
                if tr == "unix":
                    row.ratio, row.goal, row.met = goal("sync_round_trip_unix", sync["median_us"], pp["median_us"],
                                                        "<=", 2)
                else:
                    row.ratio = sync["median_us"] / pp["median_us"]
            rows.append(row)
        for key in ("sync_event", "sync_meminfo"):  # other round trips, beside the same baseline
            other = g.get(key)
            if other:
                row = Row(f"sync call {other['op']}", tr, fmt_us(other["median_us"]), fmt_us(other["p99_us"]))
                if pp:
                    row.baseline_name, row.baseline = f"raw {tr} ping-pong", fmt_us(pp["median_us"])
                    row.ratio = other["median_us"] / pp["median_us"]
                rows.append(row)
        for key, label, limit in (("async_memset", "cudaMemsetAsync", 0.25), ("launch", "empty<<<1,1>>>", 0.5)):
            a = g.get(key)
            if not a:
                continue
            row = Row(f"{label} ({a['calls']} + sync)/{a['calls']}", tr, fmt_us(a["amortised_us"]),
                      fmt_us(a["amortised_max_us"]) + " (worst batch)")
            issue = Row(f"{label} issue time", tr, fmt_us(a["median_us"]), fmt_us(a["p99_us"]))
            if sync:
                issue.baseline_name, issue.baseline = "sync call", fmt_us(sync["median_us"])
                issue.ratio = a["median_us"] / sync["median_us"]
            rows.append(issue)
            if sync:
                row.baseline_name, row.baseline = "sync call", fmt_us(sync["median_us"])
                row.ratio, row.goal, row.met = goal(f"{key}_{tr}", a["amortised_us"], sync["median_us"], "<=",
                                                    limit)
            rows.append(row)
        m = g.get("malloc")
        if m:
            row = Row("cudaMalloc+cudaFree 1 MiB", tr, fmt_us(m["median_us"]), fmt_us(m["p99_us"]))
            if sync:
                row.baseline_name, row.baseline = "sync call", fmt_us(sync["median_us"])
                row.ratio = m["median_us"] / sync["median_us"]
            rows.append(row)
        for c in sorted(g["copies"].values(), key=lambda c: (c["bytes"], c["host"], c["dir"])):
            size = c["bytes"]
            call = ""
            if c["dir"] == "H2D" and "call_median_us" in c:
                call = f"; call {fmt_us(c['call_median_us'])}"
            row = Row(f"cudaMemcpy {c['dir']} {c['host']} {fmt_size(size)}", tr,
                      f"{c['gbps_median']:.3f} GB/s ({fmt_us(c['median_us'])}{call})",
                      f"{c['gbps_p99']:.3f} GB/s ({fmt_us(c['p99_us'])})")
            if tr == "unix":
                mc = base["memcpy"].get(str(size))
                if mc:
                    row.baseline_name, row.baseline = f"memcpy {fmt_size(size)}", f"{mc['gbps_median']:.2f} GB/s"
                    if size == large and c["host"] == "pinned":
                        row.ratio, row.goal, row.met = goal(f"{c['dir']}_pinned_{size}_unix_vs_memcpy",
                                                            c["gbps_median"], mc["gbps_median"], ">=", 0.6)
                    else:
                        row.ratio = c["gbps_median"] / mc["gbps_median"]
            else:
                ts = base.get(f"{tr}_stream")
                if ts:
                    row.baseline_name = f"raw {tr} stream {fmt_size(ts['bytes'])}"
                    row.baseline = f"{ts['gbps_median']:.2f} GB/s"
                    if size == large:
                        row.ratio, row.goal, row.met = goal(f"{c['dir']}_{c['host']}_{size}_{tr}_vs_raw_{tr}",
                                                            c["gbps_median"], ts["gbps_median"], ">=", 0.5)
                    else:
                        row.ratio = c["gbps_median"] / ts["gbps_median"]
            rows.append(row)
    return rows, goals


def worker_fastpath() -> str:
    """Whether the servers' workers answer the common calls in C (gpushim/server/fastpath.py), or why not."""
    if os.environ.get("GPUSHIM_WORKER_FASTPATH", "1") == "0":
        return "off (GPUSHIM_WORKER_FASTPATH=0)"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if root not in sys.path:  # the servers run from the checkout (python -m gpushim): look where they do
        sys.path.insert(0, root)
    try:
        from gpushim.server import fastpath
    except ImportError as e:
        return f"unknown ({e})"
    return "on" if not fastpath.not_built() else f"off ({fastpath.not_built()})"


def _pinning(meta: Json) -> str:
    cpu = meta.get("pinned_cpu")
    where = "unpinned" if cpu is None else f"per-call parts on CPU {cpu}, copies unpinned"
    return f"{where}, worker fast path {meta.get('worker_fastpath', '?')}"


def print_table(rows: list[Row], goals: list[Json], res: Json) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(200, shutil.get_terminal_size().columns))
    meta = res["meta"]
    table = Table(title=f"gpushim benchmarks — {meta['date']} — commit {meta['commit']} — {meta['cpus']} CPUs, "
                        f"load {meta['loadavg_start'][0]:.1f}→{meta['loadavg_end'][0]:.1f} — {meta['mode']} mode "
                        f"— {_pinning(meta)} (times: median / p99)")
    for col, just in (("measurement", "left"), ("via", "left"), ("median", "right"), ("p99", "right"),
                      ("baseline", "left"), ("baseline median", "right"), ("ratio", "right"), ("goal", "right"),
                      ("", "left")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    last = None
    for r in rows:
        if last is not None and r.transport != last:
            table.add_section()
        last = r.transport
        met = "" if r.met is None else ("[green]met[/]" if r.met else "[red]not met[/]")
        table.add_row(r.name, r.transport, r.median, r.p99, r.baseline_name, r.baseline,
                      "—" if r.ratio is None else f"{r.ratio:.3g}×", r.goal, met)
    console.print(table)
    n_met = sum(g["met"] for g in goals)
    console.print(f"goals met: {n_met}/{len(goals)}")
    for e in res["errors"]:
        console.print(f"[yellow]error:[/] {e}")


def markdown(rows: list[Row], goals: list[Json], res: Json) -> str:
    """The table as Markdown (for bench/README.md)."""
    meta = res["meta"]
    out = [f"{meta['date']}, commit {meta['commit']}, {meta['cpus']} CPUs, load average "
           f"{meta['loadavg_start'][0]:.1f}→{meta['loadavg_end'][0]:.1f}, {meta['mode']} mode, "
           f"{_pinning(meta)}, goals met {sum(g['met'] for g in goals)}/{len(goals)}", "",
           "| measurement | via | median | p99 | baseline | baseline median | ratio | goal |",
           "|---|---|--:|--:|---|--:|--:|---|"]
    for r in rows:
        goal = "" if r.met is None else f"{r.goal} {'**met**' if r.met else 'not met'}"
        ratio = "" if r.ratio is None else f"{r.ratio:.3g}×"
        base = "" if r.baseline_name == "—" else r.baseline_name
        bval = "" if r.baseline == "—" else r.baseline
        out.append(f"| {r.name} | {r.transport} | {r.median} | {r.p99} | {base} | {bval} | {ratio} | {goal} |")
    return "\n".join(out).replace("<<<", "&lt;&lt;&lt;").replace(">>>", "&gt;&gt;&gt;") + "\n"


# ---- main ----


def git_commit() -> str | None:
    """HEAD, with "+dirty" when the shim or the server differ from it (what ran is the working tree)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "shim", "gpushim"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def pick_cpu(arg: str) -> str | None:
    """The CPU every measured process runs on, or None (unpinned: --pin none, or no taskset here)."""
    if arg == "none":
        return None
    if not shutil.which("taskset"):
        print("bench: taskset not found; measuring unpinned", file=sys.stderr)
        return None
    return str(min(os.sched_getaffinity(0))) if arg == "auto" else arg


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="few iterations and sizes up to 1 MiB (seconds)")
    ap.add_argument("--out", type=Path, default=RESULTS / "latest.json", help="where to write the JSON results")
    ap.add_argument("--transports", default="unix,tcp", help="comma-separated: unix, tcp")
    ap.add_argument("--sizes", help="comma-separated copy sizes in bytes (default 4096,1048576,268435456)")
    ap.add_argument("--ptx", action="store_true", help="also run bench/ptx_bench.py (the PTX engine)")
    ap.add_argument("--pin", default="auto", help="run servers, the CUDA program and the baselines on this CPU "
                    "(taskset -c; issue 16's method); 'auto': the first CPU this process may use; 'none': let "
                    "the OS place them")
    ap.add_argument("--no-table", action="store_true", help="write the JSON only")
    ap.add_argument("--markdown", type=Path, help="also write the table as Markdown here")
    args = ap.parse_args(argv)

    prm = Params.quick() if args.quick else Params()
    if args.sizes:
        prm.sizes = [int(s, 0) for s in args.sizes.split(",") if s]
    transports = [t for t in args.transports.split(",") if t]
    for t in transports:
        if t not in ("unix", "tcp"):
            ap.error(f"unknown transport {t!r}")

    pin = pick_cpu(args.pin)
    prefix = [] if pin is None else ["taskset", "-c", pin]
    cuda, raw = build()
    errors: list[str] = []
    res: Json = {
        "meta": {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"), "mode": "quick" if args.quick else "full",
                 "cpus": os.cpu_count(), "machine": platform.machine(), "kernel": platform.release(),
                 "python": platform.python_version(), "commit": git_commit(), "loadavg_start": os.getloadavg(),
                 "pinned_cpu": pin, "worker_fastpath": worker_fastpath()},
        "params": dict(prm.__dict__),
        "units": {"*_us": "microseconds", "gbps_*": "1e9 bytes per second"},
    }
    t0 = time.monotonic()
    baseline_runs = [run_baselines(raw, prm, errors, prefix)]
    res["gpushim"] = {}
    timeout = 300 if args.quick else 3000
    with tempfile.TemporaryDirectory(prefix="gpushim-bench-") as td:
        tmp = Path(td)
        for tr in transports:
            out: Json = {}
            res["gpushim"][tr] = out
            # the per-call parts on the pinned CPU, then the copies unpinned, each against its own server
            runs = [(PER_CALL_PARTS, prefix), (COPY_PARTS, [])] if prefix else [(PER_CALL_PARTS + COPY_PARTS, [])]
            for parts, pfx in runs:
                url = f"unix://{tmp}/gpushim-{parts}.sock" if tr == "unix" else f"tcp://127.0.0.1:{free_port()}"
                try:
                    with server(url, tmp, pfx):
                        run_cuda(cuda, url, prm, errors, timeout, parts, pfx, out)
                except RuntimeError as e:
                    errors.append(str(e))
    baseline_runs.append(run_baselines(raw, prm, errors, prefix))
    res["baseline_runs"] = baseline_runs
    res["baselines"] = merge_baselines(baseline_runs)
    if args.ptx:
        p = subprocess.run([sys.executable, str(BENCH / "ptx_bench.py"), *(["--repeat", "1"] if args.quick else [])],
                           capture_output=True, text=True, cwd=ROOT)
        res["ptx"] = {"returncode": p.returncode, "output": p.stdout[-4000:], "stderr": p.stderr[-2000:]}
        if p.returncode:
            errors.append(f"ptx_bench: exit status {p.returncode}")
    res["seconds"] = round(time.monotonic() - t0, 1)
    res["meta"]["loadavg_end"] = os.getloadavg()
    res["errors"] = errors
    rows, goals = build_rows(res)
    res["rows"] = [r.as_json() for r in rows]
    res["goals"] = goals
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown(rows, goals, res))
    if not args.no_table:
        print_table(rows, goals, res)
        if args.ptx:
            print(res["ptx"]["output"])
        print(f"results: {args.out} ({res['seconds']} s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
