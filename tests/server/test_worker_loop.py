"""The worker's two loops (the emulator's blocking one, and the polling one of backends whose work completes
on its own, with tick()) both end cleanly when the client leaves: exit status 0, no traceback. Each worker
runs in a forked child, as under the supervisor."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import msgpack
import pytest
from conftest import fork_worker

from gpushim.backends.emulator.backend import EmulatorSession
from gpushim.protocol import CALL, OPS_BY_NAME
from gpushim.server.session import SessionInfo


def frame(value: object) -> bytes:
    body = msgpack.packb(value, use_bin_type=True)
    return struct.pack("<I", len(body)) + body


@pytest.mark.parametrize("polling", [False, True])
def test_worker_ends_cleanly_when_the_client_leaves(tmp_path: Path, polling: bool) -> None:
    def prepare() -> None:
        if polling:  # a backend polled while replies wait (as the cuda backend is)
            EmulatorSession.tick = lambda self, waiting: 0.05  # type: ignore[attr-defined]

    log = tmp_path / "worker.log"
    pid, client, sup = fork_worker(tmp_path / "m", SessionInfo(1, os.getpid(), "loop", 13000, 0, [0]), prepare, log)
    client.sendall(frame([CALL, 1, OPS_BY_NAME["MALLOC"].id, [0, 4096]]))
    head = client.recv(4)
    assert len(head) == 4
    client.close()
    _, status = os.waitpid(pid, 0)
    sup.close()
    text = log.read_text()
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "Traceback" not in text and "client disconnected after 1 calls" in text
