"""Frames on a socket: a 4-byte little-endian length, then one msgpack value (see gpushim/protocol.py)."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

import msgpack

from gpushim.protocol import MAX_FRAME

_LEN = struct.Struct("<I")


class FrameError(Exception):
    """The peer sent something that is not a valid frame; the connection cannot continue."""


_packers = threading.local()  # msgpack.packb builds a Packer per call: a third of a small reply's cost


def pack(value: Any) -> bytes:
    try:
        packer = _packers.p
    except AttributeError:
        packer = _packers.p = msgpack.Packer(use_bin_type=True)
    try:
        body = packer.pack(value)
    except BaseException:
        packer.reset()  # a value that cannot be packed must not leave half a frame in the buffer
        raise
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


class FrameReader:
    """Reads frames from a connected socket into one reusable buffer, with the descriptors passed along
    (SCM_RIGHTS) on Unix sockets. Frames come back as views into the buffer, valid until the next read:
    a 16 MiB copy is received in place, not appended and sliced (the hot path of bulk transfers)."""

    FD_SPACE = socket.CMSG_SPACE(8 * 4)

    def __init__(self, sock: socket.socket, pending: bytes = b"", max_frame: int = MAX_FRAME) -> None:
        self.sock = sock
        self.unix = sock.family == socket.AF_UNIX
        self.buf = bytearray(max(1 << 20, len(pending)))
        self.buf[: len(pending)] = pending
        self.mv = memoryview(self.buf)  # kept (a view per receive and per frame is a third of a small call's
        # framing cost); released only to grow the buffer
        self.r = 0
        self.w = len(pending)
        self.max = max_frame

    def _room_for_next(self) -> None:
        """Compacts the buffer and grows it to hold the frame being received."""
        if self.r == self.w:
            self.r = self.w = 0
        need = 1 << 16
        if self.w - self.r >= 4:
            (n,) = _LEN.unpack_from(self.buf, self.r)
            if n > self.max:
                raise FrameError(f"frame of {n} bytes exceeds the {self.max}-byte limit")
            need = 4 + n - (self.w - self.r)
        if len(self.buf) - self.w >= need:
            return
        if self.r:
            self.buf[: self.w - self.r] = self.buf[self.r : self.w]
            self.w -= self.r
            self.r = 0
        if len(self.buf) - self.w < need:
            self.mv.release()
            self.buf.extend(bytes(need - (len(self.buf) - self.w)))
            self.mv = memoryview(self.buf)

    def read(self) -> tuple[int, list[int]]:
        """One receive: (bytes read, descriptors received); 0 bytes means the peer closed."""
        if self.r == self.w:
            self.r = self.w = 0  # all consumed: the common case, room enough without compacting
        if len(self.buf) - self.w < 1 << 16 or self.w - self.r >= 4:
            self._room_for_next()
        if not self.unix:
            n = self.sock.recv_into(self.mv[self.w :])
            self.w += n
            return n, []
        n, anc, _, _ = self.sock.recvmsg_into([self.mv[self.w :]], self.FD_SPACE)
        self.w += n
        if not anc:
            return n, []
        fds: list[int] = []
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                usable = len(data) - len(data) % 4
                fds.extend(struct.unpack(f"{usable // 4}i", data[:usable]))
        return n, fds

    def frames(self) -> list[memoryview]:
        out: list[memoryview] = []
        r, w, buf, mv, unpack = self.r, self.w, self.buf, self.mv, _LEN.unpack_from
        while w - r >= 4:
            (n,) = unpack(buf, r)
            if n > self.max:
                self.r = r
                raise FrameError(f"frame of {n} bytes exceeds the {self.max}-byte limit")
            end = r + 4 + n
            if end > w:
                break
            out.append(mv[r + 4 : end])
            r = end
        self.r = r
        return out


_UINT_SIZES = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
_BIN_SIZES = {0xC4: 1, 0xC5: 2, 0xC6: 4}


def _uint(b: memoryview, i: int) -> tuple[int, int]:
    t = b[i]
    if t < 0x80:
        return t, i + 1
    n = _UINT_SIZES.get(t)
    if n is None:
        raise ValueError
    return int.from_bytes(b[i + 1 : i + 1 + n], "big"), i + 1 + n


def decode_bulk_call(body: memoryview, op_id: int, nargs: int) -> list[Any] | None:
    """[kind, seq, op, [ints..., data]] for a CALL/POST of op_id whose last argument is bulk data, with the
    data as a view into the frame (no copy) -- the hot path of host-to-device copies. None when the frame
    is anything else (the generic decoder then handles it, and reports what is wrong)."""
    try:
        if len(body) < 6 or body[0] != 0x94 or body[1] not in (1, 3):
            return None
        seq, i = _uint(body, 2)
        op, i = _uint(body, i)
        if op != op_id or body[i] != 0x90 + nargs:
            return None
        i += 1
        args: list[Any] = []
        for _ in range(nargs - 1):
            v, i = _uint(body, i)
            args.append(v)
        n = _BIN_SIZES.get(body[i])
        if n is None:
            return None
        size = int.from_bytes(body[i + 1 : i + 1 + n], "big")
        start = i + 1 + n
        if start + size != len(body):
            return None
        args.append(body[start:])
        return [body[1], seq, op, args]
    except (ValueError, IndexError):
        return None


def reply_with_bulk(seq: int, results_head: list[Any], bulk: memoryview | bytes, out: bytes | None,
                    note: str | None) -> list[bytes | memoryview]:
    """A REPLY frame whose last result is bulk data, as pieces for sendmsg: the data is not copied."""
    packer = msgpack.Packer(use_bin_type=True)
    head = bytearray(packer.pack_array_header(6))
    for v in (2, seq, 0):
        head += packer.pack(v)
    head += packer.pack_array_header(len(results_head) + 1)
    for v in results_head:
        head += packer.pack(v)
    n = len(bulk)
    head += b"\xc6" + n.to_bytes(4, "big")
    tail = packer.pack(out) + packer.pack(note)
    return [_LEN.pack(len(head) + n + len(tail)) + bytes(head), bulk, tail]


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
