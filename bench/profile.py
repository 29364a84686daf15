"""Where a gpushim server spends its time on one benchmark: runs bench/bin/cuda_bench (built by bench/run.py)
through a fresh emulator server under py-spy (`pip install py-spy`) and prints the worker process's hottest
functions, by own time and including callees.

    python bench/profile.py sync                 # 20000 cudaMemGetInfo round trips
    python bench/profile.py h2d --host pageable  # 256 MiB cudaMemcpy H2D from pageable memory
    python bench/profile.py d2h --host pinned --transport tcp
    python bench/profile.py memset               # 100000 cudaMemsetAsync + one synchronise
    python bench/profile.py sync --cprofile      # without py-spy: the worker under cProfile (deterministic,
                                                 # wall time per function, slowed by the profiler itself)

Samples of the supervisor waiting in accept() are left out; only the session's worker is counted.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import BIN, SHIM, build, free_port, server  # noqa: E402

WORKLOADS = {
    "sync": ["-w", "s", "-s", "20000"],
    "memset": ["-w", "a", "-a", "100000", "-r", "1"],
    "launch": ["-w", "k", "-k", "5000", "-r", "1"],
    "malloc": ["-w", "m", "-m", "5000"],
    "h2d": ["-w", "c", "-D", "h2d", "-z", str(256 << 20), "-b", str(2560 << 20)],
    "d2h": ["-w", "c", "-D", "d2h", "-z", str(256 << 20), "-b", str(2560 << 20)],
}


def summarise(raw: Path, top: int) -> str:
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not any("run_worker" in f for f in frames):
            continue
        n = int(count)
        total += n
        own[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
    if not total:
        return "no samples of a worker process"
    lines = [f"{total} samples of the worker"]
    lines += ["own time:"] + [f"  {n / total:6.1%}  {f}" for f, n in own.most_common(top)]
    skip = ("process ", "click/", "<frozen", "__main__", "cli.py", "supervisor.py")
    lines += ["including callees:"] + [f"  {n / total:6.1%}  {f}" for f, n in incl.most_common(top * 3)
                                        if not any(s in f for s in skip)][:top]
    return "\n".join(lines)


def with_cprofile(args: argparse.Namespace) -> int:
    import pstats

    build()
    cmd = [str(BIN / "cuda_bench"), *WORKLOADS[args.workload], "-H", args.host]
    with tempfile.TemporaryDirectory(prefix="gpushim-profile-") as td:
        tmp = Path(td)
        (tmp / "prof").mkdir()
        os.environ["GPUSHIM_WORKER_PROFILE"] = str(tmp / "prof")  # the server's workers inherit it
        url = f"unix://{tmp}/gpushim.sock" if args.transport == "unix" else f"tcp://127.0.0.1:{free_port()}"
        with server(url, tmp):
            env = dict(os.environ, LD_PRELOAD=str(SHIM), GPUSHIM_SERVER=url)
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            time.sleep(0.5)  # the worker writes its statistics as it ends
        del os.environ["GPUSHIM_WORKER_PROFILE"]
        print(out.stdout.strip())
        files = [str(p) for p in (tmp / "prof").glob("*.prof")]
        if not files:
            print("no worker statistics were written", file=sys.stderr)
            return 1
        pstats.Stats(*files).sort_stats("tottime").print_stats(args.top)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("--host", choices=["pageable", "pinned", "both"], default="both")
    ap.add_argument("--transport", choices=["unix", "tcp"], default="unix")
    ap.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    ap.add_argument("--native", action="store_true", help="include C frames (py-spy --native)")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--keep", type=Path, help="also keep py-spy's raw (collapsed-stack) output here")
    ap.add_argument("--cprofile", action="store_true", help="profile the worker with cProfile instead of py-spy "
                    "(GPUSHIM_WORKER_PROFILE, gpushim/server/worker.py)")
    args = ap.parse_args()
    if args.cprofile:
        return with_cprofile(args)
    pyspy = shutil.which("py-spy")
    if not pyspy:
        raise SystemExit("profile: py-spy is not installed (pip install py-spy)")
    build()
    cmd = [str(BIN / "cuda_bench"), *WORKLOADS[args.workload], "-H", args.host]
    with tempfile.TemporaryDirectory(prefix="gpushim-profile-") as td:
        tmp = Path(td)
        url = f"unix://{tmp}/gpushim.sock" if args.transport == "unix" else f"tcp://127.0.0.1:{free_port()}"
        raw = args.keep or tmp / "profile.txt"
        with server(url, tmp) as (_, proc):
            spy = subprocess.Popen([pyspy, "record", "--subprocesses", "--rate", str(args.rate), "--format", "raw",
                                    "--output", str(raw), "--pid", str(proc.pid), *(["--native"] if args.native
                                                                                    else [])],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            time.sleep(1.0)  # py-spy attaches
            env = dict(os.environ, LD_PRELOAD=str(SHIM), GPUSHIM_SERVER=url)
            t0 = time.monotonic()
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            wall = time.monotonic() - t0
            time.sleep(0.5)
            spy.send_signal(2)  # SIGINT: py-spy writes its output and exits
            _, err = spy.communicate(timeout=60)
        print(out.stdout.strip())
        if out.returncode:
            print(out.stderr.strip(), file=sys.stderr)
        print(f"cuda_bench ran {wall:.1f} s")
        if not raw.exists():
            print(f"py-spy wrote nothing: {err.strip()}", file=sys.stderr)
            return 1
        print(summarise(raw, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
