"""The server's side of CUDA's synchronisation rules (docs/semantics.md), on a session with two emulated devices
driven frame by frame: a host function the client has not finished holds a stream, and each test checks which
replies come while it is held. The end-to-end versions are tests/e2e/test_sync.py."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpushim.backends.emulator.backend import EmulatorBackend
from gpushim.cuda_errors import Err
from gpushim.protocol import CALL, OPS_BY_NAME, POST, REPLY
from gpushim.server.session import Session, SessionInfo


class Client:
    def __init__(self, tmp: Path) -> None:
        from gpushim.server.modules import ModuleStore

        self.sent: list = []
        self.s = Session(EmulatorBackend(count=2, memory_limit=1 << 28), SessionInfo(1, 1, "order", 13000, 0, [0, 1]),
                         self.sent.append, logging.getLogger("order"), ModuleStore(tmp / "modules"))
        self.seq = 0

    def post(self, op: str, *args: object) -> None:
        self.seq += 1
        self.s.dispatch([POST, self.seq, OPS_BY_NAME[op].id, list(args)])

    def call(self, op: str, *args: object) -> int:
        """Sends a CALL; returns its sequence number (its reply may come later)."""
        self.seq += 1
        self.s.dispatch([CALL, self.seq, OPS_BY_NAME[op].id, list(args)])
        return self.seq

    def reply(self, seq: int) -> list | None:
        return next((m for m in self.sent if m[0] == REPLY and m[1] == seq), None)

    def run(self, op: str, *args: object) -> list:
        r = self.reply(self.call(op, *args))
        assert r is not None, f"{op} did not answer"
        return r

    def hold(self, stream: int) -> int:
        """Queues a host function on stream; returns its id (finish it with release)."""
        self.seq += 1
        cb = 1000 + self.seq
        self.post("STREAM_HOST_FUNC", stream, cb)
        return cb

    def release(self, cb: int) -> None:
        self.post("CALLBACK_DONE", cb)


@pytest.fixture
def c(tmp_path: Path) -> Client:
    return Client(tmp_path)


def test_legacy_sync_waits_for_blocking_streams_only(c: Client) -> None:
    nb = c.run("STREAM_CREATE", 0, 1, 0)[3][0]
    blocking = c.run("STREAM_CREATE", 0, 0, 0)[3][0]
    cb = c.hold(nb)
    assert c.run("STREAM_SYNC", 0)[2] == 0  # device 0's legacy stream: the held non-blocking one is not waited for
    assert c.run("STREAM_QUERY", 0)[2] == 0
    cb2 = c.hold(blocking)
    seq = c.call("STREAM_SYNC", 0)
    assert c.reply(seq) is None  # a blocking stream is waited for
    assert c.run("STREAM_QUERY", 0)[2] == Err.NOT_READY
    c.release(cb2)
    assert c.reply(seq)[2] == 0
    c.release(cb)


def test_each_device_has_its_own_legacy_stream(c: Client) -> None:
    d1 = c.run("MALLOC", 1, 4096)[3][0]
    cb = c.hold(1)  # device 1's legacy stream
    c.post("MEMSET", d1, 7, 4096, 1)
    assert c.run("STREAM_SYNC", 0)[2] == 0  # device 0's is idle
    seq = c.call("MEMCPY_D2H", d1, 16, 1)
    assert c.reply(seq) is None
    c.release(cb)
    assert bytes(c.reply(seq)[3][0]) == b"\x07" * 16


def test_d2h_on_a_blocking_stream_waits_for_legacy_work(c: Client) -> None:
    d = c.run("MALLOC", 0, 4096)[3][0]
    s = c.run("STREAM_CREATE", 0, 0, 0)[3][0]
    cb = c.hold(0)
    c.post("MEMSET", d, 5, 4096, 0)
    seq = c.call("MEMCPY_D2H", d, 8, s)
    seq2 = c.call("MEMCPY2D_D2H", d, 64, 8, 2, s)
    assert c.reply(seq) is None and c.reply(seq2) is None
    c.release(cb)
    assert bytes(c.reply(seq)[3][0]) == b"\x05" * 8
    assert bytes(c.reply(seq2)[3][0]) == b"\x05" * 16


def test_memcpy_peer_fences_all_three_devices(c: Client) -> None:
    d0 = c.run("MALLOC", 0, 4096)[3][0]
    d1 = c.run("MALLOC", 1, 4096)[3][0]
    nb1 = c.run("STREAM_CREATE", 1, 1, 0)[3][0]
    nb0 = c.run("STREAM_CREATE", 0, 1, 0)[3][0]
    cb = c.hold(nb1)
    c.post("MEMSET", d1, 4, 4096, nb1)
    c.post("MEMCPY_PEER", d0, 0, d1, 1, 4096, 0)  # waits for nb1 (non-blocking, source device)
    seq = c.call("MEMCPY_D2H", d0, 8, nb0)  # later work on the destination device waits for the copy
    assert c.reply(seq) is None
    c.release(cb)
    assert bytes(c.reply(seq)[3][0]) == b"\x04" * 8


def test_memcpy_peer_refuses_pointers_of_other_devices(c: Client) -> None:
    d0 = c.run("MALLOC", 0, 4096)[3][0]
    d1 = c.run("MALLOC", 1, 4096)[3][0]
    assert c.run("MEMCPY_PEER", d0, 1, d1, 1, 16, 0)[2] == Err.INVALID_VALUE  # d0 is not device 1's
    assert c.run("MEMCPY_PEER", d0, 0, 0x1234, 1, 16, 0)[2] == Err.INVALID_VALUE
    assert c.run("MEMCPY_PEER", d0, 0, d1, 5, 16, 0)[2] == Err.INVALID_DEVICE
    assert c.run("MEMCPY_PEER", d0, 0, d1, 1, 8192, 0)[2] == Err.INVALID_VALUE  # past the allocation
    assert c.run("STREAM_SYNC", 0)[2] == 0  # nothing broken behind
