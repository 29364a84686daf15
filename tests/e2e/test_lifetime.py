"""A worker never outlives its client: whatever it is doing when the client goes away (a kernel of 2^31-1
blocks, a 2D memset of 16 Mi rows), it ends within a second or two, and is gone from `gpushim status` and
the process table. Client disconnects are info lines in the log, never internal errors."""

from __future__ import annotations

import os
import signal
import time

from gpushim.protocol import CALL, OPS_BY_NAME

from .test_isolation import hello, raw_client, recv, send, wait_line, wait_sessions

OPS = OPS_BY_NAME
GONE_WITHIN_S = 2.5


def children(pid: int) -> set[int]:
    """The processes whose parent is pid (a server's session workers), zombies included."""
    out = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat[stat.rfind(")") + 2 :].split()[1]) == pid:
            out.add(int(entry))
    return out


def exited(pid: int) -> bool:
    """pid has ended: gone from the process table, or a zombie its parent has not reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return True
    return stat[stat.rfind(")") + 2] in "ZX"


def wait_workers_gone(server, workers: set[int], timeout: float = 60) -> float:
    """Seconds until every one of the workers has exited (what a client's going away must cause; the timeout
    only bounds a hang). Afterwards waits for the server to reap them and drop their sessions: that happens
    on its own schedule (its loop wakes at least every 0.5 s), not part of how long a worker outlives its client."""
    t0 = time.monotonic()
    while not all(exited(w) for w in workers):
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"workers {[w for w in workers if not exited(w)]} still running after {timeout} s")
        time.sleep(0.02)
    took = time.monotonic() - t0
    while workers & children(server.proc.pid) or server.status()["sessions"]:
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"workers {workers & children(server.proc.pid)} not reaped after {timeout} s; "
                                 f"status: {server.status()['sessions']}")
        time.sleep(0.02)
    return took


def wait_busy(worker: int) -> None:
    """Until the worker has used CPU time since now: it is running the kernel (an event, however loaded the host)."""
    cpu = busy_cpu_seconds(worker)
    deadline = time.monotonic() + 60
    while busy_cpu_seconds(worker) <= cpu:
        assert time.monotonic() < deadline, "the worker is not running the kernel"
        time.sleep(0.05)


def busy_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def assert_clean_log(server) -> None:
    log = server.log.read_text()
    assert "internal error" not in log and "Traceback" not in log, log[-3000:]


def test_killed_client_mid_kernel_ends_its_worker(server):
    p = server.start("spin")
    wait_line(p, "launched")
    [worker] = children(server.proc.pid)
    wait_busy(worker)
    assert len(wait_sessions(server, 1)) == 1
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert wait_workers_gone(server, {worker}) < GONE_WITHIN_S
    log = server.log.read_text()
    assert "client disconnected while the worker was busy" in log
    assert_clean_log(server)


def test_client_gone_during_a_huge_2d_memset_ends_its_worker(server):
    s = raw_client(server)
    hello(s)
    send(s, [CALL, 1, OPS["MALLOC"].id, [0, 16 << 20]])
    r = recv(s)
    assert r[2] == 0
    [worker] = children(server.proc.pid)  # answered: the worker exists
    ptr = r[3][0]
    # CUDA: a 2D memset of width 0 sets nothing, whatever its height (here 10^15 rows): answered at once
    t0 = time.monotonic()
    send(s, [CALL, 2, OPS["MEMSET2D"].id, [ptr, 0, 7, 0, 10**15, 0]])
    assert recv(s)[2] == 0
    assert time.monotonic() - t0 < 2
    # 16 Mi rows of one byte: a long operation (tens of seconds on the emulator), abandoned by its client
    send(s, [CALL, 3, OPS["MEMSET2D"].id, [ptr, 1, 7, 1, 16 << 20, 0]])
    wait_busy(worker)
    s.close()
    assert wait_workers_gone(server, {worker}) < GONE_WITHIN_S
    assert_clean_log(server)


def test_wait_with_a_bad_2d_copy_gets_an_error_and_later_calls_work(server):
    s = raw_client(server)
    hello(s)
    send(s, [CALL, 1, OPS["MALLOC"].id, [0, 4096]])
    ptr = recv(s)[3][0]
    # MEMCPY2D_D2H of 2^62 rows (a synchronising call, answered through the session's waiting list); a height
    # of -1 no longer reaches the session: the protocol's validator ends it (tests/server/test_validate.py)
    send(s, [CALL, 2, OPS["MEMCPY2D_D2H"].id, [ptr, 64, 64, 1 << 62, 0]])
    r = recv(s)
    assert r[1] == 2 and r[2] == 1  # cudaErrorInvalidValue
    send(s, [CALL, 3, OPS["DEVICE_SYNC"].id, [0]])
    assert recv(s)[1:3] == [3, 0]
    send(s, [CALL, 4, OPS["MEMCPY_D2H"].id, [ptr, 16, 0]])
    r = recv(s)
    assert r[1:3] == [4, 0] and len(r[3][0]) == 16
    s.close()
    wait_sessions(server, 0)
    assert_clean_log(server)


def test_clients_leaving_mid_reply_are_info_lines(server):
    for _ in range(5):
        s = raw_client(server)
        hello(s)
        send(s, [CALL, 1, OPS["MALLOC"].id, [0, 32 << 20]])
        ptr = recv(s)[3][0]
        send(s, [CALL, 2, OPS["MEMCPY_D2H"].id, [ptr, 32 << 20, 0]])  # a 32 MiB reply nobody reads
        s.close()
        wait_sessions(server, 0)
    log = server.log.read_text()
    assert log.count("client connection lost") + log.count("client disconnected") >= 5
    assert_clean_log(server)


def test_killed_tcp_client_mid_kernel_ends_its_worker(make_server, tmp_path, monkeypatch):
    # over TCP the hang-up is the client's FIN (a vanished host is caught by keepalive, not tested here)
    token = tmp_path / "token"
    token.write_text("lifetime-token\n")
    monkeypatch.setenv("GPUSHIM_TOKEN", "lifetime-token")  # for status queries and the client
    server = make_server("--token-file", str(token), listen="tcp://127.0.0.1:0")
    p = server.start("spin")
    wait_line(p, "launched")
    [worker] = children(server.proc.pid)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert wait_workers_gone(server, {worker}) < GONE_WITHIN_S
    assert "client disconnected while the worker was busy" in server.log.read_text()
    assert_clean_log(server)
