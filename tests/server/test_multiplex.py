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


def test_vmm_sharing_operations_route_and_count_references() -> None:
    """cuMemRetainAllocationHandle through the multiplexer: the client's handle again, one more reference that
    cuMemRelease gives back; cuMemGetAccess only for a device of the memory's server; an import refused (a
    descriptor cannot pass through this process)."""
    from gpushim.protocol import CALL, OPS_BY_NAME, REPLY

    m = _mux()
    m.ups[0].welcome, m.ups[1].welcome = {"arena": [0x3000, 0x4000]}, {"arena": [0x4000, 0x5000]}
    m._check_arenas()
    m.devs = [(0, 0), (1, 0)]
    sent: list = []
    m._send_client = sent.append  # type: ignore[method-assign]
    seq = iter(range(1, 100))

    def call(op: str, *args: object, reply: list | None = None) -> list:
        s = next(seq)
        sent.clear()
        m._dispatch([CALL, s, OPS_BY_NAME[op].id, list(args)])
        if reply is not None:  # the upstream server's answer
            up = next(u for u in m.ups if s in u.pending)
            up.pending.pop(s)([REPLY, s, 0, reply, None, None])
        [msg] = sent
        return msg

    assert call("VMM_CREATE_SHAREABLE", 1, 2 << 20, 1, reply=[77])[3] == [1]
    assert m.vmm_handles[1] == (1, 77)
    assert call("VMM_RETAIN", 0x4100, reply=[77, 0, 2 << 20, 1])[3] == [1, 1, 2 << 20, 1]  # device 1 is ours
    assert m.vmm_refs[1] == 2
    assert call("VMM_FREE", 1, 1, 0, reply=[])[2] == 0
    assert call("VMM_EXPORT", 1, reply=[1234, 9])[3] == [1234, 9]  # still a live handle: one reference left
    assert call("VMM_FREE", 1, 1, 0, reply=[])[2] == 0
    assert 1 not in m.vmm_handles
    assert call("VMM_EXPORT", 1)[2] == 1  # cudaErrorInvalidValue: released
    assert call("VMM_GET_ACCESS", 0x4100, 0)[2] == 801  # device 0 is the other server's
    assert call("VMM_IMPORT", 1)[2] == 801
