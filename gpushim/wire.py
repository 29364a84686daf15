"""Frames on a socket: a 4-byte little-endian length, then one msgpack value (see gpushim/protocol.py)."""

from __future__ import annotations

import socket
import struct
from typing import Any

import msgpack

from gpushim.protocol import MAX_FRAME

_LEN = struct.Struct("<I")


class FrameError(Exception):
    """The peer sent something that is not a valid frame; the connection cannot continue."""


def pack(value: Any) -> bytes:
    body = msgpack.packb(value, use_bin_type=True)
    return _LEN.pack(len(body)) + body


def unpack_body(body: bytes | memoryview) -> Any:
    try:
        return msgpack.unpackb(body, raw=False, strict_map_key=False, use_list=True)
    except Exception as e:  # msgpack raises several unrelated types for bad input
        raise FrameError(f"undecodable frame: {e.__class__.__name__}: {e}") from None


class FrameBuffer:
    """Accumulates bytes from a non-blocking socket and yields whole frame bodies."""

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buf = bytearray()
        self._max = max_frame

    def feed(self, data: bytes) -> None:
        self._buf += data

    def frames(self) -> list[memoryview]:
        out: list[memoryview] = []
        pos = 0
        buf = self._buf
        while len(buf) - pos >= 4:
            (n,) = _LEN.unpack_from(buf, pos)
            if n > self._max:
                raise FrameError(f"frame of {n} bytes exceeds the {self._max}-byte limit")
            if len(buf) - pos - 4 < n:
                break
            out.append(memoryview(bytes(buf[pos + 4 : pos + 4 + n])))
            pos += 4 + n
        if pos:
            del buf[:pos]
        return out

    def take_rest(self) -> bytes:
        """The bytes of an incomplete frame, removed from the buffer."""
        rest = bytes(self._buf)
        self._buf.clear()
        return rest

    def pending(self) -> int:
        return len(self._buf)


def recv_frame(sock: socket.socket, max_frame: int = MAX_FRAME) -> Any:
    """Blocking read of one frame (for clients and tests)."""
    head = _recv_exact(sock, 4)
    (n,) = _LEN.unpack(head)
    if n > max_frame:
        raise FrameError(f"frame of {n} bytes exceeds the limit")
    return unpack_body(_recv_exact(sock, n))


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        b = sock.recv(min(n - len(chunks), 1 << 20))
        if not b:
            raise ConnectionError("connection closed")
        chunks += b
    return bytes(chunks)


def send_frame(sock: socket.socket, value: Any) -> None:
    sock.sendall(pack(value))
