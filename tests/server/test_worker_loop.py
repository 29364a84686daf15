"""The worker's two loops (the emulator's blocking one, and the polling one of backends whose work completes
on its own, with tick()) both end cleanly when the client leaves: exit status 0, no traceback. Each worker
runs in a forked child, as under the supervisor."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import msgpack
import pytest

from gpushim.backends.emulator.backend import EmulatorBackend, EmulatorSession
from gpushim.protocol import CALL, OPS_BY_NAME
from gpushim.server.modules import ModuleStore
from gpushim.server.session import SessionInfo
from gpushim.server.worker import run_worker


def frame(value: object) -> bytes:
    body = msgpack.packb(value, use_bin_type=True)
    return struct.pack("<I", len(body)) + body


@pytest.mark.parametrize("polling", [False, True])
def test_worker_ends_cleanly_when_the_client_leaves(tmp_path: Path, polling: bool) -> None:
    client, conn = socket.socketpair()
    sup, control = socket.socketpair()
    log = tmp_path / "worker.log"
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            import logging

            logging.basicConfig(filename=log, level=logging.INFO, force=True)
            if polling:  # a backend polled while replies wait (as the cuda backend is)
                EmulatorSession.tick = lambda self, waiting: 0.05  # type: ignore[attr-defined]
            client.close()
            sup.close()
            be = EmulatorBackend(memory_limit=1 << 26, memory_cap=1 << 28)
            code = run_worker(conn, control, be, SessionInfo(1, os.getpid(), "loop", 13000, 0, [0]), b"",
                              ModuleStore(tmp_path / "m"))
        except BaseException:
            import traceback

            with open(log, "a") as f:
                traceback.print_exc(file=f)
        finally:
            os._exit(code)
    conn.close()
    control.close()
    client.sendall(frame([CALL, 1, OPS_BY_NAME["MALLOC"].id, [0, 4096]]))
    head = client.recv(4)
    assert len(head) == 4
    client.close()
    _, status = os.waitpid(pid, 0)
    sup.close()
    text = log.read_text()
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "Traceback" not in text and "client disconnected after 1 calls" in text
