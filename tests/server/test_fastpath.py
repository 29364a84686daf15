"""The worker's C fast path (gpushim/server/fastpath.c) answers exactly what the Python path answers.

A differential test: the same script of frames goes to a worker with the C loop and to one without it
(GPUSHIM_WORKER_FASTPATH=0); every byte the two send back must be equal, and so must device memory afterwards.
The script mixes the calls the C loop takes (STREAM_QUERY, STREAM_SYNC, EVENT_QUERY, DEVICE_SYNC, MEM_INFO,
MEMSET, the copies MEMCPY_H2D/D2H and through shared memory, empty launches; with encodings msgpack allows but
does not write by default) with every reason for it to hand a frame back to Python: a handle, address or shared
memory it does not know, a memset or copy out of range or crossing the end of an allocation (the same error as
before), a deferred error, a stream held by a host function (CUDA Runtime API, Stream Management,
cudaStreamQuery: cudaErrorNotReady while work is pending; "API synchronization behavior": a synchronous copy
returns once prior work is done), a sticky error (a kernel's illegal address), a freed allocation, frames larger
than the receive buffer. Each worker runs in a forked child, as under the supervisor, with a memory quota and the
host ledger's cap (cudaMemGetInfo answers the smaller room).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import random
import socket
import struct
from pathlib import Path

import msgpack
import pytest
from conftest import fork_worker
from ledger_peer import LedgerPeer

from gpushim.backends.emulator.backend import EmulatorBackend
from gpushim.protocol import CALL, CALLBACK, OPS_BY_NAME, POST, REPLY
from gpushim.server import fastpath
from gpushim.server.modules import ModuleStore
from gpushim.server.session import Session, SessionInfo

pytestmark = pytest.mark.skipif(fastpath.not_built() != "", reason=f"no C fast path: {fastpath.not_built()}")

LEN = struct.Struct("<I")
ERR_NOT_READY, ERR_INVALID_VALUE, ERR_INVALID_HANDLE, ERR_ILLEGAL_ADDRESS = 600, 1, 400, 700
BAD_PTX = b""".version 7.0
.target sm_70
.address_size 64
.visible .entry bad()
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<2>;
    mov.u64 %rd1, 16;
    mov.u32 %r1, 1;
    st.global.u32 [%rd1], %r1;
    ret;
}
"""
EMPTY_PTX = b""".version 7.0
.target sm_70
.address_size 64
.visible .entry empty()
{
    ret;
}
.visible .entry empty_p(.param .u32 x)
{
    ret;
}
"""


def op(name: str) -> int:
    return OPS_BY_NAME[name].id


def frame(kind: int, seq: int, name: str, args: list) -> bytes:
    body = msgpack.packb([kind, seq, op(name), args], use_bin_type=True)
    return LEN.pack(len(body)) + body


def raw(body: bytes) -> bytes:
    return LEN.pack(len(body)) + body


class Client:
    def __init__(self, sock: socket.socket, sup: socket.socket) -> None:
        self.sock = sock
        self.sup = sup  # the supervisor's end of the control socket: the worker ends when it closes
        self.buf = b""
        self.seq = 0
        self.got: list[bytes] = []  # every frame received, raw
        self.callbacks: list[list] = []

    def _frame(self) -> bytes:
        while True:
            if len(self.buf) >= 4:
                (n,) = LEN.unpack_from(self.buf)
                if len(self.buf) >= 4 + n:
                    f, self.buf = self.buf[: 4 + n], self.buf[4 + n:]
                    self.got.append(f)
                    return f
            chunk = self.sock.recv(1 << 16)
            assert chunk, "the worker closed the connection"
            self.buf += chunk

    def reply(self) -> list:
        while True:
            msg = msgpack.unpackb(self._frame()[4:])
            if msg[0] == REPLY:
                return msg
            assert msg[0] == CALLBACK, msg
            self.callbacks.append(msg)

    def callback(self) -> list:
        while not self.callbacks:
            msg = msgpack.unpackb(self._frame()[4:])
            assert msg[0] == CALLBACK, msg
            self.callbacks.append(msg)
        return self.callbacks.pop(0)

    def call(self, name: str, args: list) -> list:
        self.seq += 1
        self.sock.sendall(frame(CALL, self.seq, name, args))
        return self.reply()

    def post(self, name: str, args: list) -> None:
        self.seq += 1
        self.sock.sendall(frame(POST, self.seq, name, args))


def start(tmp: Path, fast: bool) -> tuple[int, Client]:
    def prepare() -> None:
        os.environ["GPUSHIM_WORKER_FASTPATH"] = "1" if fast else "0"

    info = SessionInfo(1, os.getpid(), "fastpath", 13000, 0, [0], memory_quota=48 << 20)
    pid, client, sup = fork_worker(tmp / f"m{int(fast)}", info, prepare)
    return pid, Client(client, sup)


def script(c: Client) -> dict:
    """The calls; returns what the test checks beyond the bytes (the final memory and the call counts)."""
    # frames larger than the worker's 1 MiB receive buffer, the first before anything else: the reader grows its
    # buffer while the C loop has seen it (an address in no allocation: an error either way)
    assert c.call("MEMCPY_H2D", [0x1000, 0, bytes(3 << 20)])[2] == ERR_INVALID_VALUE
    assert c.call("DEVICE_COUNT", [])[3] == [1]
    assert c.call("MEMCPY_H2D", [0x1000, 0, bytes(5 << 20)])[2] == ERR_INVALID_VALUE
    a = c.call("MALLOC", [0, 8192])[3][0]
    b = c.call("MALLOC", [0, 4096])[3][0]
    s = c.call("STREAM_CREATE", [0, 0, 0])[3][0]
    ev = c.call("EVENT_CREATE", [0, 0])[3][0]
    c.call("EVENT_RECORD", [ev, 0, 0])
    for h in (0, 0, s, s):  # the first query of the legacy stream goes to Python (it creates the stream)
        assert c.call("STREAM_QUERY", [h])[2] == 0
    for _ in range(3):
        assert c.call("EVENT_QUERY", [ev])[2] == 0
    # memsets, posted and called, values as msgpack's fixint, negative int, uint8
    c.post("MEMSET", [a, 7, 8192, 0])
    c.post("MEMSET", [a + 100, -2, 50, s])
    assert c.call("MEMSET", [a + 4000, 200, 96, 0])[2] == 0
    assert c.call("MEMSET", [b, 0x1234, 0, 0])[2] == 0  # nothing
    # encodings msgpack does not write but decodes: seq as uint16, a handle as uint64, a value as int32
    c.seq += 1
    c.sock.sendall(raw(bytes([0x94, 0x01, 0xCD, 0x00, 0x05, op("STREAM_QUERY"), 0x91, 0xCF]) + (0).to_bytes(8, "big")))
    assert c.reply()[1] == 5
    c.sock.sendall(raw(bytes([0x94, 0x03, 0x06, op("MEMSET"), 0x94, 0xCF]) + b.to_bytes(8, "big")
                       + bytes([0xD2]) + (-3).to_bytes(4, "big", signed=True) + bytes([0x10, 0x00])))
    # what the C loop hands back: unknown handles, out of range, an address in no allocation
    assert c.call("STREAM_QUERY", [s + 0x1000])[2] == ERR_INVALID_HANDLE
    assert c.call("STREAM_QUERY", [5])[2] == ERR_INVALID_HANDLE
    assert c.call("EVENT_QUERY", [ev + 0x1000])[2] == ERR_INVALID_HANDLE
    assert c.call("MEMSET", [b, 1, 4097, 0])[2] == ERR_INVALID_VALUE
    assert c.call("MEMSET", [b + 8192 * 16, 1, 1, 0])[2] == ERR_INVALID_VALUE
    # a posted memset out of range: the error is deferred to the next synchronising call
    c.post("MEMSET", [b + 4000, 1, 200, 0])
    assert c.call("STREAM_QUERY", [0])[2] == ERR_INVALID_VALUE
    assert c.call("STREAM_QUERY", [0])[2] == 0
    # a stream held by a host function: queries see the pending work, a memset queued behind it waits for it
    c.call("STREAM_HOST_FUNC", [s, 77])
    assert c.callback()[2] == 77
    assert c.call("STREAM_QUERY", [s])[2] == ERR_NOT_READY
    assert c.call("STREAM_QUERY", [0])[2] == ERR_NOT_READY  # the legacy stream waits for blocking streams
    c.post("MEMSET", [a, 9, 16, s])
    c.call("EVENT_RECORD", [ev, s, 0])
    assert c.call("EVENT_QUERY", [ev])[2] == ERR_NOT_READY
    before = c.call("MEMCPY_D2H", [a, 16, s + 0x10000])  # an invalid stream: answered at once, with an error
    assert before[2] == ERR_INVALID_HANDLE
    c.post("CALLBACK_DONE", [77])
    assert c.call("STREAM_QUERY", [s])[2] == 0
    assert c.call("EVENT_QUERY", [ev])[2] == 0
    # a freed allocation
    assert c.call("FREE", [b])[2] == 0
    assert c.call("MEMSET", [b, 1, 16, 0])[2] == ERR_INVALID_VALUE
    b2 = c.call("MALLOC", [0, 1024])[3][0]  # the same address again, smaller
    assert b2 == b
    assert c.call("MEMSET", [b2, 5, 1024, 0])[2] == 0
    assert c.call("MEMSET", [b2, 5, 1025, 0])[2] == ERR_INVALID_VALUE
    # empty kernels: the first launch of a configuration runs in Python, later ones are counted in C
    de = hashlib.sha256(EMPTY_PTX).digest()
    assert c.call("MODULE_LOAD", [de, EMPTY_PTX])[2] == 0
    one, warp = [1, 1, 1], [32, 1, 1]
    for i in range(4):
        c.post("LAUNCH", [0, de, "empty", one, one, 0, 0, b""])
        c.post("LAUNCH", [0, de, "empty", [3, 2, 1], warp, 0, s, b""])
        c.post("LAUNCH", [0, de, "empty_p", [2, 1, 1], warp, 0, 0, os.urandom(4)])
        if i == 0:  # the worker's Python path ran this batch; the C loop takes the next ones
            assert c.call("STREAM_QUERY", [0])[2] == 0
    assert c.call("LAUNCH", [0, de, "empty", one, one, 0, 0, b""])[2] == 0
    assert c.call("LAUNCH", [0, de, "empty", one, one, 16, 0, b""])[2] == 0  # dynamic shared memory: a new one
    # what C hands back: an unknown kernel, a configuration the device refuses, wrong parameter sizes
    assert c.call("LAUNCH", [0, de, "nosuch", one, one, 0, 0, b""])[2] != 0
    assert c.call("LAUNCH", [0, de, "empty", one, [2048, 1, 1], 0, 0, b""])[2] != 0
    c.call("LAUNCH", [0, de, "empty_p", [2, 1, 1], warp, 0, 0, b"12345678"])  # another size: Python decides
    assert c.call("LAUNCH", [1, de, "empty", one, one, 0, 0, b""])[2] != 0  # no device 1
    # a stream held by a host function: the launch waits behind it
    c.call("STREAM_HOST_FUNC", [s, 78])
    assert c.callback()[2] == 78
    c.post("LAUNCH", [0, de, "empty", [3, 2, 1], warp, 0, s, b""])
    assert c.call("STREAM_QUERY", [s])[2] == ERR_NOT_READY
    c.post("CALLBACK_DONE", [78])
    # an unloaded module: the next launch loads the image afresh (the cached configuration is gone)
    assert c.call("MODULE_UNLOAD", [de])[2] == 0
    for _ in range(3):
        c.post("LAUNCH", [0, de, "empty", one, one, 0, 0, b""])
    assert c.call("STREAM_QUERY", [0])[2] == 0
    copies = copy_script(c, a, s)
    counts = c.call("SESSION_INFO", [])[3][0]
    c.got.pop()
    for _ in range(10):  # each one alone in the worker's buffer, the session quiet: all answered in C
        assert c.call("EVENT_QUERY", [ev])[2] == 0
    after = c.call("SESSION_INFO", [])[3][0]
    c.got.pop()
    memory = [c.call("MEMCPY_D2H", [p, n, 0])[3][0] for p, n in ((a, 8192), (b2, 1024))]
    # a sticky error: every later call fails with it, and memsets do nothing
    digest = hashlib.sha256(BAD_PTX).digest()
    assert c.call("MODULE_LOAD", [digest, BAD_PTX])[2] == 0
    c.post("LAUNCH", [0, digest, "bad", [1, 1, 1], [1, 1, 1], 0, 0, b""])
    c.post("MEMSET", [a, 1, 16, 0])
    assert c.call("STREAM_QUERY", [0])[2] == ERR_ILLEGAL_ADDRESS
    assert c.call("EVENT_QUERY", [ev])[2] == ERR_ILLEGAL_ADDRESS
    assert c.call("MEMSET", [a, 1, 16, 0])[2] == ERR_ILLEGAL_ADDRESS
    info = c.call("SESSION_INFO", [])[3][0]
    c.got.pop()  # its uptime differs
    assert c.call("STREAM_SYNC", [0])[2] == ERR_ILLEGAL_ADDRESS
    assert c.call("MEM_INFO", [0])[2] == ERR_ILLEGAL_ADDRESS
    assert c.call("MEMCPY_D2H", [a, 16, 0])[2] == ERR_ILLEGAL_ADDRESS
    return {"memory": memory, "copies": copies[:2], "copies_in_c": copies[2], "calls": info["calls"],
            "fast_calls": info["fast_calls"],
            "kernels": (counts["launches"], counts["thread_instructions"]),
            "queries_in_c": after["fast_calls"] - counts["fast_calls"]}


def noise(n: int) -> bytes:
    """n bytes, the same in both runs."""
    return random.Random(n).randbytes(n)


def copy_script(c: Client, a: int, s: int) -> list[bytes]:
    """Synchronisations, cudaMemGetInfo and copies; returns what device and shared memory hold afterwards."""
    for h in (0, s):
        assert c.call("STREAM_SYNC", [h])[2] == 0
    assert c.call("STREAM_SYNC", [s + 0x1000])[2] == ERR_INVALID_HANDLE
    assert c.call("DEVICE_SYNC", [0])[2] == 0
    for dev in (1, -1):
        assert c.call("DEVICE_SYNC", [dev])[2] != 0  # no such device
    # cudaMemGetInfo: the quota's room (48 MiB less what the session holds), answered before and after changes
    free0 = c.call("MEM_INFO", [0])[3][0]
    assert c.call("MEM_INFO", [0])[3][0] == free0 <= 48 << 20
    big = c.call("MALLOC", [0, 4 << 20])[3][0]
    assert c.call("MEM_INFO", [0])[3][0] == free0 - (4 << 20)
    assert c.call("MEM_INFO", [0])[3][0] == free0 - (4 << 20)
    assert c.call("MEM_INFO", [1])[2] != 0
    # pageable copies: posted and called, into and out of a known allocation, bin 8/16/32 and the bulk reply
    c.post("MEMCPY_H2D", [a, 0, bytes(range(200))])
    assert c.call("MEMCPY_H2D", [a + 300, s, noise(5000)])[2] == 0
    c.post("MEMCPY_H2D", [big, 0, noise(70000)])
    assert c.call("MEMCPY_H2D", [big + 100000, 0, b""])[2] == 0
    for p, n in ((a, 200), (a + 300, 5000), (big, 70000), (big, 0), (a + 8191, 1)):
        r = c.call("MEMCPY_D2H", [p, n, 0])
        assert r[2] == 0 and len(r[3][0]) == n
    assert c.call("MEMCPY_D2H", [a + 16, 64, s])[3][0] == bytes(range(16, 80))
    # a frame larger than the receive buffer, into a known allocation (the C loop waits for the reader to grow)
    c.post("MEMCPY_H2D", [big + 1024, 0, noise(2 << 20)])
    assert c.call("MEMCPY_D2H", [big + 1024 + (2 << 20) - 8, 8, 0])[2] == 0
    # what C hands back: crossing the end, an address in no allocation, an unknown stream, a posted D2H
    assert c.call("MEMCPY_H2D", [a + 8000, 0, bytes(193)])[2] == ERR_INVALID_VALUE
    assert c.call("MEMCPY_D2H", [a + 8000, 193, 0])[2] == ERR_INVALID_VALUE
    assert c.call("MEMCPY_D2H", [big + (8 << 20), 4, 0])[2] == ERR_INVALID_VALUE
    assert c.call("MEMCPY_H2D", [a, s + 0x1000, b"x"])[2] == ERR_INVALID_HANDLE
    assert c.call("MEMCPY_D2H", [a, 1, s + 0x1000])[2] == ERR_INVALID_HANDLE
    c.post("MEMCPY_D2H", [a, 16, 0])
    c.post("MEMCPY_H2D", [a + 8000, 0, bytes(193)])  # deferred to the next synchronising call
    assert c.call("STREAM_SYNC", [0])[2] == ERR_INVALID_VALUE
    # shared pinned memory (HOST_MAP: the memfd travels with the frame)
    fd = os.memfd_create("fastpath-test")
    os.ftruncate(fd, 1 << 16)
    shm = mmap.mmap(fd, 1 << 16)
    shm[:4096] = noise(4096)
    c.seq += 1
    socket.send_fds(c.sock, [frame(CALL, c.seq, "HOST_MAP", [7, 1 << 16])], [fd])
    os.close(fd)
    assert c.reply()[2] == 0
    c.post("MEMCPY_H2D_SHM", [a + 1000, 0, 7, 0, 1024])
    assert c.call("STREAM_SYNC", [0])[2] == 0
    assert c.call("MEMCPY_H2D_STAGED", [a + 3000, s, 7, 2048, 512])[2] == 0
    assert c.call("MEMCPY_D2H_SHM", [a + 900, 0, 7, 8192, 3000])[2] == 0
    c.post("MEMCPY_D2H_SHM", [a, s, 7, 20000, 100])
    assert c.call("STREAM_SYNC", [s])[2] == 0
    assert c.call("MEMCPY_H2D_SHM", [a, 0, 8, 0, 16])[2] != 0  # no shared memory 8
    assert c.call("MEMCPY_D2H_SHM", [a, 0, 7, (1 << 16) - 8, 16])[2] == ERR_INVALID_VALUE  # past its end
    assert c.call("MEMCPY_D2H_SHM", [a + 8190, 0, 7, 0, 16])[2] == ERR_INVALID_VALUE  # past the allocation's
    # pending work on the stream: the copies wait for it (a D2H is answered after the host function ran)
    c.call("STREAM_HOST_FUNC", [s, 79])
    assert c.callback()[2] == 79
    c.post("MEMCPY_H2D", [a, s, b"\xaa" * 8])
    assert c.call("MEMCPY_H2D", [a + 8, 0, b"\xbb" * 8])[2] == 0  # the legacy stream waits for s too
    c.seq += 1
    c.sock.sendall(frame(CALL, c.seq, "MEMCPY_D2H", [a, 16, 0]) + frame(POST, c.seq + 1, "CALLBACK_DONE", [79]))
    c.seq += 1
    assert c.reply()[3][0] == b"\xaa" * 8 + b"\xbb" * 8
    c.call("STREAM_HOST_FUNC", [s, 80])
    assert c.callback()[2] == 80
    c.post("MEMCPY_D2H_SHM", [a, s, 7, 30000, 16])
    c.seq += 1
    c.sock.sendall(frame(CALL, c.seq, "STREAM_SYNC", [s]) + frame(POST, c.seq + 1, "CALLBACK_DONE", [80]))
    c.seq += 1
    assert c.reply()[2] == 0
    assert c.call("DEVICE_SYNC", [0])[2] == 0
    assert c.call("HOST_UNMAP", [7])[2] == 0
    assert c.call("MEMCPY_H2D_SHM", [a, 0, 7, 0, 16])[2] != 0  # unmapped
    assert c.call("FREE", [big])[2] == 0
    assert c.call("MEM_INFO", [0])[3][0] == free0
    assert c.call("MEMCPY_D2H", [big, 4, 0])[2] == ERR_INVALID_VALUE  # freed
    out = [bytes(shm), c.call("MEMCPY_D2H", [a, 8192, 0])[3][0]]
    shm.close()
    # each alone in the worker's buffer, the session quiet: all answered in C
    before = c.call("SESSION_INFO", [])[3][0]["fast_calls"]
    c.got.pop()
    for _ in range(2):
        assert c.call("MEMCPY_H2D", [a + 64, 0, b"\x01" * 64])[2] == 0
        assert c.call("MEMCPY_D2H", [a + 64, 64, 0])[3][0] == b"\x01" * 64
        assert c.call("STREAM_SYNC", [0])[2] == 0
        assert c.call("MEM_INFO", [0])[3][0] == free0
    out.append(c.call("SESSION_INFO", [])[3][0]["fast_calls"] - before)
    c.got.pop()
    return out


def run(tmp: Path, fast: bool) -> tuple[list[bytes], dict]:
    pid, c = start(tmp, fast)
    try:
        out = script(c)
    finally:
        c.sock.close()
        c.sup.close()
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return c.got, out


def test_c_and_python_paths_send_the_same_bytes(tmp_path: Path) -> None:
    got_c, out_c = run(tmp_path, True)
    got_py, out_py = run(tmp_path, False)
    assert len(got_c) == len(got_py)
    for i, (x, y) in enumerate(zip(got_c, got_py, strict=True)):
        assert x == y, f"frame {i}: {str(msgpack.unpackb(x[4:]))[:300]} != {str(msgpack.unpackb(y[4:]))[:300]}"
    assert out_c["memory"] == out_py["memory"]
    assert [len(x) for x in out_c["copies"]] == [1 << 16, 8192]
    # the last copies into a (pending behind a host function) and the memsets into b2
    assert out_c["memory"][0][:16] == b"\xaa" * 8 + b"\xbb" * 8 and out_c["memory"][1][:16] == bytes([5] * 16)
    assert out_c["copies"] == out_py["copies"]
    shm, a = out_c["copies"]
    assert shm[8192:11192] == a[900:3900] and a[1000:2024] == noise(4096)[:1024]
    assert a[3000:3512] == noise(4096)[2048:2560]
    assert shm[20000:20100] == bytes(range(100)) and shm[30000:30016] == a[:16]
    assert out_py["copies_in_c"] == 0 and out_c["copies_in_c"] == 8
    assert out_c["calls"] == out_py["calls"]
    assert out_c["kernels"] == out_py["kernels"] and out_c["kernels"][0] == 19
    assert out_py["fast_calls"] == out_py["queries_in_c"] == 0
    assert out_c["queries_in_c"] == 10
    # how many more C answers depends on how frames batch in the worker's receives (a batch that starts with
    # a frame for Python is Python's): at least the calls sent one at a time, launches included
    assert out_c["fast_calls"] >= 20


def test_the_first_copy_after_a_malloc_or_free_is_answered_in_c(tmp_path: Path) -> None:
    """A malloc or free leaves C's allocation table stale; the copy that then misses it has Python rebuild the
    table and is answered in C, not handed to Python. A copy to freed memory still gets Python's error."""
    pid, c = start(tmp_path, True)

    def fast_calls() -> int:
        return c.call("SESSION_INFO", [])[3][0]["fast_calls"]

    def call(name: str, args: list) -> tuple[list, int]:
        """The reply, and how many calls C answered meanwhile (the call is alone in the worker's buffer)"""
        before = fast_calls()
        r = c.call(name, args)
        return r, fast_calls() - before

    try:
        [warm] = c.call("MALLOC", [0, 4096])[3]
        assert c.call("MEMSET", [warm, 0, 16, 0])[2] == 0  # Python's: it makes the legacy stream
        [a] = c.call("MALLOC", [0, 4096])[3]
        r, in_c = call("MEMCPY_H2D", [a, 0, b"x" * 100])
        assert r[2] == 0 and in_c == 1
        r, in_c = call("MEMCPY_D2H", [a, 100, 0])
        assert r[3] == [b"x" * 100] and in_c == 1
        [b] = c.call("MALLOC", [0, 4096])[3]
        assert c.call("FREE", [a])[2] == 0
        r, in_c = call("MEMSET", [b, 7, 16, 0])
        assert r[2] == 0 and in_c == 1
        r, in_c = call("MEMCPY_D2H", [b, 16, 0])
        assert r[3] == [bytes([7] * 16)] and in_c == 1
        r, in_c = call("MEMCPY_H2D", [a, 0, b"y"])  # freed: C's rebuilt table lacks it, Python refuses it
        assert r[2] == ERR_INVALID_VALUE and in_c == 0
    finally:
        c.sock.close()
        c.sup.close()
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_mirror_drops_an_event_exported_for_ipc(tmp_path: Path) -> None:
    """An event exported with cudaIpcGetEventHandle becomes shared in place, under the same handle: another
    process may record it, so the C loop must not answer queries of it any more (Python reads its state)."""
    import logging

    from gpushim.wire import FrameReader

    log = logging.getLogger("test")
    be = EmulatorBackend(memory_limit=1 << 26, memory_cap=1 << 28)
    session = Session(be, SessionInfo(1, os.getpid(), "fp", 13000, 0, [0]), lambda m: None, log,
                      ModuleStore(tmp_path / "m"))
    a, b = socket.socketpair()
    try:
        fast = fastpath.FastPath(session, FrameReader(b), b, log, lambda *x: True, lambda *x: None)
        [plain] = session.op_event_create(0, 0)
        [shared] = session.op_event_create(0, 0x6)  # cudaEventInterprocess | cudaEventDisableTiming
        fast.refresh()
        assert fast.st.quiet and set(fast.st.events[: fast.st.nevents]) == {plain, shared}
        session.op_ipc_get_event_handle(shared)
        fast.refresh()
        assert set(fast.st.events[: fast.st.nevents]) == {plain}
    finally:
        session.close()
        a.close()
        b.close()


def test_without_the_library_the_worker_runs_python_and_says_why(tmp_path: Path) -> None:
    def prepare() -> None:
        fastpath._lib, fastpath._why_not = None, "libgsfast.so was not built (test)"

    log = tmp_path / "worker.log"
    info = SessionInfo(1, os.getpid(), "nolib", 13000, 0, [0])
    pid, client, sup = fork_worker(tmp_path / "m", info, prepare, log)
    c = Client(client, sup)
    try:
        for _ in range(3):
            assert c.call("STREAM_QUERY", [0])[2] == 0
        assert c.call("SESSION_INFO", [])[3][0]["fast_calls"] == 0
    finally:
        client.close()
        sup.close()
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    text = log.read_text()
    assert text.count("the C fast path is off: libgsfast.so was not built (test)") == 1
    assert "WARNING" in text


def test_mem_info_in_c_follows_other_workers_of_the_host_ledger(tmp_path: Path) -> None:
    """cudaMemGetInfo answered in C reads the host ledger that all workers share, as HostLedger.used does: another
    worker's allocations and frees show at once; a worker that joins, or exits holding memory (its share is
    reclaimed), sends the call to Python, which rebuilds its watch; after that C answers again."""
    import logging

    from gpushim.server.worker import _handle_frames
    from gpushim.wire import FrameReader, pack

    mib = 1 << 20
    log = logging.getLogger("test")
    be = EmulatorBackend(memory_limit=1 << 26, memory_cap=64 * mib)
    client, conn = socket.socketpair()
    session = Session(be, SessionInfo(1, os.getpid(), "fp", 13000, 0, [0]), lambda m: conn.sendall(pack(m)), log,
                      ModuleStore(tmp_path / "m"))
    fast = fastpath.FastPath(session, FrameReader(conn), conn, log, _handle_frames, lambda *x: None)
    c = Client(client, conn)  # (no supervisor here)

    def mem_info() -> tuple[int, bool]:
        """(free bytes, whether C answered)"""
        before = fast.st.calls
        c.seq += 1
        # DEVICE_COUNT is Python's: the C loop returns to it after MEM_INFO, and the test goes on
        client.sendall(frame(CALL, c.seq, "MEM_INFO", [0]) + frame(CALL, c.seq + 1, "DEVICE_COUNT", []))
        c.seq += 1
        assert fast.step() is None
        r = c.reply()
        assert r[2] == 0 and c.reply()[3] == [1]
        return r[3][0], fast.st.calls > before

    other = None
    try:
        free = mem_info()[0]  # Python builds its watch of the ledger
        assert mem_info() == (free, True)
        other = LedgerPeer(be.ledger, 8 * mib)  # another worker: joins now, charges and releases 8 MiB on command
        assert mem_info() == (free, False)  # a new slot holder: Python looks
        other.charge()
        assert mem_info() == (free - 8 * mib, True)
        other.charge()
        assert mem_info() == (free - 16 * mib, True)
        other.release()
        assert mem_info() == (free - 8 * mib, True)
        other.kill()
        assert mem_info() == (free, False)  # it exited holding 8 MiB: Python reclaims them, drops its watch
        assert mem_info() == (free, False)  # and builds it again
        assert mem_info() == (free, True)
    finally:
        if other is not None:
            other.close()
        session.close()
        client.close()
        conn.close()
