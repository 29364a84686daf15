"""The emulator worker's fast path: fastpath.c (built as gpushim/lib/libgsfast.so by `make` and setup.py), a
loop that owns the client's socket while the session is quiet and answers the common calls itself, in C, with
the GIL released: STREAM_QUERY, STREAM_SYNC, EVENT_QUERY, DEVICE_SYNC and MEM_INFO, MEMSET, the 1D copies
between the client and a known allocation (MEMCPY_H2D and MEMCPY_D2H over the socket; MEMCPY_H2D_SHM,
MEMCPY_H2D_STAGED and MEMCPY_D2H_SHM through the client's shared pinned memory) and launches of empty kernels.
Everything else returns here and runs through the worker's Python path unchanged (validation, errors, replies),
so the fast path changes only how fast the common calls are answered, never what they answer.

Before C takes a frame after Python handled some (the loop returns FP_REFRESH), Python mirrors into C what the
answers depend on (refresh): whether the session is quiet (no sticky, deferred or asynchronous error, no
printf output waiting, no call waiting, nothing queued on any stream, no value waits or inline streams) -- then
every stream is idle, so a synchronisation returns at once and a copy runs at once, as Python would run it --
the stream and event handles it may answer for, every allocation of every device with its place in the arena,
the client's shared memory maps, the empty-kernel configurations Python's launch checked, and what MEM_INFO
answers (each device's free and total bytes, the quota's room, and how to read the host ledger that other
workers change: see fp_meminfo in fastpath.c). Only the worker thread runs either. The loop's own work
(queries, memsets and copies, counting launches) changes none of that.

GPUSHIM_WORKER_FASTPATH=0 turns it off. Without the library (no C compiler when gpushim was built) the
worker runs the Python path and logs why.
"""

from __future__ import annotations

import array
import ctypes
import errno
import logging
import os
import socket
import ssl
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpushim.backends.accounting import HostLedger
from gpushim.backends.emulator.backend import EmulatorSession
from gpushim.backends.emulator.streams import EmuEvent
from gpushim.compat.policy import SMALL_PARAM_LIMIT
from gpushim.protocol import OPS_BY_NAME
from gpushim.server.session import ClientGone, Session
from gpushim.wire import FrameReader

LIB = Path(__file__).resolve().parent.parent / "lib" / "libgsfast.so"
SOURCE = Path(__file__).with_suffix(".c")
MAX_HANDLES, MAX_ALLOCS, MAX_FDS, MAX_LAUNCHES, MAX_NAME, MAX_DEVS = 256, 4096, 8, 64, 255, 16  # FP_MAX_*
MAX_SHMS, LEDGER_SLOTS = 64, HostLedger.SLOTS  # FP_MAX_SHMS, FP_LEDGER_SLOTS
OPS = ("STREAM_QUERY", "STREAM_SYNC", "EVENT_QUERY", "DEVICE_SYNC", "MEM_INFO", "MEMSET", "MEMCPY_H2D", "MEMCPY_D2H",
       "MEMCPY_H2D_SHM", "MEMCPY_H2D_STAGED", "MEMCPY_D2H_SHM", "LAUNCH")  # what the C loop may answer
FP_FRAME, FP_READ, FP_FDS, FP_EOF, FP_RECV_ERROR, FP_SEND_ERROR, FP_REFRESH = 1, 2, 3, 4, 5, 6, 7
U64, U32, I32, I64 = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int32, ctypes.c_int64


class _Alloc(ctypes.Structure):
    _fields_ = [("addr", U64), ("size", U64), ("host", U64)]


class _Launch(ctypes.Structure):
    _fields_ = [("dev", I32), ("backend_dev", U32), ("hash", ctypes.c_char * 32), ("grid", U32 * 3),
                ("block", U32 * 3), ("shared", U32), ("nparams", U32), ("threads", U64), ("name_len", U32),
                ("name", ctypes.c_char * (MAX_NAME + 1))]


class _Shm(ctypes.Structure):
    _fields_ = [("id", U64), ("host", U64), ("size", U64)]


class _MemInfo(ctypes.Structure):
    _fields_ = [("ok", U32), ("ledger", U32), ("quota_room", I64), ("cap", I64), ("ids", U64), ("bytes", U64),
                ("seen", U64), ("nheld", U32), ("npidfds", U32), ("free", U64 * MAX_DEVS), ("total", U64 * MAX_DEVS),
                ("held", I32 * LEDGER_SLOTS), ("pidfds", I32 * LEDGER_SLOTS)]


class State(ctypes.Structure):
    """fastpath.c's fp_state, field for field."""
    _fields_ = [("calls", U64), ("queries", U64), ("memsets", U64), ("launches", U64),
                ("thread_instructions", U64), ("copies", U64), ("copy_bytes", U64), ("memset_misses", U64),
                ("kernels", U64 * MAX_DEVS), ("ops", U64), ("quiet", U32), ("fresh", U32), ("max_frame", U32),
                ("nstreams", U32), ("nevents", U32), ("nallocs", U32), ("nlaunches", U32), ("ndevs", U32),
                ("nshms", U32), ("allocs_stale", U32), ("fd", I32), ("buf", U64), ("cap", U64), ("r", U64),
                ("w", U64), ("err", I32), ("nfds", I32), ("fds", I32 * MAX_FDS),
                ("streams", U64 * MAX_HANDLES), ("events", U64 * MAX_HANDLES), ("allocs", _Alloc * MAX_ALLOCS),
                ("launch", _Launch * MAX_LAUNCHES), ("shms", _Shm * MAX_SHMS), ("mi", _MemInfo)]


def _load() -> tuple[Any, str]:
    """The library, or None and why not."""
    if sys.byteorder != "little":
        return None, "the C fast path assumes a little-endian host"
    if not LIB.exists():
        return None, f"{LIB} was not built (`make shim` or `pip install .` builds it with the C compiler)"
    try:
        lib = ctypes.CDLL(str(LIB))  # CDLL (not PyDLL): calls release the GIL, the status thread keeps running
    except OSError as e:
        return None, f"{LIB} cannot be loaded: {e}"
    if SOURCE.exists() and SOURCE.stat().st_mtime > LIB.stat().st_mtime:
        return None, f"{LIB} is older than {SOURCE.name} (run `make shim`)"
    lib.fp_state_size.restype = U64
    if lib.fp_state_size() != ctypes.sizeof(State):
        return None, f"{LIB} does not match fastpath.py (state of {lib.fp_state_size()} bytes)"
    lib.fp_serve.restype = ctypes.c_int
    lib.fp_serve.argtypes = [ctypes.c_void_p]  # the state's address, an int
    return lib, ""


_lib, _why_not = _load()  # at import: the supervisor loads it once, its forked workers inherit it


def not_built() -> str:
    """Why the library could not be loaded ("" when it was)."""
    return _why_not


def unavailable(session: Session, conn: socket.socket) -> str | None:
    """Why this session's worker runs without the C loop, or None when it may use it."""
    if os.environ.get("GPUSHIM_WORKER_FASTPATH", "1") == "0":
        return "GPUSHIM_WORKER_FASTPATH=0"
    if _lib is None:
        return _why_not
    if isinstance(conn, ssl.SSLSocket):
        return "TLS connection"
    if not isinstance(session.bs, EmulatorSession):
        return "not the emulator backend"
    return None


class FastPath:
    """One session's C loop and the Python around it. step() is the worker's one receive (worker._receive's
    contract: the exit status when the session is over, else None)."""

    def __init__(self, session: Session, frames: FrameReader, conn: socket.socket, log: logging.Logger,
                 handle_frames: Callable[..., bool], receive: Callable[..., int | None]) -> None:
        self.session, self.frames, self.conn, self.log = session, frames, conn, log
        self.handle_frames, self.receive = handle_frames, receive
        self.bs: EmulatorSession = session.bs  # type: ignore[assignment]
        self.st = State()
        self.st.max_frame = frames.max
        for name in OPS:
            op_id = OPS_BY_NAME[name].id
            if session.routes[op_id][2] is None:  # the client's policy refuses none of it
                self.st.ops |= 1 << op_id
        self.st.fd = conn.fileno()
        self._st_addr = ctypes.addressof(self.st)
        self._view: tuple[bytearray, int, Any] | None = None
        self._handles: tuple[Any, ...] = ()
        self._memory: tuple[int, ...] = ()
        self._stale: int | None = 0  # memset_misses when the allocation table went stale (None: it is current)
        self._launches: tuple[Any, ...] = ()
        self._shms: tuple[Any, ...] = ()  # the client's shared memory maps the mirror describes (held: ids stay unique)
        self._seen: bytes | None = None  # the ledger watch's snapshot the mirror describes (C compares with it)
        self.st.ndevs = len(session.info.devices)
        self._kernels = [0] * MAX_DEVS  # of st.kernels, what the scheduler's table was told
        self._folded = 0  # st.launches when it was told
        session.fast_calls = self.calls
        self.bs.fast_counts = self.counts

    def calls(self) -> int:
        return self.st.calls

    def counts(self) -> tuple[int, int]:
        """Kernels launched and thread-instructions counted by the C loop (the emulator's stats add them)."""
        return self.st.launches, self.st.thread_instructions

    def _fold_kernels(self) -> None:
        """The scheduler's per-device kernel counts learn the C loop's launches (whenever it returns)."""
        st, told = self.st, self._kernels
        self._folded = st.launches
        kernels = st.kernels[:]
        for dev in range(MAX_DEVS):
            n = kernels[dev] - told[dev]
            if n:
                self.bs.note_kernel(dev, n)
                told[dev] += n

    # -- the mirror ------------------------------------------------------------------------------------------
    def refresh(self) -> None:
        s, sched, st = self.session, self.bs.sched, self.st
        quiet = not (s.sticky or s.deferred or s.out or s.waiting or sched.errors or sched.value_waits
                     or sched.inline)
        if quiet:
            for x in sched.streams:
                if x.queue or x.completed != x.submitted:
                    quiet = False
                    break
        st.quiet = quiet
        if not quiet:
            return
        # handles are never reused (next_handle only grows), so these change whenever the tables do; an event
        # exported for IPC becomes shared (another process may record it) in place, under the same handle
        ipc = s.__dict__.get("ipc_table")  # (getattr with a default costs an exception while it is absent)
        key = (s.next_handle, len(s.streams), len(s.events), len(s._legacy), ipc and len(ipc.event_exports))
        if key != self._handles:
            self._handles = key
            streams = [*s._legacy, *s.streams][:MAX_HANDLES]
            events = [h for h, e in s.events.items() if type(e) is EmuEvent][:MAX_HANDLES]
            st.nstreams, st.nevents = len(streams), len(events)
            st.streams[: len(streams)] = streams
            st.events[: len(events)] = events
        mems = self.bs.memories
        key = tuple([m.version for m in mems])
        if key != self._memory:  # the allocation table changed: C stops using its copy (it is rebuilt lazily)
            self._memory = key
            st.nallocs = 0
            st.allocs_stale = 1  # C's next miss comes back here (FP_REFRESH) and takes its frame after the rebuild
            self._stale = st.memset_misses
        if self._stale is not None and st.memset_misses != self._stale:  # a memset missed it: rebuild
            self._stale = None
            self._rebuild_allocs(mems)
        self._refresh_launches()
        maps = s.host_maps
        if tuple(maps.values()) != self._shms:  # mmaps compare by identity
            self._refresh_shms(maps)
        self._refresh_meminfo()

    def _refresh_shms(self, maps: dict[int, Any]) -> None:
        """The client's shared pinned memory (HOST_MAP) that the copies through it (MEMCPY_*_SHM, _STAGED) use."""
        self._shms = tuple(maps.values())
        n = 0
        for shm, m in list(maps.items())[:MAX_SHMS]:
            if m.closed:
                continue
            view = ctypes.c_char.from_buffer(m)  # a buffer export of the map, only while its address is read
            self.st.shms[n] = _Shm(shm, ctypes.addressof(view), len(m))
            del view
            n += 1
        self.st.nshms = n

    def _refresh_meminfo(self) -> None:
        """What MEM_INFO answers (ops_devices.py: op_mem_info; accounting.py: headroom), and what C needs to
        read the host ledger as HostLedger.used does without Python: the watch's snapshot and its pidfds."""
        mi, acct, mems = self.st.mi, self.bs.account, self.bs.memories
        for client_dev, dev in enumerate(self.session.info.devices[:MAX_DEVS]):
            m = mems[dev]
            mi.free[client_dev], mi.total[client_dev] = m.free_bytes, m.capacity
        mi.quota_room = -1 if acct.quota is None else max(0, acct.quota - acct.used)
        ledger = acct.ledger
        mi.ledger = ledger is not None
        if ledger is None:
            mi.ok = 1
            return
        watch = ledger._watch
        seen = watch._seen
        if seen is self._seen:
            return
        self._seen = None
        mi.ok = 0
        if watch._owner != os.getpid() or watch._unwatched or len(seen) != 2 * LEDGER_SLOTS * 8:
            return  # not built in this process, or some slots' processes are checked through /proc: Python's
        held, fds = watch.held, [fd for _, _, fd in watch._slots.values()]
        mi.nheld, mi.npidfds = len(held), len(fds)
        mi.held[: len(held)], mi.pidfds[: len(fds)] = held, fds
        mi.ids, mi.bytes = ledger._ids.ctypes.data, ledger.bytes.ctypes.data
        mi.cap = ledger.cap
        mi.seen = ctypes.cast(ctypes.c_char_p(seen), ctypes.c_void_p).value or 0
        self._seen = seen  # keeps the snapshot C compares with alive
        mi.ok = 1

    def _rebuild_allocs(self, mems: list[Any]) -> None:
        """Every allocation of every device, sorted by address, with its place in this process (the arena):
        the table fastpath.c's memsets and copies look up. Rebuilt only after one missed it, so a program that
        allocates and frees without memsets in between pays nothing for it."""
        table: list[int] = []
        for m in sorted(mems, key=lambda m: m.base):  # device windows do not overlap: sorted by address
            host = m.arena.ctypes.data - m.base
            for a in m.allocations():
                table += (a.addr, a.size, host + a.addr)
        n = len(table) // 3
        if n > MAX_ALLOCS:
            n, table = 0, []  # memsets go to Python
        if n:
            flat = array.array("Q", table)
            ctypes.memmove(ctypes.addressof(self.st.allocs), flat.buffer_info()[0], len(flat) * 8)
        self.st.nallocs = n
        self.st.allocs_stale = 0  # current (or too large for C): a miss now is Python's to report

    def _refresh_launches(self) -> None:
        """The configurations of empty kernels that Python's launch checked and ran (backend.py: _launches, an
        entry whose last item is _count_empty's function), while their module and its variables are the
        same objects and the device has no peer access; anything that changes them changes this key."""
        bs, st = self.bs, self.st
        # an entry is added, or counted for the first time, only by a launch Python ran (bs.launches grows); a
        # module's variables (symbols[dev]) are placed once per module object, so the module ids cover them
        key = (len(bs._launches), bs.launches, *map(id, bs.modules.values()))
        if key == self._launches:
            return
        self._launches = key
        counted = [(ck, hit) for ck, hit in bs._launches.items() if hit[4] is not None]
        n = 0
        for (mod_key, name, dev, grid, block, shared, nparams), hit in counted:
            name_bytes = name.encode()
            if (bs.modules.get(mod_key) is not hit[0] or hit[0].symbols.get(dev) is not hit[2] or bs.peers.get(dev)
                    or nparams > SMALL_PARAM_LIMIT or len(name_bytes) > MAX_NAME or dev >= MAX_DEVS):
                continue
            for client_dev, backend_dev in enumerate(self.session.info.devices):
                if backend_dev != dev or n == MAX_LAUNCHES:
                    continue
                st.launch[n] = _Launch(client_dev, dev, mod_key, grid, block, shared, nparams, hit[4].threads,
                                       len(name_bytes), name_bytes)
                n += 1
        st.nlaunches = n

    # -- one entry ------------------------------------------------------------------------------------------
    def step(self) -> int | None:
        frames, st = self.frames, self.st
        buf = frames.buf
        if self._view is None or self._view[0] is not buf or self._view[1] != len(buf):
            view = (ctypes.c_char * len(buf)).from_buffer(buf)  # an export of buf: dropped before it may grow
            self._view = (buf, len(buf), view)
            st.buf, st.cap = ctypes.addressof(view), len(buf)
            del view  # self._view holds the only reference (FP_READ drops it)
        while True:
            st.r, st.w = frames.r, frames.w
            why = _lib.fp_serve(self._st_addr)
            frames.r, frames.w = st.r, st.w
            if why != FP_REFRESH:
                break
            if st.fresh:  # the mirror is current but C's stale allocation table missed: that table only
                self._stale = None
                self._rebuild_allocs(self.bs.memories)
                continue
            # a frame C may take, after frames Python handled: the mirror is refreshed only now, so calls that
            # C never takes (malloc, copies...) pay nothing for it
            self.refresh()
            st.fresh = 1
        if why in (FP_FRAME, FP_READ, FP_FDS):
            st.fresh = 0  # Python handles frames now: what the mirror describes may change
        if self.st.launches != self._folded:
            self._fold_kernels()
        s = self.session
        if why == FP_FRAME:
            return None if self.handle_frames(s, frames, self.conn, self.log) else 1
        if why == FP_READ:
            self._view = None  # the reader may grow its buffer (a frame larger than it): no export may remain
            return self.receive(s, frames, self.conn, self.log)
        if why == FP_FDS:
            s.received_fds.extend(self.st.fds[: self.st.nfds])
            return None if self.handle_frames(s, frames, self.conn, self.log) else 1
        if why == FP_SEND_ERROR:
            raise ClientGone(os.strerror(self.st.err))
        if why == FP_RECV_ERROR and self.st.err not in (errno.ECONNRESET, errno.ETIMEDOUT):
            raise OSError(self.st.err, os.strerror(self.st.err))
        self.log.info("client disconnected after %d calls; freeing its resources (%d calls answered by the C fast "
                      "path)", s.total_calls(), s.fast_calls())
        return 0
