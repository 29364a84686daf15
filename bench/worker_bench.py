"""The session worker's own cost per frame, without the shim: a forked worker (the real `run_worker` loop, an
emulator backend) on one end of a Unix socket pair, this process on the other sending pre-packed frames. The
worker's CPU time comes from /proc/PID/task/*/schedstat (nanoseconds on the CPU), so a loaded machine inflates it
far less than wall time; round-trip wall times are reported too.

    python3 bench/worker_bench.py [--n 20000] [--repeat 5] [--pin auto|none|CPU] [--profile] [--fastpath on|off|both]

Cases: a synchronous STREAM_QUERY and EVENT_QUERY (a CALL and its REPLY, one at a time), and bursts of posted
MEMSET frames, and of posted empty <<<1,1>>> LAUNCH frames, each followed by one STREAM_SYNC (the worker's cost
per posted call); with --cases also MEM_INFO, DEVICE_SYNC, a 4 KiB MEMCPY_D2H, a posted 4 KiB MEMCPY_H2D and its
STREAM_SYNC (what a pageable cudaMemcpy sends), MALLOC and FREE, and MALLOC, a first MEMCPY_D2H of it and FREE.
--profile runs the worker under cProfile and prints its hottest functions per case.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

import msgpack

sys.path[0] = str(Path(__file__).resolve().parents[1])  # not bench/: its profile.py would shadow the stdlib's

from gpushim.backends.emulator.backend import EmulatorBackend  # noqa: E402
from gpushim.protocol import CALL, HANDLE_BASE, OPS_BY_NAME, POST  # noqa: E402
from gpushim.server.modules import ModuleStore  # noqa: E402
from gpushim.server.session import SessionInfo  # noqa: E402
from gpushim.server.worker import run_worker  # noqa: E402

LEN = struct.Struct("<I")
EMPTY_PTX = b""".version 7.0
.target sm_70
.address_size 64
.visible .entry empty()
{
    ret;
}
"""
_KEEP: list[socket.socket] = []


def frame(kind: int, seq: int, op: str, args: list) -> bytes:
    body = msgpack.packb([kind, seq, OPS_BY_NAME[op].id, args], use_bin_type=True)
    return LEN.pack(len(body)) + body


def cpu_ns(pid: int) -> int:
    """CPU time of every thread of the process (the client watcher and the status thread included)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass
    return total


class Peer:
    """This end of the socket pair: the client's side, as plain as possible (no shim)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray(1 << 16)
        self.seq = 0

    def reply(self) -> list:
        got = self.sock.recv_into(self.buf)
        while True:
            if got >= 4:
                (n,) = LEN.unpack_from(self.buf)
                if got >= 4 + n:
                    return msgpack.unpackb(bytes(self.buf[4:4 + n]))
            got += self.sock.recv_into(memoryview(self.buf)[got:])

    def call(self, op: str, args: list) -> list:
        self.seq += 1
        self.sock.sendall(frame(CALL, self.seq, op, args))
        return self.reply()


def start_worker(profile_dir: str | None, fast: bool = True) -> tuple[int, socket.socket]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ca, cb = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        a.close()
        ca.close()
        for other in _KEEP:  # an earlier worker's ends (--fastpath both): it must see its client leave
            other.close()
        if profile_dir:
            os.environ["GPUSHIM_WORKER_PROFILE"] = profile_dir
        os.environ["GPUSHIM_WORKER_FASTPATH"] = "1" if fast else "0"  # gpushim/server/fastpath.py
        logging.basicConfig(level=logging.ERROR)
        store = ModuleStore(Path(tempfile.mkdtemp(prefix="gpushim-wb-")))
        info = SessionInfo(1, os.getpid(), "wb", 13000, 0, [0])
        code = run_worker(b, cb, EmulatorBackend(memory_limit=1 << 30), info, b"", store)
        os._exit(code)
    b.close()
    cb.close()
    _KEEP.extend((ca, a))  # ca: the supervisor's end of the control socket (the worker ends when it closes)
    return pid, a


def measure(peer: Peer, pid: int, n: int, fn) -> tuple[float, float]:  # noqa: ANN001
    """(worker CPU µs per call, wall µs per call) over n calls of fn."""
    c0, t0 = cpu_ns(pid), time.perf_counter()
    fn(n)
    return (cpu_ns(pid) - c0) / n / 1e3, (time.perf_counter() - t0) / n * 1e6


def setup(prof: str | None, fast: bool) -> tuple[socket.socket, int, Peer, dict]:
    """A worker (with or without the C fast path) and the cases measured against it."""
    pid, sock = start_worker(prof, fast)
    peer = Peer(sock)
    assert peer.call("DEVICE_COUNT", [])[3] == [1]
    ptr = peer.call("MALLOC", [0, 4096])[3][0]
    ev = peer.call("EVENT_CREATE", [0, 0])[3][0]
    peer.call("EVENT_RECORD", [ev, 0, 0])
    assert ev >= HANDLE_BASE

    def queries(op: str, arg: int):  # noqa: ANN202
        def run(n: int) -> None:
            for _ in range(n):
                r = peer.call(op, [arg])
                assert r[2] == 0, r
        return run

    burst = 1000
    memsets = b"".join(frame(POST, 1000 + i, "MEMSET", [ptr, 1, 4096, 0]) for i in range(burst))

    def posted(n: int) -> None:
        for _ in range(n // burst):
            sock.sendall(memsets)
            r = peer.call("STREAM_SYNC", [0])
            assert r[2] == 0, r

    digest = hashlib.sha256(EMPTY_PTX).digest()
    r = peer.call("MODULE_LOAD", [digest, EMPTY_PTX])
    assert r[2] == 0, r
    launches = b"".join(frame(POST, 1000 + i, "LAUNCH", [0, digest, "empty", [1, 1, 1], [1, 1, 1], 0, 0, b""])
                        for i in range(burst))

    def launched(n: int) -> None:
        for _ in range(n // burst):
            sock.sendall(launches)
            r = peer.call("STREAM_SYNC", [0])
            assert r[2] == 0, r

    def malloc_free(n: int) -> None:
        for _ in range(n // 2):
            r = peer.call("MALLOC", [0, 1 << 20])
            assert r[2] == 0, r
            assert peer.call("FREE", [r[3][0]])[2] == 0

    def malloc_copy(n: int) -> None:  # a copy right after each allocation: C's allocation table is stale then
        for _ in range(n // 3):
            r = peer.call("MALLOC", [0, 4096])
            assert r[2] == 0, r
            assert peer.call("MEMCPY_D2H", [r[3][0], 4096, 0])[2] == 0
            assert peer.call("FREE", [r[3][0]])[2] == 0

    data = bytes(range(256)) * 16
    h2d = frame(POST, 999, "MEMCPY_H2D", [ptr, 0, data])

    def h2d_sync(n: int) -> None:
        for _ in range(n):
            sock.sendall(h2d)
            r = peer.call("STREAM_SYNC", [0])
            assert r[2] == 0, r

    def d2h(n: int) -> None:
        for _ in range(n):
            r = peer.call("MEMCPY_D2H", [ptr, 4096, 0])
            assert r[2] == 0 and len(r[3][0]) == 4096, r

    cases = {"query": ("STREAM_QUERY (sync call)", queries("STREAM_QUERY", 0)),
             "meminfo": ("MEM_INFO (sync call)", queries("MEM_INFO", 0)),
             "devsync": ("DEVICE_SYNC (sync call)", queries("DEVICE_SYNC", 0)),
             "h2d": ("MEMCPY_H2D 4 KiB posted + STREAM_SYNC (pageable cudaMemcpy)", h2d_sync),
             "d2h": ("MEMCPY_D2H 4 KiB (sync call)", d2h),
             "malloc": ("MALLOC 1 MiB and FREE (sync calls, per call)", malloc_free),
             "malloc_copy": ("MALLOC 4 KiB, MEMCPY_D2H 4 KiB, FREE (sync calls, per call)", malloc_copy),
             "event": ("EVENT_QUERY (sync call)", queries("EVENT_QUERY", ev)),
             "memset": (f"MEMSET 4 KiB posted, bursts of {burst} + STREAM_SYNC", posted),
             "launch": (f"LAUNCH empty<<<1,1>>> posted, bursts of {burst} + STREAM_SYNC", launched)}
    return sock, pid, peer, cases


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--pin", default="auto", help="CPU for both ends ('auto': the first this process may use; "
                    "'none': unpinned)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--fastpath", choices=("on", "off", "both"), default="on", help="the worker's C fast path "
                    "(gpushim/server/fastpath.py); both: two workers, measured in turn")
    ap.add_argument("--cases", default="query,event,memset,launch", help="comma-separated: query, event, "
                    "memset, launch, malloc, malloc_copy, meminfo, devsync, h2d, d2h")
    args = ap.parse_args()
    if args.pin == "auto":
        args.pin = str(min(os.sched_getaffinity(0)))
    if args.pin != "none":
        os.sched_setaffinity(0, {int(args.pin)})
    prof = tempfile.mkdtemp(prefix="gpushim-wb-prof-") if args.profile else None
    modes = {"on": [True], "off": [False], "both": [True, False]}[args.fastpath]
    workers = {fast: setup(prof, fast) for fast in modes}
    results: dict[tuple[str, bool], tuple[float, float]] = {}
    for name in args.cases.split(","):
        for w in workers.values():
            w[3][name][1](min(2000, args.n))  # warm-up
        for _ in range(args.repeat):  # interleaved: each repeat measures every worker once
            for fast, (_, pid, peer, cases) in workers.items():
                r = measure(peer, pid, args.n, cases[name][1])
                key = (name, fast)
                results[key] = min(results.get(key, r), r, key=lambda x: x[0])
    labels = next(iter(workers.values()))[3]
    for sock, pid, _, _ in workers.values():
        sock.close()
        os.waitpid(pid, 0)
    print(f"worker cost per frame, both ends on CPU {args.pin}, load {os.getloadavg()[0]:.1f} "
          f"(best of {args.repeat} x {args.n})")
    for (name, fast), (cpu, wall) in results.items():
        label = labels[name][0] + ("" if len(modes) == 1 else " [C fast path]" if fast else " [Python only]")
        print(f"  {label:65s} worker CPU {cpu:6.2f} µs   wall per call {wall:6.2f} µs")
    if prof:
        import glob
        import pstats
        pstats.Stats(*glob.glob(f"{prof}/*.prof")).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
