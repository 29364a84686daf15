"""The worker's in-place decoder of host-to-device frames agrees with msgpack on every frame it accepts,
and the frame reader splits any byte stream into the frames it carries."""

from __future__ import annotations

import random
import socket
import threading

import msgpack
import pytest

from gpushim.wire import FrameError, FrameReader, decode_bulk_call, pack


def test_in_place_decoder_agrees_with_msgpack() -> None:
    rng = random.Random(99)
    accepted = 0
    for _ in range(5000):
        n = rng.choice([0, 1, 255, 256, 65535, 65536, 70000])
        msg = [rng.choice([1, 3]), rng.randrange(2**40), 23, [rng.randrange(2**48), rng.randrange(2**32),
                                                              rng.randbytes(n)]]
        body = bytearray(msgpack.packb(msg, use_bin_type=True))
        if rng.random() < 0.5:  # mutate a header byte or truncate
            if rng.random() < 0.5:
                body[rng.randrange(min(len(body), 24))] = rng.getrandbits(8)
            else:
                del body[rng.randrange(len(body)):]
        got = decode_bulk_call(memoryview(bytes(body)), 23, 3)
        if got is None:
            continue
        accepted += 1
        want = msgpack.unpackb(bytes(body), raw=False)
        assert got[:3] == want[:3] and got[3][:2] == want[3][:2] and bytes(got[3][2]) == want[3][2]
    assert accepted > 2500


def test_frame_reader_splits_a_stream() -> None:
    a, b = socket.socketpair()
    msgs = [[1, i, 7, [i, b"x" * (i * 997 % 70000)]] for i in range(60)]
    stream = b"".join(pack(m) for m in msgs)
    reader = FrameReader(b, stream[:10])  # a handshake read may leave part of the next frame behind

    def send() -> None:
        a.sendall(stream[10:])
        a.close()

    sender = threading.Thread(target=send)
    sender.start()
    got = []
    while True:
        n, _ = reader.read()
        got += [msgpack.unpackb(bytes(f), raw=False) for f in reader.frames()]
        if not n:
            break
    sender.join()
    assert got == msgs


def test_frame_reader_refuses_oversized_frames() -> None:
    a, b = socket.socketpair()
    a.sendall((2**31).to_bytes(4, "little"))
    reader = FrameReader(b, max_frame=1 << 20)
    reader.read()
    with pytest.raises(FrameError):
        reader.frames()  # the announced size is refused before anything is allocated for it


def test_frame_reader_grows_for_large_frames_and_keeps_descriptors() -> None:
    """Frames larger than the reader's buffer (it grows, its kept view renewed), small ones around them, and a
    descriptor passed with one of them (SCM_RIGHTS) comes back from the read that received it."""
    import os

    a, b = socket.socketpair()
    msgs = [[3, 1, 7, [b"s"]], [3, 2, 7, [b"L" * (3 << 20)]], [3, 3, 7, [b"t"]], [3, 4, 7, [b"M" * (5 << 20)]]]
    reader = FrameReader(b)
    r, w = os.pipe()

    def send() -> None:
        a.sendmsg([pack(msgs[0])], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, r.to_bytes(4, "little"))])
        for m in msgs[1:]:
            a.sendall(pack(m))
        a.close()

    sender = threading.Thread(target=send)
    sender.start()
    got, fds = [], []
    while True:
        n, new_fds = reader.read()
        fds += new_fds
        got += [msgpack.unpackb(bytes(f), raw=False) for f in reader.frames()]
        if not n:
            break
    sender.join()
    assert got == msgs
    assert len(fds) == 1 and os.path.sameopenfile(fds[0], r)
    for fd in (fds[0], r, w):
        os.close(fd)
