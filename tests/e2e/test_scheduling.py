"""The device scheduler and placement end to end (issue 15): real sched_client / hold programs under the shim
against a `gpushim serve` process. The guarantees are asserted with generous bounds on a small run (this
machine's CPUs are shared); bench/sched_bench.py measures the real numbers."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from gpushim.cli import query_status
from tests.e2e.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import sched_bench  # noqa: E402

# fair_iters: each client's 40 kernels take about a second of device time in all (the JIT runs 2000 iterations
# in well under a millisecond, and then a client's round trips and the host's scheduling decided who finished
# first, not the device scheduler)
SMALL = sched_bench.Sizes(clients=4, fair_kernels=40, fair_iters=200_000, hp_kernels=15, hp_iters=3000,
                          hp_gap_us=2000, be_iters=200)


def test_identical_clients_finish_together(make_server, tmp_path: Path) -> None:
    s = make_server("--sched", "fair")
    r = sched_bench.fair_run(s.url, tmp_path, SMALL)
    assert r["slowest_over_fastest"] <= 1.6, r  # the benchmark's goal is 1.2; generous on a shared machine


def test_high_priority_client_is_served_first_and_best_effort_progresses(make_server, tmp_path: Path) -> None:
    # What the scheduler decides is who gets the device next, so that is what this asserts, from its own
    # accounting in `gpushim status`: whenever the high-priority session waited, no other session was granted
    # the device first. (Its wall-clock latency, which bench/sched_bench.py reports, also counts the host's CPU
    # time given to six more busy processes, and failed a bound here about 1 run in 5 at load 13.) Its weight of
    # 0.01 makes fair share alone serve it last: only the priority order serves it first. The best-effort
    # kernels are long (50x the benchmark's) so that they queue for the device and the high-priority session
    # must go ahead of them; it repeats until it did.
    s = make_server("--sched", "priority", "--max-priority", "1", "--weight", "1=0.01")
    go = tmp_path / "go"
    be = [sched_bench.start_client(s.url, 10**7, 50 * SMALL.be_iters, go) for _ in range(SMALL.clients - 1)]
    try:
        for p in be:
            sched_bench.wait_ready(p)
        go.touch()
        for attempt in range(20):
            end = tmp_path / f"end-{attempt}"
            hp = sched_bench.start_client(s.url, SMALL.hp_kernels, SMALL.hp_iters, None, SMALL.hp_gap_us,
                                          priority=1, end=end)
            assert hp.stdout is not None
            done = hp.stdout.readline()  # its results: its kernels ran, and its session stays until `end`
            rows = query_status(s.url)["scheduler"][0]["sessions"]
            end.touch()
            _, err = hp.communicate(timeout=60)
            assert done.startswith("{") and hp.returncode == 0, (done, err)
            high = [r for r in rows if r["priority"] == 1]
            assert len(high) == 1 and high[0]["kernels"] == SMALL.hp_kernels + 1, rows  # + its warm-up
            assert high[0]["passed_over"] == 0, rows
            if high[0]["ahead_of"]:
                break
        assert high[0]["ahead_of"] > 0 and high[0]["wait_s"] > 0, rows
        best_effort = [r for r in rows if r["priority"] == 0]
        assert len(best_effort) == SMALL.clients - 1 and all(r["kernels"] > 1 for r in best_effort), rows
    finally:
        for p in be:
            p.kill()
            p.wait()


def test_status_shows_each_sessions_priority_share_and_queue(make_server, tmp_path: Path) -> None:
    s = make_server("--sched", "priority", "--max-priority", "1", "--max-share", "0.9")
    go = tmp_path / "go"
    procs = [sched_bench.start_client(s.url, 10**6, 200, go, priority=p) for p in (0, 1)]
    try:
        for p in procs:
            sched_bench.wait_ready(p)
        go.touch()

        def rows_now() -> tuple[dict, dict]:
            st = s.status()
            return st, {r["priority"]: r for r in st["scheduler"][0]["sessions"]}

        # until each client has had a kernel (an event: a loaded host may take seconds to get there)
        st, rows = rows_now()
        deadline = time.monotonic() + 60
        while not (set(rows) == {0, 1} and all(r["kernels"] > 0 for r in rows.values())):
            assert time.monotonic() < deadline, rows
            time.sleep(0.1)
            st, rows = rows_now()
        dev = st["scheduler"][0]
        assert dev["policy"] == "priority" and dev["max_share"] == 0.9
        assert set(rows) == {0, 1}
        assert all(r["program"] == "sched_client" and r["kernels"] > 0 and r["share"] > 0 for r in rows.values())
        assert sum(r["share"] for r in rows.values()) <= 1.01  # read without the lock: approximate
        assert st["placement"][0]["sessions_placed"] == 2
        text = subprocess.run([sys.executable, "-m", "gpushim", "status", "--server", s.url], cwd=ROOT,
                              capture_output=True, text=True, timeout=30).stdout
        assert "device 0 scheduling (priority, max share 0.9)" in text
        assert "sched_client priority 1 weight 1: share" in text
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_placement_puts_a_new_session_on_the_least_loaded_device(make_server) -> None:
    s = make_server("--emulate-devices", "3")
    # both hold their sessions until killed below (20 s ran out on a loaded host: the test took 18 s there)
    first = s.start("hold", "64", "1", "600")
    second = None
    try:
        assert first.stdout and first.stdout.readline().startswith("ready")
        second = s.start("hold", "64", "2", "600")
        assert second.stdout and second.stdout.readline().startswith("ready")
        sessions = sorted(s.status()["sessions"], key=lambda x: x["session"])
        assert sessions[0]["devices"][0] == 0
        # device 0 holds the first session's 64 MiB and is its first device: the second lands elsewhere,
        # and still sees every device
        assert sessions[1]["devices"][0] != 0 and sorted(sessions[1]["devices"]) == [0, 1, 2]
        placement = {p["device"]: p for p in s.status()["placement"]}
        assert placement[0]["memory_used"] >= 64 << 20 or placement[0]["sessions_placed"] == 1
        shown = subprocess.run([sys.executable, "-m", "gpushim", "devices", "--server", s.url], cwd=ROOT,
                               capture_output=True, text=True, timeout=30)
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert "placement order" in lines[0] and len(lines) == 4
        # the device neither session uses comes first; the two used ones after it, each with its session
        assert lines[1].lstrip().startswith("2:") and "load 0" in lines[1], lines
        assert all("1 session(s) using it, 1 placed first" in ln for ln in lines[2:]), lines
        # a client naming its devices is not reordered
        named = s.run("device_query", GPUSHIM_DEVICES="0")
        assert named.returncode == 0, named.stderr
    finally:
        for p in (first, second):
            if p is not None:
                p.kill()
                p.wait()


def test_bad_scheduling_flags_are_refused() -> None:
    from gpushim.cli import main

    for args, msg in ((["--sched", "fifo"], "fifo"), (["--weight", "x"], "PRIORITY=WEIGHT"),
                      (["--weight", "1=-2"], "positive"), (["--max-share", "0"], "0")):
        r = CliRunner().invoke(main, ["serve", "--backend", "emulator", "--listen", "unix:///nonexistent/x.sock",
                                      *args])
        assert r.exit_code == 2, (args, r.output)
        assert msg in r.output, (args, r.output)
