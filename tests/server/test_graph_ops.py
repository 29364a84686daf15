"""GRAPH_UPLOAD / GRAPH_LAUNCH / GRAPH_FREE with bad input: a clear CUDA error, the session goes on
(gpushim/server/ops_graph.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import msgpack
import pytest

from gpushim.backends.emulator.backend import EmulatorBackend
from gpushim.cuda_errors import Err
from gpushim.protocol import CALL, OPS_BY_NAME, REPLY
from gpushim.server.modules import ModuleStore
from gpushim.server.session import Session, SessionInfo

OP = {name: op.id for name, op in OPS_BY_NAME.items()}


@pytest.fixture
def session(tmp_path: Path) -> tuple[Session, list]:
    sent: list = []
    s = Session(EmulatorBackend(memory_limit=1 << 30), SessionInfo(1, 1, "graphs", 13000, 0, [0]), sent.append,
                logging.getLogger("graphs"), ModuleStore(tmp_path / "modules"))
    return s, sent


def call(s: Session, sent: list, op: str, *args: object) -> tuple[int, list]:
    sent.clear()
    s.dispatch([CALL, 1, OP[op], list(args)])
    [reply] = sent
    assert reply[0] == REPLY
    return reply[2], reply[3]


def test_a_segment_runs_its_calls_in_order_on_the_launch_stream(session) -> None:
    s, sent = session
    [ptr] = call(s, sent, "MALLOC", 0, 64)[1]
    calls = [[OP["MEMSET"], [ptr, 1, 64, 0]], [OP["MEMCPY_H2D"], [ptr + 8, 0, 4]],
             [OP["MEMCPY_D2D"], [ptr + 32, ptr, 16, 0]]]
    assert call(s, sent, "GRAPH_UPLOAD", 7, msgpack.packb(calls))[0] == 0
    assert call(s, sent, "GRAPH_LAUNCH", 7, 0, 0, [], b"\x09\x08\x07\x06")[0] == 0
    err, [data] = call(s, sent, "MEMCPY_D2H", ptr, 48, 0)
    assert err == 0
    assert bytes(data[:16]) == b"\x01" * 8 + b"\x09\x08\x07\x06" + b"\x01" * 4
    assert bytes(data[32:48]) == bytes(data[:16])


@pytest.mark.parametrize("calls", [
    b"\xc1",                                  # not msgpack
    msgpack.packb({"a": 1}),                  # not an array
    msgpack.packb([[OP["MALLOC"], [0, 16]]]),  # not a stream-ordered operation
    msgpack.packb([[OP["MEMSET"], [1, 2]]]),   # wrong argument count
    msgpack.packb([[OP["MEMSET"], [1, "x", 3, 0]]]),  # wrong argument type
    msgpack.packb([[OP["MEMCPY_H2D"], [1, 0, b"data"]]]),  # data must be a length here
    msgpack.packb([[OP["MEMCPY_H2D"], [1, 0, -5]]]),
    msgpack.packb([5]),                       # not [op, args]
])
def test_malformed_uploads_are_refused(session, calls: bytes) -> None:
    s, sent = session
    err, _ = call(s, sent, "GRAPH_UPLOAD", 1, calls)
    assert err == Err.INVALID_VALUE
    assert call(s, sent, "DEVICE_COUNT")[0] == 0  # the session goes on


def test_bad_launches_are_refused(session) -> None:
    s, sent = session
    [ptr] = call(s, sent, "MALLOC", 0, 64)[1]
    assert call(s, sent, "GRAPH_UPLOAD", 3, msgpack.packb([[OP["MEMCPY_H2D"], [ptr, 0, 4]]]))[0] == 0
    assert call(s, sent, "GRAPH_LAUNCH", 4, 0, 0, [], b"")[0] == Err.INVALID_VALUE  # unknown segment
    assert call(s, sent, "GRAPH_LAUNCH", 3, 0, 0, [], b"\x00")[0] == Err.INVALID_VALUE  # wrong data length
    assert call(s, sent, "GRAPH_LAUNCH", 3, 0, 0, [5], b"1234")[0] == Err.INVALID_VALUE  # wrong callback count
    assert call(s, sent, "GRAPH_LAUNCH", 3, 0x6000_0990, 0, [], b"1234")[0] == Err.INVALID_RESOURCE_HANDLE
    assert call(s, sent, "GRAPH_LAUNCH", 3, 0, 0x6000_0990, [], b"1234")[0] == Err.INVALID_RESOURCE_HANDLE
    # a segment whose memset is out of bounds: the error is the launch's, the session goes on
    assert call(s, sent, "GRAPH_UPLOAD", 5, msgpack.packb([[OP["MEMSET"], [0x10, 0, 4, 0]]]))[0] == 0
    assert call(s, sent, "GRAPH_LAUNCH", 5, 0, 0, [], b"")[0] == Err.INVALID_VALUE
    assert call(s, sent, "GRAPH_FREE", 3)[0] == 0
    assert call(s, sent, "GRAPH_FREE", 3)[0] == Err.INVALID_VALUE
    assert call(s, sent, "DEVICE_COUNT")[0] == 0


def test_uploads_are_limited(session, monkeypatch) -> None:
    from gpushim.server import ops_graph

    s, sent = session
    monkeypatch.setattr(ops_graph, "MAX_SEGMENT_BYTES", 100)
    assert call(s, sent, "GRAPH_UPLOAD", 1, msgpack.packb([[OP["MEMSET"], [1, 0, 4, 0]]] * 10))[0] == 0
    assert call(s, sent, "GRAPH_UPLOAD", 2, msgpack.packb([[OP["MEMSET"], [1, 0, 4, 0]]] * 10))[0] == \
        Err.MEMORY_ALLOCATION


def _cond(handle: int, kind: int, bodies: list) -> list:
    return [OP["GRAPH_COND"], [handle, kind, msgpack.packb(bodies), 0]]


def test_conditional_nodes_choose_bodies_by_the_handle_value(session) -> None:
    """GRAPH_COND in a segment: IF/ELSE, SWITCH and WHILE on the 4-byte value at the handle."""
    s, sent = session
    [h] = call(s, sent, "MALLOC", 0, 8)[1]
    [p] = call(s, sent, "MALLOC", 0, 16)[1]
    set_h = [OP["MEMSET_WIDE"], [h, 0, 0, 1, 1, 4, 0]]  # the WHILE body clears the condition
    calls = [_cond(h, 0, [[[OP["MEMSET"], [p, 1, 1, 0]]], [[OP["MEMSET"], [p, 2, 1, 0]]]]),
             _cond(h, 2, [[[OP["MEMSET"], [p + 1, 3, 1, 0]]], [[OP["MEMSET"], [p + 1, 4, 1, 0]]]]),
             _cond(h, 1, [[[OP["MEMSET"], [p + 2, 5, 1, 0]], set_h]])]
    assert call(s, sent, "GRAPH_UPLOAD", 9, msgpack.packb(calls))[0] == 0
    for value, want in ((1, b"\x01\x04\x05"), (0, b"\x02\x03\x00")):
        assert call(s, sent, "MEMSET", p, 0, 16, 0)[0] == 0
        assert call(s, sent, "MEMCPY_H2D", h, 0, value.to_bytes(4, "little"))[0] == 0
        assert call(s, sent, "GRAPH_LAUNCH", 9, 0, 0, [], b"")[0] == 0
        err, [data] = call(s, sent, "MEMCPY_D2H", p, 3, 0)
        assert err == 0 and bytes(data) == want


@pytest.mark.parametrize("cond", [
    [OP["GRAPH_COND"], [0, 0, b"\xc1", 0]],                 # bodies not msgpack
    _cond(0, 1, [[], []]),                                  # WHILE takes one body
    _cond(0, 0, []),                                        # IF takes one or two
    _cond(0, 7, [[]]),                                      # no such conditional type
    _cond(0, 0, [[[OP["STREAM_HOST_FUNC"], [0, 0]]]]),      # no host functions in a body
    _cond(0, 0, [[[OP["MEMCPY_H2D"], [1, 0, 4]]]]),          # no host data in a body
    _cond(0, 0, [[_cond(0, 0, [[_cond(0, 0, [[_cond(0, 0, [[_cond(0, 0, [[_cond(0, 0, [[_cond(0, 0, [[_cond(
        0, 0, [[_cond(0, 0, [[]])]])]])]])]])]])]])]])]]),  # nested too deep
])
def test_bad_conditional_nodes_are_refused(session, cond: list) -> None:
    s, sent = session
    err, _ = call(s, sent, "GRAPH_UPLOAD", 3, msgpack.packb([cond]))
    assert err == Err.INVALID_VALUE
    assert call(s, sent, "GRAPH_COND", 0, 0, msgpack.packb([[]]), 0)[0] == Err.INVALID_VALUE  # not on its own
    assert call(s, sent, "MALLOC", 0, 16)[0] == 0  # the session goes on


def test_conditional_nodes_need_a_backend_that_runs_them(session, monkeypatch) -> None:
    """A backend without graph_conditional (the cuda backend) refuses the segment: cudaErrorNotSupported."""
    s, sent = session
    monkeypatch.setattr(type(s.bs), "graph_conditional", None)
    err, _ = call(s, sent, "GRAPH_UPLOAD", 3, msgpack.packb([_cond(0, 0, [[]])]))
    assert err == Err.NOT_SUPPORTED


def test_bad_device_graphs_are_refused(session) -> None:
    """GRAPH_DEVICE (cudaGraphInstantiateFlagDeviceLaunch): an unknown segment, or one with operations a device
    graph cannot hold, is cudaErrorInvalidValue; a good one registers and GRAPH_FREE forgets it."""
    s, sent = session
    [ptr] = call(s, sent, "MALLOC", 0, 64)[1]
    assert call(s, sent, "GRAPH_DEVICE", 0x1000, 99)[0] == Err.INVALID_VALUE  # no such segment
    host = [[OP["MEMSET"], [ptr, 1, 64, 0]], [OP["STREAM_HOST_FUNC"], [0, 0]]]
    assert call(s, sent, "GRAPH_UPLOAD", 8, msgpack.packb(host))[0] == 0
    assert call(s, sent, "GRAPH_DEVICE", 0x1000, 8)[0] == Err.INVALID_VALUE  # a host function
    wide = [[OP["MEMSET_WIDE"], [ptr, 4, 7, 1, 1, 4, 0]]]
    assert call(s, sent, "GRAPH_UPLOAD", 9, msgpack.packb(wide))[0] == 0
    assert call(s, sent, "GRAPH_DEVICE", 0x1000, 9)[0] == Err.INVALID_VALUE  # a 32-bit memset
    good = [[OP["MEMSET"], [ptr, 1, 64, 0]], [OP["MEMCPY_D2D"], [ptr + 32, ptr, 16, 0]]]
    assert call(s, sent, "GRAPH_UPLOAD", 10, msgpack.packb(good))[0] == 0
    assert call(s, sent, "GRAPH_DEVICE", 0x1000, 10)[0] == 0
    assert s.device_graphs == {0x1000: 10}
    assert call(s, sent, "GRAPH_FREE", 10)[0] == 0
    assert s.device_graphs == {}
    assert call(s, sent, "MEMSET", ptr, 2, 8, 0)[0] == 0  # the session goes on
