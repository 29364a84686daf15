"""Fixtures for tests that run a real `gpushim serve` (shared with tests/e2e) and raw protocol clients."""

from __future__ import annotations

import os
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

import msgpack

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from e2e.conftest import BIN, ROOT, SHIM, Server, built, kv, make_server, server, usable_backend  # noqa: E402, F401


def connect(url: str, timeout: float = 10.0) -> socket.socket:
    """A raw connection to a server (unix:// or tcp://)."""
    if url.startswith("unix://"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(url[len("unix://"):])
        return s
    host, _, port = url.split("://", 1)[1].rpartition(":")
    return socket.create_connection((host, int(port)), timeout=timeout)


def send(s: socket.socket, value: Any) -> None:
    body = msgpack.packb(value, use_bin_type=True)
    s.sendall(struct.pack("<I", len(body)) + body)


def recv(s: socket.socket) -> Any:
    """One frame, or None when the peer closed (or reset) the connection."""
    def exact(n: int) -> bytes | None:
        out = b""
        while len(out) < n:
            try:
                chunk = s.recv(n - len(out))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            out += chunk
        return out
    head = exact(4)
    if head is None:
        return None
    body = exact(struct.unpack("<I", head)[0])
    return None if body is None else msgpack.unpackb(body, raw=False, strict_map_key=False)


def fork_worker(store: Path, info: Any, prepare: Any = None, log: Path | None = None
                ) -> tuple[int, socket.socket, socket.socket]:
    """A session worker (worker.py: run_worker) of an emulator backend in a forked child, as under the supervisor:
    its pid, the client's socket and the supervisor's end of the control socket (the worker ends when that
    closes). In the child, logging goes to `log` when given (an exception's traceback too) and `prepare()`
    runs before the worker. The child exits with the worker's status, 3 if it raised."""
    from gpushim.backends.emulator.backend import EmulatorBackend
    from gpushim.server.modules import ModuleStore
    from gpushim.server.worker import run_worker

    client, conn = socket.socketpair()
    sup, control = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            import logging

            if log is not None:
                logging.basicConfig(filename=log, level=logging.INFO, force=True)
            client.close()
            sup.close()
            if prepare is not None:
                prepare()
            be = EmulatorBackend(memory_limit=1 << 26, memory_cap=1 << 28)
            code = run_worker(conn, control, be, info, b"", ModuleStore(store))
        except BaseException:
            logging.getLogger("fork_worker").exception("the worker raised")
        finally:
            os._exit(code)
    conn.close()
    control.close()
    return pid, client, sup


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def wait_for(cond: Any, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
