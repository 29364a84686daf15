"""Soak: many real clients (nvcc programs) started and killed at random moments -- mid-kernel, mid-copy,
mid-upload, during the handshake -- and afterwards nothing is left behind: no session in status, no worker
process, the server's memory and descriptors back near their baseline, no stray file in the module store,
the server's directory or /dev/shm, no internal error in the log, and the host-RAM ledger is empty.

Bounded for CI (GPUSHIM_SOAK_SECONDS, default 15); `make soak` runs it for 5 minutes."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time

from .conftest import kv
from .test_lifetime import children

SECONDS = float(os.environ.get("GPUSHIM_SOAK_SECONDS", "15"))
CONCURRENT = 4
# (program, args): long kernels, held memory, copies, managed memory, streams, module uploads, forks
PROGRAMS = [
    ("spin", ()), ("hold", ("32", "3", "5")), ("memory", ()), ("managed", ()), ("streams", ()),
    ("quota", ("malloc", "40")), ("quota", ("globals", "8")), ("threads_fork", ()),
]


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def shm_files() -> set[str]:
    """gpushim's files in /dev/shm (other programs on the machine may come and go there meanwhile)."""
    try:
        return {name for name in os.listdir("/dev/shm") if "gpushim" in name}
    except FileNotFoundError:
        return set()


def test_clients_killed_at_random_leave_nothing_behind(make_server):
    server = make_server("--memory-cap", "512M")
    rng = random.Random(int(os.environ.get("GPUSHIM_SOAK_SEED", "20261201")))
    warm = server.run("quota", "malloc", "40")  # the server's own baseline includes one served session
    assert warm.returncode == 0, warm.stderr
    deadline = time.monotonic() + 5
    while children(server.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    base_rss, base_fds, base_shm = rss_kib(server.proc.pid), fd_count(server.proc.pid), shm_files()
    server_dir = set(os.listdir(server.log.parent))

    running: list[tuple[subprocess.Popen, float]] = []
    started = killed = 0
    end = time.monotonic() + SECONDS
    while time.monotonic() < end:
        while len(running) < CONCURRENT:
            prog, args = rng.choice(PROGRAMS)
            p = server.start(prog, *args)
            running.append((p, time.monotonic() + rng.uniform(0.0, 2.0)))
            started += 1
        time.sleep(0.05)
        for p, when in list(running):
            if p.poll() is not None:
                running.remove((p, when))
            elif time.monotonic() >= when:
                p.send_signal(rng.choice([signal.SIGKILL, signal.SIGKILL, signal.SIGTERM]))
                killed += 1
    for p, _ in running:
        p.kill()
    for p, _ in running:
        p.communicate(timeout=30)
    assert started >= 8 and killed >= 4

    deadline = time.monotonic() + 10
    while (children(server.proc.pid) or server.status()["sessions"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not children(server.proc.pid), "worker processes left behind"
    assert server.status()["sessions"] == []
    assert fd_count(server.proc.pid) <= base_fds
    assert rss_kib(server.proc.pid) < base_rss + 16 * 1024
    assert shm_files() <= base_shm
    assert set(os.listdir(server.log.parent)) == server_dir
    assert all(name.endswith(".fatbin") for name in os.listdir(server.log.parent / "modules"))
    # the host-RAM ledger holds nothing: 2 x 200 MiB fit the 512 MiB cap again
    v = kv(server.run("quota", "malloc", "200").stdout)
    assert v["malloc.first"] == "0" and v["malloc.second"] == "0" and int(v["meminfo.free"]) >= 300 << 20
    log = server.log.read_text()
    assert "Traceback" not in log and "internal error" not in log, log[-4000:]
    assert server.proc.poll() is None
