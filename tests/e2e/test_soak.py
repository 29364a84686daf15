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


def fd_targets(pid: int) -> dict[str, str]:
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    return out


def settled_fd_count(server) -> int:  # noqa: ANN001
    """The server's descriptors once it is done with every connection made so far. The supervisor closes a
    status connection just after sending the answer, so each of two status requests is read until the server's
    end closes; a killed client's connection that waited with the first is dropped in the loop iteration that
    answers the first (it is readable, with its end of file, in the same select), before the second is served."""
    from gpushim.cli import client_token, connect
    from gpushim.protocol import STATUS
    from gpushim.wire import recv_frame, send_frame

    for _ in range(2):
        with connect(server.url, 60) as s:
            send_frame(s, [STATUS, {"token": client_token()}])
            assert not recv_frame(s)[1].get("error")
            assert s.recv(1) == b"", "the server did not close a status connection"
    return fd_count(server.proc.pid)


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
    deadline = time.monotonic() + 30
    while (children(server.proc.pid) or server.status()["sessions"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not children(server.proc.pid)
    base_fds = settled_fd_count(server)
    base_rss, base_shm = rss_kib(server.proc.pid), shm_files()
    base_targets = fd_targets(server.proc.pid)
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

    # Waits for events, not for a time: a loaded host may take long to run them (a leak never settles).
    deadline = time.monotonic() + 60
    while (children(server.proc.pid) or server.status()["sessions"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not children(server.proc.pid), "worker processes left behind"
    assert server.status()["sessions"] == []
    count, now = settled_fd_count(server), fd_targets(server.proc.pid)
    assert count <= base_fds, f"new descriptors {sorted(set(now.items()) - set(base_targets.items()))}"
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
