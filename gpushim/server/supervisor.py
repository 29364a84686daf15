"""The supervisor: listens, admits clients after their handshake and forks one worker process per
session (DESIGN decision 7). It never initialises CUDA, so forking it is safe, and it is single-threaded.
It answers STATUS requests by asking each worker over a control socket."""

from __future__ import annotations

import hmac
import json
import logging
import os
import select
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpushim import __version__
from gpushim.backends.base import Backend
from gpushim.compat.policy import build_policy
from gpushim.cuda_errors import Err
from gpushim.protocol import HELLO, PROTOCOL_VERSION, STATUS
from gpushim.server.modules import ModuleLimits, ModuleStore, default_module_cache
from gpushim.server.placement import inputs as placement_inputs
from gpushim.server.placement import order_devices
from gpushim.server.scheduler import DeviceArbiter, SchedConfig
from gpushim.server.session import SessionInfo
from gpushim.server.worker import run_worker
from gpushim.wire import FrameBuffer, FrameError, pack, unpack_body

HANDSHAKE_TIMEOUT_S = 10.0
log = logging.getLogger("gpushim.server")


class ServeError(Exception):
    """The server cannot start (address in use, bad address, missing token)."""


@dataclass
class Pending:
    sock: socket.socket
    peer: str
    buf: FrameBuffer = field(default_factory=FrameBuffer)
    deadline: float = field(default_factory=lambda: time.monotonic() + HANDSHAKE_TIMEOUT_S)


@dataclass
class Worker:
    pid: int
    control: socket.socket
    info: SessionInfo
    started: float = field(default_factory=time.time)


def parse_listen(url: str) -> tuple[str, Any]:
    if url.startswith("unix://"):
        return "unix", url[len("unix://"):]
    if url.startswith("unix:"):
        return "unix", url[len("unix:"):]
    if url.startswith("tcp://"):
        hostport = url[len("tcp://"):]
        host, _, port = hostport.rpartition(":")
        if not host or not port.isdigit():
            raise ServeError(f"a TCP address needs host and port: tcp://HOST:PORT, not {url}")
        return "tcp", (host.strip("[]"), int(port))
    raise ServeError(f"listen address must be unix:///path or tcp://host:port, not '{url}'")


def is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


class Supervisor:
    def __init__(self, backend: Backend, listen: str, token: str | None = None,
                 memory_quota: int | None = None, max_sessions: int = 64, module_cache: Path | None = None,
                 max_priority: int = 0, module_limits: ModuleLimits | None = None,
                 sched: SchedConfig | None = None) -> None:
        self.backend = backend
        # created before any worker is forked: every worker inherits the shared table
        self.arbiter = DeviceArbiter(len(backend.devices()), max_sessions, sched or SchedConfig())
        self.max_priority = max_priority
        self.store = ModuleStore(module_cache or default_module_cache(), module_limits)
        self.listen_url = listen
        self.kind, self.addr = parse_listen(listen)
        if self.kind == "tcp" and not is_loopback(self.addr[0]) and not token:
            raise ServeError(f"listening on {self.addr[0]} (not loopback) requires --token-file: anyone who can "
                             "reach the port could otherwise use the GPUs")
        self.token = token
        self.memory_quota = memory_quota
        self.max_sessions = max_sessions
        self.pending: dict[int, Pending] = {}
        self.workers: dict[int, Worker] = {}
        self.next_session = 1
        self.stopping = False
        self.listener = self._bind()

    # -- listening ---------------------------------------------------------------------------------------
    def _bind(self) -> socket.socket:
        if self.kind == "unix":
            path = self.addr
            if os.path.exists(path):
                probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    probe.connect(path)
                    raise ServeError(f"a server is already listening at unix://{path}")
                except (ConnectionRefusedError, FileNotFoundError):
                    os.unlink(path)  # a stale socket from a server that died
                finally:
                    probe.close()
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            os.chmod(path, 0o600)  # the per-user socket: only its owner may use the GPUs through it
        else:
            host, port = self.addr
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            s = socket.socket(family, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError as e:
                s.close()
                raise ServeError(f"cannot listen on {self.listen_url}: {e.strerror}") from None
        s.listen(128)
        s.setblocking(False)
        return s

    @property
    def address(self) -> str:
        if self.kind == "unix":
            return f"unix://{self.addr}"
        host, port = self.listener.getsockname()[:2]
        return f"tcp://{host}:{port}"

    # -- main loop ---------------------------------------------------------------------------------------
    def serve_forever(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        log.info("%s", self.backend.describe())
        log.info("gpushim %s listening on %s", __version__, self.address)
        try:
            while not self.stopping:
                self._reap()
                fds = [self.listener] + [p.sock for p in self.pending.values()]
                try:
                    readable, _, _ = select.select(fds, [], [], 0.5)
                except InterruptedError:
                    continue
                for s in readable:
                    if s is self.listener:
                        self._accept()
                    else:
                        self._read_pending(s)
                self._expire_pending()
        finally:
            self.shutdown()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def _accept(self) -> None:
        try:
            sock, peer = self.listener.accept()
        except BlockingIOError:
            return
        sock.setblocking(False)
        self.pending[sock.fileno()] = Pending(sock, str(peer) or "unix")

    def _expire_pending(self) -> None:
        now = time.monotonic()
        for fd, p in list(self.pending.items()):
            if now > p.deadline:
                log.info("closing a connection that sent no handshake in %.0f s", HANDSHAKE_TIMEOUT_S)
                p.sock.close()
                del self.pending[fd]

    def _read_pending(self, sock: socket.socket) -> None:
        p = self.pending[sock.fileno()]
        try:
            data = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(p)
            return
        p.buf.feed(data)
        try:
            frames = p.buf.frames()
        except FrameError as e:
            log.warning("malformed handshake from %s: %s", p.peer, e)
            self._drop(p)
            return
        if not frames:
            return
        del self.pending[sock.fileno()]
        leftover = b"".join(pack_frame(f) for f in frames[1:]) + p.buf.take_rest()
        try:
            msg = unpack_body(frames[0])
            self._first_frame(p, msg, leftover)
        except FrameError as e:
            log.warning("malformed handshake from %s: %s", p.peer, e)
            p.sock.close()

    def _drop(self, p: Pending) -> None:
        self.pending.pop(p.sock.fileno(), None)
        p.sock.close()

    def _first_frame(self, p: Pending, msg: Any, leftover: bytes) -> None:
        if isinstance(msg, list) and len(msg) == 2 and msg[0] == STATUS:
            p.sock.setblocking(True)
            try:
                given = msg[1].get("token") if isinstance(msg[1], dict) else None
                if not self._token_ok(given):
                    p.sock.sendall(pack([STATUS, {"error": int(Err.NOT_PERMITTED),
                                                  "message": "wrong or missing token"}]))
                else:
                    p.sock.sendall(pack([STATUS, self.status()]))
            finally:
                p.sock.close()
            return
        if not (isinstance(msg, list) and len(msg) == 2 and msg[0] == HELLO and isinstance(msg[1], dict)):
            log.warning("connection from %s did not start with a handshake; closed", p.peer)
            self._refuse(p, Err.INVALID_VALUE, "the first frame must be a gpushim HELLO")
            return
        hello = msg[1]
        refusal = self._check_hello(hello)
        if refusal:
            log.warning("refused %s (pid %s): %s", hello.get("program"), hello.get("pid"), refusal[1])
            self._refuse(p, *refusal)
            return
        devices = self._devices_for(str(hello.get("devices") or ""))
        if isinstance(devices, str):
            self._refuse(p, Err.INVALID_DEVICE, devices)
            return
        runtime = int(hello.get("runtime") or 0)
        policy = build_policy(runtime or self.backend.driver_version(), self.backend.driver_version(),
                              [(self.backend.devices()[d].props["major"], self.backend.devices()[d].props["minor"])
                               for d in devices])
        verdict = policy.session_verdict()
        if not verdict.ok:
            log.warning("refused %s (pid %s): %s", hello.get("program"), hello.get("pid"), verdict.reason)
            self._refuse(p, verdict.error, verdict.reason)
            return
        info = SessionInfo(
            session_id=self.next_session,
            pid=int(hello.get("pid") or 0),
            program=str(hello.get("program") or "?")[:200],
            runtime=int(hello.get("runtime") or 0),
            priority=max(-19, min(int(hello.get("priority") or 0), self.max_priority)),
            devices=devices,
            memory_quota=self.memory_quota,
            policy=policy,
            transport=self.kind,
        )
        self.next_session += 1
        info.sched_slot = self.arbiter.open_slot(info.session_id, 0, info.priority)
        p.sock.setblocking(True)
        welcome = {"proto": PROTOCOL_VERSION, "session": info.session_id, "error": 0, "message": "",
                   "driver": self.backend.driver_version(), "devices": len(devices),
                   "server": f"gpushim {__version__}", "backend": self.backend.name,
                   # the device addresses this server hands out (GPUSHIM_SERVER=a,b routes pointers by them)
                   "arena": list(self.backend.arena()) if hasattr(self.backend, "arena") else None}
        try:
            p.sock.sendall(pack([HELLO, welcome]))
        except OSError:
            p.sock.close()
            self.arbiter.close_slot(info.sched_slot)
            return
        self._fork_worker(p.sock, info, leftover)

    def _check_hello(self, hello: dict[str, Any]) -> tuple[int, str] | None:
        if hello.get("proto") != PROTOCOL_VERSION:
            return (Err.INSUFFICIENT_DRIVER,
                    f"protocol version {hello.get('proto')} is not this server's {PROTOCOL_VERSION}; "
                    "use the same gpushim version on both sides")
        if not self._token_ok(hello.get("token")):
            return Err.NOT_PERMITTED, "wrong or missing token (set GPUSHIM_TOKEN or GPUSHIM_TOKEN_FILE)"
        if len(self.workers) >= self.max_sessions:
            return Err.DEVICES_UNAVAILABLE, f"the server is full ({self.max_sessions} sessions)"
        return None

    def _token_ok(self, given: object) -> bool:
        """Constant-time comparison with the server's token; always true when the server has none."""
        if self.token is None:
            return True
        return hmac.compare_digest(str(given or "").encode(), self.token.encode())

    def _devices_for(self, spec: str) -> list[int] | str:
        n = len(self.backend.devices())
        if not spec.strip():  # no device named: the placement policy orders them (least loaded first)
            return order_devices(self.backend, self.arbiter, self._primaries())
        out: list[int] = []
        for part in spec.split(","):
            part = part.strip()
            match = [d.ordinal for d in self.backend.devices() if part in (str(d.ordinal), d.uuid.hex(),
                     f"GPU-{d.uuid.hex()}")]
            if not match:
                return f"GPUSHIM_DEVICES names '{part}', but this server has devices 0..{n - 1}"
            if match[0] in out:
                return f"GPUSHIM_DEVICES names device {match[0]} twice"
            out.append(match[0])
        return out

    def _primaries(self) -> dict[int, int]:
        """Live sessions per device they were placed on first."""
        out: dict[int, int] = {}
        for w in self.workers.values():
            if w.info.devices:
                out[w.info.devices[0]] = out.get(w.info.devices[0], 0) + 1
        return out

    def _refuse(self, p: Pending, code: int, message: str) -> None:
        try:
            p.sock.setblocking(True)
            p.sock.sendall(pack([HELLO, {"proto": PROTOCOL_VERSION, "error": int(code), "message": message}]))
        except OSError:
            pass
        p.sock.close()

    # -- workers -----------------------------------------------------------------------------------------
    def _fork_worker(self, conn: socket.socket, info: SessionInfo, leftover: bytes) -> None:
        parent_ctl, child_ctl = socket.socketpair()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the supervisor, which stops us
                self.listener.close()
                parent_ctl.close()
                for p in self.pending.values():
                    p.sock.close()
                for w in self.workers.values():
                    w.control.close()
                code = run_worker(conn, child_ctl, self.backend, info, leftover, self.store, self.arbiter)
            except BaseException:
                logging.getLogger("gpushim.worker").exception("worker crashed")
            finally:
                logging.shutdown()
                os._exit(code)
        child_ctl.close()
        conn.close()
        self.workers[pid] = Worker(pid, parent_ctl, info)
        log.info("session %d: %s (pid %d, CUDA %d) -> worker %d", info.session_id, info.program, info.pid,
                 info.runtime, pid)

    def _reap(self) -> None:
        while self.workers:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            w = self.workers.pop(pid, None)
            if w is not None:
                w.control.close()
                self.arbiter.close_slot(w.info.sched_slot)
                code = os.waitstatus_to_exitcode(status)
                how = "ended" if code == 0 else f"ended with status {code}"
                log.info("session %d (%s) %s; its resources are freed", w.info.session_id, w.info.program, how)

    def status(self) -> dict[str, Any]:
        self._reap()
        sessions = []
        for w in list(self.workers.values()):
            entry: dict[str, Any] = {"session": w.info.session_id, "program": w.info.program, "pid": w.info.pid,
                                     "worker": w.pid, "runtime": w.info.runtime}
            try:
                w.control.settimeout(2.0)
                w.control.sendall(b"s")
                line = b""
                while not line.endswith(b"\n"):
                    chunk = w.control.recv(65536)
                    if not chunk:
                        break
                    line += chunk
                entry.update(json.loads(line))
            except (OSError, ValueError):
                entry["state"] = "busy (did not answer within 2 s)"
            sessions.append(entry)
        return {
            "server": f"gpushim {__version__}",
            "address": self.address,
            "backend": self.backend.describe(),
            "driver": self.backend.driver_version(),
            "devices": [{"ordinal": d.ordinal, "name": d.name, "pci_bus_id": d.pci_bus_id, "uuid": d.uuid.hex(),
                         "memory": d.props.get("totalGlobalMem"), "cc": f"{d.props['major']}.{d.props['minor']}"}
                        for d in self.backend.devices()],
            "sessions": sessions,
            "scheduler": self._scheduler_view(sessions),
            "placement": placement_inputs(self.backend, self.arbiter, self._primaries()),
        }

    def _scheduler_view(self, sessions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Per device, each session's priority, share of device time and queued work (with its program)."""
        programs = {s["session"]: s.get("program") for s in sessions}
        view = self.arbiter.snapshot()
        for dev in view:
            for s in dev["sessions"]:
                s["program"] = programs.get(s["session"], "?")
        return view

    def shutdown(self) -> None:
        try:
            self.listener.close()
        except OSError:
            pass
        if self.kind == "unix":
            try:
                os.unlink(self.addr)
            except FileNotFoundError:
                pass
        for p in self.pending.values():
            p.sock.close()
        self.pending.clear()
        for w in self.workers.values():
            try:
                os.kill(w.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3
        while self.workers and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.05)
        for w in self.workers.values():
            try:
                os.kill(w.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._reap()
        log.info("server stopped")


def pack_frame(body: memoryview) -> bytes:
    return len(body).to_bytes(4, "little") + bytes(body)
