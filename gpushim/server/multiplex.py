"""Several servers as one device list (GPUSHIM_SERVER=url1,url2,...; docs/scheduling.md "Several servers").

The shim starts this process (`gpushim multiplex --fd N URL...`) with one end of a socket pair when
GPUSHIM_SERVER names several servers, and speaks the ordinary protocol to it. The multiplexer opens one
session per server (all for the same client: its HELLO's program, pid, runtime, priority and token), presents
their devices as ordinals 0..N-1 (in the order given, or as GPUSHIM_DEVICES names them: combined ordinal,
UUID, or `server-index:ordinal`), and routes each call to the server owning its device, stream, event or
device pointer (the servers' device address ranges must be disjoint: `gpushim serve --arena-base`). Stream
and event handles are renumbered, so two servers' handles never collide. Copies between devices of
different servers are staged through this process (device to host on one, host to device on the other, in
chunks), and while one is in progress later calls wait, so each server still sees the client's order.
"""

from __future__ import annotations

import bisect
import logging
import re
import select
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpushim.cuda_errors import Err
from gpushim.protocol import BULK_CHUNK, CALL, CALLBACK, FATAL, HANDLE_BASE, HELLO, OPS_BY_ID, POST, REPLY, STATUS
from gpushim.wire import FrameBuffer, FrameError, pack, unpack_body

log = logging.getLogger("gpushim.multiplex")
OUT_LIMIT = 64 << 20  # bytes buffered for one peer before the reading that feeds it pauses
PRIVATE_SEQ = 1 << 62  # sequence numbers of the multiplexer's own calls (the client's are far below)
# operations on memory that may name a stream of another server (the memory's server decides)
CROSS_STREAM_OPS = {"MEMCPY_H2D", "MEMCPY_D2H", "MEMCPY_D2D", "MEMCPY2D_H2D", "MEMCPY2D_D2H", "MEMCPY2D_D2D",
                    "MEMSET", "MEMSET2D", "MEMSET_WIDE", "FREE_ASYNC"}
ATTR_PCI_DOMAIN_ID = 50  # cudaDevAttrPciDomainId
Reply = Callable[[list[Any]], None]


class MultiplexError(Exception):
    """The servers cannot be used together; the message goes to the client as its handshake refusal."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class Upstream:
    index: int
    url: str
    sock: socket.socket
    buf: FrameBuffer = field(default_factory=FrameBuffer)
    welcome: dict[str, Any] = field(default_factory=dict)
    pending: dict[int, Reply] = field(default_factory=dict)  # seq -> what to do with its REPLY
    out: bytearray = field(default_factory=bytearray)  # frames not yet written (the loop writes when it can)

    def send(self, msg: list[Any]) -> None:
        self.out += pack(msg)


def _connect(url: str, timeout: float) -> socket.socket:
    import click

    from gpushim.cli import connect

    try:
        return connect(url, timeout)
    except click.ClickException as e:  # a malformed address
        raise OSError(e.message) from None


def _exchange(sock: socket.socket, msg: list[Any], timeout: float) -> Any:
    """One request and its answer on a fresh connection (handshake time only)."""
    sock.settimeout(timeout)
    sock.sendall(pack(msg))
    buf = FrameBuffer()
    while True:
        data = sock.recv(65536)
        if not data:
            raise OSError("the server closed the connection")
        buf.feed(data)
        frames = buf.frames()
        if frames:
            rest = buf.take_rest()
            return unpack_body(frames[0]), rest


class Multiplexer:
    def __init__(self, client: socket.socket, urls: list[str], timeout: float = 10.0) -> None:
        self.client = client
        self.urls = urls
        self.timeout = timeout
        self.ups: list[Upstream] = []
        self.devs: list[tuple[int, int]] = []  # client ordinal -> (upstream, that session's ordinal)
        self.handles: dict[int, tuple[int, int]] = {}  # our stream/event handle -> (upstream, its handle)
        self.back: dict[tuple[int, int], int] = {}
        self.next_handle = HANDLE_BASE
        self.vmm_handles: dict[int, tuple[int, int]] = {}  # our cuMemCreate handle -> (upstream, its handle)
        self.next_vmm_handle = 0
        self.vmm_refs: dict[int, int] = {}  # our handle -> references when more than one (retained)
        self.callbacks: dict[int, int] = {}  # callback id -> upstream that will want CALLBACK_DONE
        self.next_private = PRIVATE_SEQ
        self.busy = 0  # staged copies in progress: the client's later frames wait
        self.held: list[list[Any]] = []
        self.cbuf = FrameBuffer()
        self.cout = bytearray()  # frames for the client not yet written
        self.ending: int | None = None  # the exit status once the session must end
        self.wanted: list[tuple[int, int]] = []  # GPUSHIM_DEVICES resolved: (server index, backend ordinal)
        self.arenas: list[tuple[int, int, int]] = []  # (start, end, upstream) announced by the servers
        self.allocs: dict[int, tuple[int, int]] = {}  # start -> (size, upstream), for servers announcing none
        self.alloc_starts: list[int] = []

    # -- handshake -------------------------------------------------------------------------------------
    def handshake(self) -> bool:
        self.client.settimeout(self.timeout)
        try:
            hello, rest = _exchange_first(self.client)
        except (OSError, FrameError) as e:
            log.error("no handshake from the client: %s", e)
            return False
        self.cbuf.feed(rest)
        try:
            welcome = self._open(hello)
        except MultiplexError as e:
            self.client.sendall(pack([HELLO, {"proto": hello.get("proto"), "error": e.code, "message": e.message}]))
            return False
        self.client.sendall(pack([HELLO, welcome]))
        self.client.settimeout(None)
        return True

    def _open(self, hello: dict[str, Any]) -> dict[str, Any]:
        token = hello.get("token")
        inventories: list[list[dict[str, Any]]] = []
        spec = str(hello.get("devices") or "")
        for i, url in enumerate(self.urls if spec.strip() else []):  # inventories only to resolve names
            try:
                with _connect(url, self.timeout) as s:
                    st, _ = _exchange(s, [STATUS, {"token": token}], self.timeout)
            except OSError as e:
                raise MultiplexError(Err.NO_DEVICE, f"server {i} ({url}) of GPUSHIM_SERVER: {e}") from None
            if not isinstance(st, list) or len(st) != 2 or not isinstance(st[1], dict) or st[1].get("error"):
                msg = st[1].get("message") if isinstance(st, list) and len(st) == 2 else "bad answer"
                raise MultiplexError(Err.NOT_PERMITTED, f"server {i} ({url}): {msg}")
            inventories.append(st[1]["devices"])
        chosen = self._choose(inventories, spec) if spec.strip() else [None] * len(self.urls)
        order: list[tuple[int, int]] = []  # (upstream, session ordinal), servers in the order given
        up_of: dict[int, int] = {}  # GPUSHIM_SERVER index -> upstream index
        for i, url in enumerate(self.urls):
            names = chosen[i]
            if names is not None and not names:
                continue  # GPUSHIM_DEVICES names none of this server's devices: no session there
            up_hello = dict(hello, devices=",".join(str(o) for o in names) if names else "")
            try:
                sock = _connect(url, self.timeout)
                w, rest = _exchange(sock, [HELLO, up_hello], self.timeout)
            except OSError as e:
                raise MultiplexError(Err.NO_DEVICE, f"server {i} ({url}) of GPUSHIM_SERVER: {e}") from None
            if not (isinstance(w, list) and len(w) == 2 and isinstance(w[1], dict)):
                raise MultiplexError(Err.INVALID_VALUE, f"server {i} ({url}) answered the handshake wrongly")
            if w[1].get("error"):
                raise MultiplexError(int(w[1]["error"]), f"server {i} ({url}): {w[1].get('message')}")
            sock.settimeout(None)
            up = Upstream(len(self.ups), url, sock, welcome=w[1])
            up.buf.feed(rest)
            self.ups.append(up)
            up_of[i] = up.index
            for local in range(int(w[1].get("devices") or 0)):
                order.append((up.index, local))
        self._check_arenas()
        if len(self.ups) > 1:
            self._renumber_buses(order)
        if self.wanted:  # GPUSHIM_DEVICES's order; each session numbers its devices as they were named to it
            self.devs = [(up_of[i], (chosen[i] or []).index(o)) for i, o in self.wanted]
        else:
            self.devs = order
        first = self.ups[0].welcome
        return {"proto": first.get("proto"), "session": first.get("session"), "error": 0, "message": "",
                "driver": min(int(u.welcome.get("driver") or 0) for u in self.ups), "devices": len(self.devs),
                "server": f"gpushim multiplex of {len(self.ups)} servers",
                "backend": ",".join(str(u.welcome.get("backend")) for u in self.ups)}

    def _renumber_buses(self, order: list[tuple[int, int]]) -> None:
        """Servers' PCI bus ids may repeat (every emulator's device 0 is 0000:10:00.0): the client sees each
        server's as PCI domain = its index in the device list's servers, and cudaDeviceGetByPCIBusId maps back."""
        self.buses: dict[tuple[int, int, int, int], tuple[int, int]] = {}
        for k, local in order:
            r = self._call_sync(self.ups[k], "DEVICE_PCI_BUS_ID", [local])
            parsed = _parse_bus(str(r[0])) if r else None
            if parsed is not None:
                self.buses[(k, *parsed[1:])] = (k, local)

    def _call_sync(self, up: Upstream, op: str, args: list[Any]) -> list[Any] | None:
        """A call of our own during the handshake (nothing else is in flight yet)."""
        from gpushim.protocol import OPS_BY_NAME

        seq = self.next_private
        self.next_private += 1
        up.sock.settimeout(self.timeout)
        up.sock.sendall(pack([CALL, seq, OPS_BY_NAME[op].id, args]))
        try:
            while True:
                for body in up.buf.frames():
                    msg = unpack_body(body)
                    if msg[0] == REPLY and msg[1] == seq:
                        return msg[3] if msg[2] == 0 else None
                data = up.sock.recv(65536)
                if not data:
                    raise MultiplexError(Err.NO_DEVICE, f"server {up.index} ({up.url}) closed the connection")
                up.buf.feed(data)
        finally:
            up.sock.settimeout(None)

    def _choose(self, inventories: list[list[dict[str, Any]]], spec: str) -> list[list[int] | None]:
        """Per server, the backend ordinals GPUSHIM_DEVICES names in the client's order (None: no names)."""
        self.wanted = []
        if not spec.strip():
            return [None] * len(inventories)
        combined = [(i, d["ordinal"]) for i, inv in enumerate(inventories) for d in inv]
        for part in (p.strip() for p in spec.split(",")):
            hit: tuple[int, int] | None = None
            if ":" in part and not part.startswith("GPU-"):
                k, _, o = part.partition(":")
                if k.isdigit() and o.isdigit() and int(k) < len(inventories) and \
                        any(d["ordinal"] == int(o) for d in inventories[int(k)]):
                    hit = (int(k), int(o))
            elif part.isdigit():
                if int(part) < len(combined):
                    hit = combined[int(part)]
            else:
                uuid = part.removeprefix("GPU-").replace("-", "").lower()
                hit = next(((i, d["ordinal"]) for i, inv in enumerate(inventories) for d in inv
                            if d.get("uuid") == uuid), None)
            if hit is None:
                raise MultiplexError(Err.INVALID_DEVICE,
                                     f"GPUSHIM_DEVICES names '{part}', which none of the {len(inventories)} servers "
                                     f"has ({len(combined)} devices: ordinals 0..{len(combined) - 1}, UUIDs, or "
                                     "SERVER:ORDINAL)")
            if hit in self.wanted:
                raise MultiplexError(Err.INVALID_DEVICE, f"GPUSHIM_DEVICES names device {part} twice")
            self.wanted.append(hit)
        return [[o for k, o in self.wanted if k == i] for i in range(len(inventories))]

    def _check_arenas(self) -> None:
        spans = [(u.welcome.get("arena"), u) for u in self.ups]
        known = [(a[0], a[1], u) for a, u in spans if a]
        for i, (lo, hi, u) in enumerate(known):
            for lo2, hi2, u2 in known[i + 1:]:
                if lo < hi2 and lo2 < hi:
                    raise MultiplexError(
                        Err.INVALID_VALUE,
                        f"servers {u.index} ({u.url}) and {u2.index} ({u2.url}) hand out the same device addresses "
                        f"({lo:#x}..{hi:#x}); start them with distinct `gpushim serve --arena-base`")
        if len(self.ups) > 1 and len(known) < len(self.ups):
            log.warning("a server does not say which device addresses it hands out (cuda backend): pointers are "
                        "routed to the server that returned them")
        self.arenas = [(lo, hi, u.index) for lo, hi, u in known]

    # -- running ---------------------------------------------------------------------------------------
    def run(self) -> int:
        """Forwards frames until the client leaves (0) or a server is lost (1). Nothing here blocks on a
        write: every socket has an output buffer written when select says it can take more, so a server busy
        sending a large reply never deadlocks against a large frame for it. A buffer over OUT_LIMIT stops
        the reading that fills it until it drains (back-pressure)."""
        for sock in (self.client, *(u.sock for u in self.ups)):
            sock.setblocking(False)
        for u in self.ups:  # frames that arrived with the welcome
            self._upstream_frames(u)
        self._client_frames()
        while self.ending is None:
            by_sock: dict[socket.socket, Upstream | None] = {self.client: None, **{u.sock: u for u in self.ups}}
            readers = [u.sock for u in self.ups] if len(self.cout) < OUT_LIMIT else []
            if all(len(u.out) < OUT_LIMIT for u in self.ups):
                readers.append(self.client)
            writers = [u.sock for u in self.ups if u.out] + ([self.client] if self.cout else [])
            readable, writable, _ = select.select(readers, writers, [])
            for sock in writable:
                up = by_sock[sock]
                buf = self.cout if up is None else up.out
                try:
                    n = sock.send(memoryview(buf)[: 4 << 20])
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    return 0 if up is None else self._lost(up)
                del buf[:n]
            for sock in readable:
                up = by_sock[sock]
                try:
                    data = sock.recv(1 << 20)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if not data:
                    return 0 if up is None else self._lost(up)  # the client left: our sockets end its sessions
                if up is None:
                    self.cbuf.feed(data)
                    self._client_frames()
                else:
                    up.buf.feed(data)
                    self._upstream_frames(up)
        self._flush_client()
        return self.ending

    def _lost(self, up: Upstream) -> int:
        log.error("server %d (%s) closed the connection", up.index, up.url)
        self._send_client([FATAL, 0, Err.DEVICES_UNAVAILABLE, f"lost the connection to server {up.index} ({up.url})"])
        self._flush_client()
        return 1

    def _flush_client(self) -> None:
        """Writes what the client has not received yet (the session is ending)."""
        try:
            self.client.setblocking(True)
            self.client.settimeout(self.timeout)
            self.client.sendall(self.cout)
        except OSError:
            pass
        self.cout.clear()

    def _send_client(self, msg: list[Any]) -> None:
        self.cout += pack(msg)

    def _upstream_frames(self, up: Upstream) -> None:
        for body in up.buf.frames():
            msg = unpack_body(body)
            kind = msg[0]
            if kind == REPLY:
                handler = up.pending.pop(msg[1], None)
                if handler is not None:
                    handler(msg)
            elif kind == CALLBACK:
                self.callbacks[msg[2]] = up.index
                self._send_client([CALLBACK, self._ours(up.index, msg[1]), msg[2]])
            elif kind == FATAL:
                self._send_client(msg)
            else:
                log.warning("unexpected frame kind %s from server %d", kind, up.index)

    def _client_frames(self) -> None:
        try:
            bodies = self.cbuf.frames()
            msgs = [unpack_body(b) for b in bodies]
        except FrameError as e:
            self._send_client([FATAL, 0, Err.INVALID_VALUE, f"malformed frame: {e}"])
            self.ending = 1
            return
        for msg in msgs:
            if self.ending is not None:
                return
            callback_done = isinstance(msg, list) and len(msg) == 4 and isinstance(msg[2], int) and \
                OPS_BY_ID.get(msg[2]) is not None and OPS_BY_ID[msg[2]].name == "CALLBACK_DONE"
            if self.busy and not callback_done:
                self.held.append(msg)  # a staged copy is in progress: the client's order is kept
                continue
            self._dispatch(msg)

    def _release_held(self) -> None:
        while self.held and not self.busy:
            self._dispatch(self.held.pop(0))

    # -- handles, devices, pointers --------------------------------------------------------------------
    def _ours(self, k: int, h: int) -> int:
        """Our handle for upstream k's stream/event handle h (legacy streams: our device ordinal)."""
        if h < HANDLE_BASE:
            return self.devs.index((k, h)) if (k, h) in self.devs else h
        key = (k, h)
        if key not in self.back:
            self.next_handle += 0x10
            self.back[key] = self.next_handle
            self.handles[self.next_handle] = key
        return self.back[key]

    def _theirs(self, h: int) -> tuple[int, int]:
        if h < HANDLE_BASE:
            if not 0 <= h < len(self.devs):
                raise _Refuse(Err.INVALID_RESOURCE_HANDLE, f"stream handle {h:#x} names no device")
            return self.devs[h]
        if h not in self.handles:
            raise _Refuse(Err.INVALID_RESOURCE_HANDLE, f"unknown stream or event handle {h:#x}")
        return self.handles[h]

    def _dev(self, d: Any) -> tuple[int, int]:
        if not isinstance(d, int) or not 0 <= d < len(self.devs):
            raise _Refuse(Err.INVALID_DEVICE, f"device {d} does not exist ({len(self.devs)} devices)")
        return self.devs[d]

    def _owner(self, ptr: Any) -> int:
        """The server a device pointer belongs to: by the address ranges servers announce, else by the
        allocations seen (servers that announce none: the cuda backend), else the first server."""
        if isinstance(ptr, int):
            for lo, hi, k in self.arenas:
                if lo <= ptr < hi:
                    return k
            i = bisect.bisect_right(self.alloc_starts, ptr) - 1
            if i >= 0:
                start = self.alloc_starts[i]
                size, k = self.allocs[start]
                if ptr < start + max(size, 1):
                    return k
        return self.ups[0].index

    def _remember(self, k: int, ptr: int, size: int) -> None:
        """An allocation on a server that announces no address range (routing by allocation)."""
        if any(lo <= ptr < hi for lo, hi, _ in self.arenas) or not isinstance(ptr, int):
            return
        if ptr in self.allocs and self.allocs[ptr][1] != k:
            log.warning("servers %d and %d returned the same device address %#x: pointers to it are ambiguous",
                        self.allocs[ptr][1], k, ptr)
        if ptr not in self.allocs:
            bisect.insort(self.alloc_starts, ptr)
        self.allocs[ptr] = (int(size), k)

    def _forget(self, ptr: Any) -> None:
        if isinstance(ptr, int) and ptr in self.allocs:
            del self.allocs[ptr]
            self.alloc_starts.remove(ptr)

    def _stream_on(self, k: int, stream: int, dev_local: int) -> int:
        """Upstream k's handle for `stream`; a stream of another server becomes k's legacy stream of dev_local
        (the copy then keeps the client's order there, not that stream's)."""
        sk, sh = self._theirs(stream)
        return sh if sk == k else dev_local

    # -- dispatch --------------------------------------------------------------------------------------
    def _dispatch(self, msg: Any) -> None:
        if not (isinstance(msg, list) and len(msg) == 4 and msg[0] in (CALL, POST) and isinstance(msg[3], list)):
            self._send_client([FATAL, 0, Err.INVALID_VALUE, "malformed frame"])
            self.ending = 1
            return
        kind, seq, op_id, args = msg
        op = OPS_BY_ID.get(op_id) if isinstance(op_id, int) else None
        if op is None or len(args) != len(op.args):
            self._answer(kind, seq, Err.INVALID_VALUE, [], f"unknown operation {op_id} or wrong argument count")
            return
        a = dict(zip(op.args, args, strict=True))
        try:
            handler = getattr(self, f"_op_{op.name.lower()}", None)
            if handler is not None:
                handler(kind, seq, op.id, a)
            else:
                self._route(kind, seq, op.id, op.args, a)
        except _Refuse as e:
            self._answer(kind, seq, e.code, [], e.message)

    def _answer(self, kind: int, seq: int, err: int, results: list[Any], note: str | None = None) -> None:
        if kind == CALL:
            self._send_client([REPLY, seq, int(err), results, None, note])
        elif err:
            log.warning("posted call failed here: %s", note)

    def _forward(self, k: int, kind: int, seq: int, op: int, args: list[Any],
                 fix: Callable[[list[Any]], list[Any]] | None = None) -> None:
        up = self.ups[k]
        if kind == CALL:
            def reply(msg: list[Any]) -> None:
                if fix is not None and msg[2] == 0:
                    msg[3] = fix(msg[3])
                self._send_client(msg)
            up.pending[seq] = reply
        up.send([kind, seq, op, args])

    def _private(self, k: int, op: str, args: list[Any], then: Reply) -> None:
        from gpushim.protocol import OPS_BY_NAME

        seq = self.next_private
        self.next_private += 1
        self.ups[k].pending[seq] = then
        self.ups[k].send([CALL, seq, OPS_BY_NAME[op].id, args])

    def _route(self, kind: int, seq: int, op: int, names: tuple[str, ...], a: dict[str, Any]) -> None:
        """Generic routing by the first argument that names a place: dev, a stream/event, a pointer."""
        k: int | None = None
        opname = OPS_BY_ID[op].name
        cross: tuple[int, int] | None = None  # a stream of another server than the memory's: (server, handle)
        if "dev" in a:
            k, a["dev"] = self._dev(a["dev"])
        for name in ("dst", "src", "ptr", "addr"):
            if name in a and k is None:
                k = self._owner(a[name])
        for name in ("stream", "event"):
            if name in a:
                sk, sh = self._theirs(a[name])
                if k is None:
                    k = sk
                elif sk != k:
                    if name != "stream" or opname not in CROSS_STREAM_OPS:
                        raise _Refuse(Err.INVALID_RESOURCE_HANDLE, f"the {name} belongs to another server's device")
                    cross, sh = (sk, sh), self._local_dev_on(k)
                a[name] = sh
        if k is None:
            k = self.devs[0][0] if self.devs else 0
        if cross is not None:
            self._cross_stream(kind, seq, opname, [a[n] for n in names], k, a["stream"], cross)
            return
        fix = None
        if opname in ("STREAM_CREATE", "EVENT_CREATE"):
            kk = k
            fix = lambda r: [self._ours(kk, r[0])]  # noqa: E731
        elif opname in ("MALLOC", "MALLOC_MANAGED"):
            kk, size = k, a["size"]
            fix = lambda r: (self._remember(kk, r[0], size), r)[1]  # noqa: E731
        elif opname == "MALLOC_PITCH":
            kk, height = k, a["height"]
            fix = lambda r: (self._remember(kk, r[0], r[1] * height), r)[1]  # noqa: E731
        elif opname == "SYMBOL_INFO":
            kk = k
            fix = lambda r: (self._remember(kk, r[0], r[1]), r)[1]  # noqa: E731
        elif opname in ("FREE", "FREE_ASYNC"):
            self._forget(a["ptr"])
        elif opname == "POINTER_INFO":
            kk = k
            fix = lambda r: [r[0], self.devs.index((kk, r[1])) if (kk, r[1]) in self.devs else r[1], *r[2:]]  # noqa: E731
        self._forward(k, kind, seq, op, [a[n] for n in names], fix)

    def _cross_stream(self, kind: int, seq: int, opname: str, args: list[Any], k: int, legacy: int,
                      stream: tuple[int, int]) -> None:
        """Memory of server k used on a stream of another server: the stream's earlier work completes there
        first, then the operation runs on k's legacy stream and completes too, while later calls wait. The
        client's order holds (more strictly than CUDA's); an error of such a posted operation is logged
        here, not reported to the client later."""
        self.busy += 1

        def finish(msg: list[Any]) -> None:
            self.busy -= 1
            self._answer(kind, seq, msg[2], msg[3] if not msg[2] else [], msg[5] if len(msg) > 5 else None)
            self._release_held()

        def ran(msg: list[Any]) -> None:
            if msg[2]:
                finish(msg)
                return
            self._private(k, "STREAM_SYNC", [legacy], lambda done: finish(done if done[2] else msg))

        def drained(msg: list[Any]) -> None:
            if msg[2]:
                finish(msg)
                return
            self._private(k, opname, args, ran)

        self._private(stream[0], "STREAM_SYNC", [stream[1]], drained)

    def _local_dev_on(self, k: int) -> int:
        return next((local for kk, local in self.devs if kk == k), 0)

    # -- operations that are not one server's --------------------------------------------------------
    def _op_device_count(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        self._answer(kind, seq, 0, [len(self.devs)])

    def _op_driver_version(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        self._forward(self.devs[0][0] if self.devs else 0, kind, seq, op, [])

    def _op_can_access_peer(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        (k, d), (kp, p) = self._dev(a["dev"]), self._dev(a["peer"])
        if k != kp:
            self._answer(kind, seq, 0, [0])  # different servers: copies are staged, no direct access
        else:
            self._forward(k, kind, seq, op, [d, p])

    def _op_peer_access(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        (k, d), (kp, p) = self._dev(a["dev"]), self._dev(a["peer"])
        if k != kp:  # cudaDeviceCanAccessPeer said 0: the shim never asks
            self._answer(kind, seq, Err.NOT_SUPPORTED, [], "peer access across servers is not supported")
        else:
            self._forward(k, kind, seq, op, [d, p, a["set"]])

    def _op_device_by_pci_bus_id(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        if len(self.ups) == 1:
            self._forward(self.ups[0].index, kind, seq, op, [a["bus_id"]],
                          lambda r: [self.devs.index((0, r[0])) if (0, r[0]) in self.devs else r[0]])
            return
        parsed = _parse_bus(str(a["bus_id"]))
        hit = self.buses.get(parsed) if parsed else None
        if hit is None or hit not in self.devs:
            raise _Refuse(Err.INVALID_DEVICE, f"no device has PCI bus id {a['bus_id']!r}")
        self._answer(kind, seq, 0, [self.devs.index(hit)])

    def _op_device_pci_bus_id(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        k, local = self._dev(a["dev"])

        def fix(r: list[Any]) -> list[Any]:
            parsed = _parse_bus(str(r[0]))
            if len(self.ups) == 1 or parsed is None:
                return r
            return [f"{k:04x}:{parsed[1]:02x}:{parsed[2]:02x}.{parsed[3]:x}".upper()]

        self._forward(k, kind, seq, op, [local], fix)

    def _op_device_attr(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        k, local = self._dev(a["dev"])
        if a["attr"] == ATTR_PCI_DOMAIN_ID and len(self.ups) > 1:
            self._answer(kind, seq, 0, [k])
        else:
            self._forward(k, kind, seq, op, [a["attr"], local])

    def _op_device_props(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        k, local = self._dev(a["dev"])

        def fix(r: list[Any]) -> list[Any]:
            if len(self.ups) > 1 and isinstance(r[0], dict):
                r[0]["pciDomainID"] = k
            return r

        self._forward(k, kind, seq, op, [local], fix)

    def _op_callback_done(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        k = self.callbacks.pop(a["callback_id"], 0)
        self._forward(k, kind, seq, op, [a["callback_id"]])

    def _op_event_elapsed(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        (k1, s), (k2, e) = self._theirs(a["start"]), self._theirs(a["end"])
        if k1 != k2:
            raise _Refuse(Err.INVALID_RESOURCE_HANDLE, "cudaEventElapsedTime between events of different servers")
        self._forward(k1, kind, seq, op, [s, e])

    def _op_stream_wait_event(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        (ks, s), (ke, e) = self._theirs(a["stream"]), self._theirs(a["event"])
        if ks == ke:
            self._forward(ks, kind, seq, op, [s, e, a["flags"]])
            return
        # Across servers: later calls wait here until the event has completed (stronger than CUDA's order,
        # which holds only that stream, but never weaker).
        self.busy += 1

        def done(msg: list[Any]) -> None:
            self.busy -= 1
            self._answer(kind, seq, msg[2], [], msg[5] if len(msg) > 5 else None)
            self._release_held()

        self._private(ke, "EVENT_SYNC", [e], done)

    def _fan_out(self, kind: int, seq: int, op_name: str, args: list[Any],
                 combine: Callable[[list[list[Any]]], list[Any]]) -> None:
        replies: dict[int, list[Any]] = {}

        def one(k: int) -> Reply:
            def got(msg: list[Any]) -> None:
                replies[k] = msg
                if len(replies) == len(self.ups):
                    bad = next((m for m in replies.values() if m[2]), None)
                    if bad is not None:
                        self._answer(kind, seq, bad[2], [], bad[5] if len(bad) > 5 else None)
                    else:
                        self._answer(kind, seq, 0, combine([replies[u.index][3] for u in self.ups]))
            return got

        for u in self.ups:
            self._private(u.index, op_name, args, one(u.index))

    def _op_runtime_version(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        # every server records the client's runtime (status, log), not only the first device's
        self._fan_out(kind, seq, "RUNTIME_VERSION", [a["runtime"]], lambda rs: [])

    def _op_module_query(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        self._fan_out(kind, seq, "MODULE_QUERY", [a["hash"]], lambda rs: [int(all(r[0] for r in rs))])

    def _op_module_load(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        self._fan_out(kind, seq, "MODULE_LOAD", [a["hash"], a["fatbin"]], lambda rs: [])

    def _op_memcpy_d2d(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        kd, ks = self._owner(a["dst"]), self._owner(a["src"])
        if kd == ks:
            self._route(kind, seq, op, OPS_BY_ID[op].args, a)
            return
        sstream = self._stream_on(ks, a["stream"], self._local_dev_on(ks))
        dstream = self._stream_on(kd, a["stream"], self._local_dev_on(kd))
        self._stage(kind, seq, ks, a["src"], sstream, kd, a["dst"], dstream, int(a["nbytes"]))

    def _op_memcpy_peer(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        (kd, dd), (ks, sd) = self._dev(a["dst_dev"]), self._dev(a["src_dev"])
        if kd == ks:
            k, d = self._dev(a["dev"])
            self._forward(kd, kind, seq, op, [a["dst"], dd, a["src"], sd, a["nbytes"], d if k == kd else dd])
            return
        self._stage(kind, seq, ks, a["src"], sd, kd, a["dst"], dd, int(a["nbytes"]))

    def _stage(self, kind: int, seq: int, ks: int, src: int, sstream: int, kd: int, dst: int, dstream: int,
               n: int) -> None:
        """Device to host on server ks, then host to device on kd, BULK_CHUNK at a time; later calls wait."""
        self.busy += 1
        state = {"off": 0}

        def finish(err: int, note: str | None) -> None:
            self.busy -= 1
            self._answer(kind, seq, err, [], note)
            self._release_held()

        def next_chunk() -> None:
            off = state["off"]
            if off >= n:  # the last chunk has landed before later calls go on
                self._private(kd, "STREAM_SYNC", [dstream],
                              lambda m: finish(m[2], m[5] if m[2] and len(m) > 5 else None))
                return
            m = min(BULK_CHUNK, n - off)

            def got(msg: list[Any]) -> None:
                if msg[2]:
                    finish(msg[2], msg[5] if len(msg) > 5 else None)
                    return
                data = msg[3][0]

                def put(msg2: list[Any]) -> None:
                    if msg2[2]:
                        finish(msg2[2], msg2[5] if len(msg2) > 5 else None)
                        return
                    state["off"] = off + m
                    next_chunk()

                self._private(kd, "MEMCPY_H2D", [dst + off, dstream, data], put)

            self._private(ks, "MEMCPY_D2H", [src + off, m, sstream], got)

        next_chunk()

    def _op_memcpy2d_d2d(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        if self._owner(a["dst"]) != self._owner(a["src"]):
            raise _Refuse(Err.NOT_SUPPORTED, "2D copies between devices of different servers are not supported")
        self._route(kind, seq, op, OPS_BY_ID[op].args, a)

    def _op_device_sync(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        self._route(kind, seq, op, OPS_BY_ID[op].args, a)

    # -- the driver face's module unload and virtual memory management (ops_driver.py, ops_vmm.py) ----------
    def _op_module_unload(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        self._fan_out(kind, seq, "MODULE_UNLOAD", [a["hash"]], lambda rs: [])

    def _vmm_handle(self, h: Any) -> tuple[int, int]:
        got = self.vmm_handles.get(h) if isinstance(h, int) else None
        if got is None:
            raise _Refuse(Err.INVALID_VALUE, f"{h} is not a live allocation handle of this session")
        return got

    def _op_vmm_reserve(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        k, a["dev"] = self._dev(a["dev"])
        size = a["size"]
        self._forward(k, kind, seq, op, [a[n] for n in OPS_BY_ID[op].args],
                      lambda r: (self._remember(k, r[0], size), r)[1])

    def _op_vmm_create(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        k, a["dev"] = self._dev(a["dev"])

        def ours(r: list[Any]) -> list[Any]:
            self.next_vmm_handle += 1
            self.vmm_handles[self.next_vmm_handle] = (k, r[0])
            return [self.next_vmm_handle]

        self._forward(k, kind, seq, op, [a[n] for n in OPS_BY_ID[op].args], ours)

    _op_vmm_create_shareable = _op_vmm_create

    def _op_vmm_retain(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        k = self._owner(a["ptr"])

        def ours(r: list[Any]) -> list[Any]:  # the client's handle for it again, one more reference
            mine = next((m for m, v in self.vmm_handles.items() if v == (k, r[0])), None)
            if mine is None:
                self.next_vmm_handle += 1
                mine = self.next_vmm_handle
                self.vmm_handles[mine] = (k, r[0])  # one reference: the one retained now
            else:
                self.vmm_refs[mine] = self.vmm_refs.get(mine, 1) + 1
            dev = self.devs.index((k, r[1])) if (k, r[1]) in self.devs else r[1]
            return [mine, dev, *r[2:]]

        self._forward(k, kind, seq, op, [a[n] for n in OPS_BY_ID[op].args], ours)

    def _op_vmm_get_access(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        k = self._owner(a["ptr"])
        kd, a["dev"] = self._dev(a["dev"])
        if kd != k:
            raise _Refuse(Err.NOT_SUPPORTED, "cuMemGetAccess: access from a device of another server")
        self._forward(k, kind, seq, op, [a[n] for n in OPS_BY_ID[op].args])

    def _op_vmm_export(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        k, a["handle"] = self._vmm_handle(a["handle"])
        self._forward(k, kind, seq, op, [a[n] for n in OPS_BY_ID[op].args])

    def _op_vmm_import(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        raise _Refuse(Err.NOT_SUPPORTED, "cuMemImportFromShareableHandle: a file descriptor cannot pass through "
                      "the multiplexer of several servers")

    def _op_vmm_map(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        k, h = self._vmm_handle(a["handle"])
        if self._owner(a["ptr"]) != k:
            raise _Refuse(Err.NOT_SUPPORTED, "cuMemMap: the memory and the address range are on different servers")
        a["handle"] = h
        self._forward(k, kind, seq, op, [a[n] for n in OPS_BY_ID[op].args])

    def _op_vmm_free(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        if a["what"] == 1:
            key = a["obj"]
            k, a["obj"] = self._vmm_handle(key)
            refs = self.vmm_refs.pop(key, 1) - 1  # cuMemRetainAllocationHandle adds references
            if refs > 0:
                self.vmm_refs[key] = refs
            else:  # a failed last release names no handle the client may use again either
                self.vmm_handles.pop(key)
        else:
            k = self._owner(a["obj"])
            self._forget(a["obj"])
        self._forward(k, kind, seq, op, [a[n] for n in OPS_BY_ID[op].args])

    def _op_vmm_set_access(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        k = self._owner(a["ptr"])
        kd, a["dev"] = self._dev(a["dev"])
        if kd != k:
            raise _Refuse(Err.NOT_SUPPORTED, "cuMemSetAccess: access from a device of another server")
        self._forward(k, kind, seq, op, [a[n] for n in OPS_BY_ID[op].args])

    def _refuse_shm(self, kind: int, seq: int, op: int, a: dict[str, Any]) -> None:
        raise _Refuse(Err.NOT_SUPPORTED, "shared host memory is not used with several servers")

    _op_host_map = _op_host_unmap = _op_memcpy_h2d_shm = _op_memcpy_d2h_shm = _op_memcpy_h2d_staged = _refuse_shm


class _Refuse(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = int(code), message


def _parse_bus(text: str) -> tuple[int, int, int, int] | None:
    """[domain:]bus:device[.function] (hex) as numbers, as cudaDeviceGetByPCIBusId accepts it."""
    m = re.fullmatch(r"\s*(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.([0-9a-fA-F]))?\s*",
                     text.rstrip("\0"))
    if not m:
        return None
    return int(m[1] or "0", 16), int(m[2], 16), int(m[3], 16), int(m[4] or "0", 16)


def _exchange_first(sock: socket.socket) -> tuple[dict[str, Any], bytes]:
    buf = FrameBuffer()
    while True:
        data = sock.recv(65536)
        if not data:
            raise OSError("the client closed the connection")
        buf.feed(data)
        frames = buf.frames()
        if frames:
            msg = unpack_body(frames[0])
            rest = b"".join(len(f).to_bytes(4, "little") + bytes(f) for f in frames[1:]) + buf.take_rest()
            if not (isinstance(msg, list) and len(msg) == 2 and msg[0] == HELLO and isinstance(msg[1], dict)):
                raise FrameError("the first frame is not a HELLO")
            return msg[1], rest


def serve_fd(fd: int, urls: list[str]) -> int:
    client = socket.socket(fileno=fd)
    m = Multiplexer(client, urls)
    if not m.handshake():
        return 1
    try:
        return m.run()
    except (BrokenPipeError, ConnectionResetError):
        return 0
    finally:
        for u in m.ups:
            u.sock.close()
        client.close()
