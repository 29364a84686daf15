"""Sessions are isolated and cleaned up; the server survives bad clients."""

from __future__ import annotations

import os
import signal
import socket
import struct
import time

import msgpack

from gpushim.protocol import CALL, HELLO, OPS_BY_NAME, PROTOCOL_VERSION


def wait_line(proc, prefix: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(prefix):
            return line
        if not line and proc.poll() is not None:
            raise AssertionError(f"program ended early: {proc.stderr.read()}")
    raise AssertionError(f"no '{prefix}' line")


def sessions(server) -> list[dict]:
    return server.status()["sessions"]


def wait_sessions(server, n: int, timeout: float = 60) -> list[dict]:
    """Until status lists n sessions (the timeout only bounds a hang: a loaded host can take seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = sessions(server)
        if len(s) == n:
            return s
        time.sleep(0.05)
    raise AssertionError(f"expected {n} sessions, have {sessions(server)}")


def test_two_clients_see_separate_memory(server, tmp_path):
    # both hold their memory until the stop file exists (a fixed time could end one before the other started)
    stop = tmp_path / "stop"
    a = server.start("hold", "16", "17", "60", str(stop))
    b = server.start("hold", "16", "99", "60", str(stop))
    addr_a = wait_line(a, "ready").split()[1]
    addr_b = wait_line(b, "ready").split()[1]
    # Each session has its own arena: the same address may come back, and holds different data.
    assert addr_a.startswith("0x") and addr_b.startswith("0x")
    held = wait_sessions(server, 2)
    assert sorted(s["allocated_bytes"] for s in held) == [16 << 20, 16 << 20]
    stop.touch()
    out_a, _ = a.communicate(timeout=60)
    out_b, _ = b.communicate(timeout=60)
    assert "intact 17" in out_a and "intact 99" in out_b


def test_sigkilled_client_leaves_nothing_allocated(server):
    p = server.start("hold", "64", "5", "60")
    wait_line(p, "ready")
    held = wait_sessions(server, 1)
    assert held[0]["allocated_bytes"] == 64 << 20
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    wait_sessions(server, 0)  # the worker saw its client go and exited; its memory went with it
    log = server.log.read_text()
    # Which of the worker's two ways out it took depends on whether it was still running the (asynchronous)
    # cudaMemset when the kill came: its main thread reads the end of the connection when idle; when busy, the
    # hang-up watcher ends it 0.5 s later. On a loaded host either can happen.
    assert "freeing its resources" in log or "client disconnected while the worker was busy" in log, log[-2000:]


def raw_client(server) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(server.path))
    s.settimeout(10)
    return s


def send(s: socket.socket, value) -> None:
    body = msgpack.packb(value, use_bin_type=True)
    s.sendall(struct.pack("<I", len(body)) + body)


def recv(s: socket.socket):
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (n,) = struct.unpack("<I", head)
    body = b""
    while len(body) < n:
        chunk = s.recv(n - len(body))
        if not chunk:
            return None
        body += chunk
    return msgpack.unpackb(body, raw=False, strict_map_key=False)


def hello(s: socket.socket) -> dict:
    send(s, [HELLO, {"proto": PROTOCOL_VERSION, "runtime": 12040, "pid": os.getpid(), "program": "pytest"}])
    reply = recv(s)
    assert reply[0] == HELLO and reply[1]["error"] == 0, reply
    return reply[1]


def test_malformed_frames_end_only_that_session(server):
    good = server.start("hold", "8", "3", "3")
    wait_line(good, "ready")
    bad_inputs = [
        b"\xc1\xc1\xc1",  # not msgpack
        msgpack.packb([CALL, 1, 9999, []]),  # unknown operation
        msgpack.packb([CALL, 1, OPS_BY_NAME["MALLOC"].id, [0]]),  # wrong argument count
        msgpack.packb([CALL, 1, OPS_BY_NAME["MALLOC"].id, [0, "big"]]),  # wrong argument type
        msgpack.packb({"not": "a frame"}),
    ]
    for body in bad_inputs:
        s = raw_client(server)
        hello(s)
        s.sendall(struct.pack("<I", len(body)) + body)
        reply = recv(s)
        assert reply is not None and reply[0] == 4, reply  # FATAL, with the reason
        assert "malformed frame" in reply[3]
        assert recv(s) is None  # then the session is closed
        s.close()
    # an oversized length prefix and a missing handshake
    s = raw_client(server)
    s.sendall(struct.pack("<I", 0xFFFFFFF0))
    reply = recv(s)  # refused with the reason, then closed
    assert reply[0] == HELLO and "exceeds" in reply[1]["message"], reply
    assert recv(s) is None
    s = raw_client(server)
    send(s, [CALL, 1, 1, []])
    reply = recv(s)
    assert reply[0] == HELLO and reply[1]["error"] != 0
    out, err = good.communicate(timeout=60)
    assert "intact 3" in out, err  # the well-behaved client never noticed
    assert server.proc.poll() is None


def test_protocol_version_mismatch_is_refused(server):
    s = raw_client(server)
    send(s, [HELLO, {"proto": PROTOCOL_VERSION + 1}])
    reply = recv(s)
    assert reply[1]["error"] != 0
    assert "protocol version" in reply[1]["message"]


def test_raw_session_calls_and_bad_pointers(server):
    s = raw_client(server)
    assert hello(s)["devices"] == 1
    ops = OPS_BY_NAME
    send(s, [CALL, 1, ops["MALLOC"].id, [0, 4096]])
    r = recv(s)
    assert r[:3] == [2, 1, 0]
    ptr = r[3][0]
    send(s, [CALL, 2, ops["MEMCPY_H2D"].id, [ptr + 4000, 0, b"x" * 200]])
    r = recv(s)
    assert r[2] == 1 and r[5] is None  # cudaErrorInvalidValue, no note printed for an ordinary error
    send(s, [CALL, 3, ops["FREE"].id, [ptr]])
    assert recv(s)[2] == 0
    send(s, [CALL, 4, ops["FREE"].id, [ptr]])
    assert recv(s)[2] == 1  # double free
    send(s, [CALL, 5, ops["STREAM_SYNC"].id, [0x1234]])
    assert recv(s)[2] == 400  # not a stream of this session
    send(s, [CALL, 6, ops["DEVICE_PROPS"].id, [3]])
    assert recv(s)[2] == 101
    send(s, [CALL, 7, ops["SESSION_INFO"].id, []])
    info = recv(s)[3][0]
    assert info["allocations"] == 0 and info["program"] == "pytest"
    assert info["launches"] == 0 and info["thread_instructions"] == 0


def test_sigterm_stops_cleanly_and_removes_socket(server, tmp_path):
    stop = tmp_path / "stop"  # the client's next call comes after the server stopped, however slow the host
    p = server.start("hold", "1", "1", "60", str(stop))
    wait_line(p, "ready")
    code = server.stop()
    assert code == 0
    assert not server.path.exists()
    stop.touch()
    p.wait(30)
    assert p.returncode == 1  # its session ended with the server: the next call fails, no hang, no crash
    err = p.stderr.read()
    assert "lost the connection to the gpushim server" in err
    assert "cudaErrorDevicesUnavailable" in err


def test_priority_orders_sessions_through_the_scheduler(make_server):
    s = make_server()  # --max-priority 0: no client may claim more than the default
    # each holds its session for 60 s (killed below): with 3 s, a loaded host could end the first before the
    # second had started
    low = s.start("hold", "1", "1", "60", GPUSHIM_PRIORITY="-5")
    high = s.start("hold", "1", "2", "60", GPUSHIM_PRIORITY="50")  # clamped to --max-priority (0)
    try:
        wait_line(low, "ready")
        wait_line(high, "ready")
        nice = {x["priority"]: x["nice"] for x in wait_sessions(s, 2)}
        assert nice == {-5: 5, 0: 0}
    finally:
        for p in (low, high):
            p.kill()
            p.communicate(timeout=60)
