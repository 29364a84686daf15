"""The multiplexer's own decisions (gpushim/server/multiplex.py), without servers: device selection, PCI bus
ids, pointer ownership. tests/e2e/test_multi_server.py runs it end to end."""

from __future__ import annotations

import socket

import pytest

from gpushim.server.multiplex import Multiplexer, MultiplexError, Upstream, _parse_bus

INV = [[{"ordinal": 0, "uuid": "aa"}], [{"ordinal": 0, "uuid": "bb"}, {"ordinal": 1, "uuid": "cc"}]]


def _mux(urls: int = 2) -> Multiplexer:
    a, b = socket.socketpair()
    m = Multiplexer(a, [f"unix:///s{i}" for i in range(urls)])
    m.ups = [Upstream(i, f"unix:///s{i}", b) for i in range(urls)]
    return m


def test_parse_bus_accepts_cudas_forms() -> None:
    assert _parse_bus("0001:3B:00.0") == (1, 0x3B, 0, 0)
    assert _parse_bus("3b:00.1") == (0, 0x3B, 0, 1)
    assert _parse_bus("0000:10:00") == (0, 0x10, 0, 0)
    assert _parse_bus("0000:10:00.0\0\0") == (0, 0x10, 0, 0)
    assert _parse_bus("nonsense") is None and _parse_bus("") is None


def test_device_selection() -> None:
    m = _mux()
    assert m._choose(INV, "") == [None, None] and m.wanted == []
    assert m._choose(INV, "1:1, 0") == [[0], [1]] and m.wanted == [(1, 1), (0, 0)]
    assert m._choose(INV, "GPU-bb,2") == [[], [0, 1]] and m.wanted == [(1, 0), (1, 1)]
    for bad in ("3", "2:0", "1:2", "GPU-dd", "x", "0,0", "1:0,GPU-bb"):
        with pytest.raises(MultiplexError):
            m._choose(INV, bad)


def test_overlapping_arenas_are_refused_and_pointers_route_by_range() -> None:
    m = _mux()
    m.ups[0].welcome, m.ups[1].welcome = {"arena": [0x3000, 0x4000]}, {"arena": [0x3800, 0x5000]}
    with pytest.raises(MultiplexError, match="--arena-base"):
        m._check_arenas()
    m.ups[1].welcome = {"arena": [0x4000, 0x5000]}
    m._check_arenas()
    assert (m._owner(0x3000), m._owner(0x3FFF), m._owner(0x4000), m._owner(0x4FFF)) == (0, 0, 1, 1)


def test_pointers_route_by_allocation_without_arenas() -> None:
    m = _mux()
    m._check_arenas()  # neither server announces a range (the cuda backend)
    m._remember(1, 0x7F00_0000_0000, 4096)
    m._remember(0, 0x7F00_1000_0000, 16)
    assert m._owner(0x7F00_0000_0FFF) == 1 and m._owner(0x7F00_1000_0008) == 0
    assert m._owner(0x7F00_0000_1000) == 0  # past the allocation: the first server answers (its error)
    m._forget(0x7F00_0000_0000)
    assert m._owner(0x7F00_0000_0010) == 0


def test_a_malformed_frame_from_the_client_ends_only_its_session() -> None:
    from gpushim.protocol import FATAL
    from gpushim.wire import FrameBuffer, unpack_body

    m = _mux(1)
    m.client, client = socket.socketpair()
    m.ups[0].sock, server = socket.socketpair()
    client.sendall(b"\x03\x00\x00\x00\xc1\xc1\xc1")  # a frame that is not msgpack
    assert m.run() == 1
    buf = FrameBuffer()
    client.settimeout(5)
    buf.feed(client.recv(65536))
    msg = unpack_body(buf.frames()[0])
    assert msg[0] == FATAL and "malformed" in msg[3]
    server.setblocking(False)
    with pytest.raises(BlockingIOError):  # nothing reached the server
        server.recv(1)
