"""The supervisor: listens, admits clients after their handshake and forks one worker process per
session (DESIGN decision 7). It never initialises CUDA, so forking it is safe, and it is single-threaded.
It answers STATUS requests by asking each worker over a control socket.

Nothing a peer sends may end it (issue 11): first frames are validated (gpushim/server/validate.py),
connections are watched with epoll (no descriptor ceiling below the process's limit, which is raised to
the hard limit), a connection before its handshake holds at most one small frame for a few seconds, the
number of such connections is capped, answers are sent without blocking, and an unexpected exception
while serving one connection is logged and costs only that connection. Over TLS (tls://) the handshake
runs here, non-blocking, before the first frame; the worker inherits the TLS connection."""

from __future__ import annotations

import errno
import hmac
import json
import logging
import os
import resource
import selectors
import signal
import socket
import ssl
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpushim import __version__
from gpushim.backends.base import Backend
from gpushim.compat.policy import build_policy
from gpushim.cuda_errors import Err
from gpushim.protocol import HELLO, MAX_FIRST_FRAME, PROTOCOL_VERSION, STATUS
from gpushim.server.modules import ModuleLimits, ModuleStore, default_module_cache
from gpushim.server.placement import inputs as placement_inputs
from gpushim.server.placement import order_devices
from gpushim.server.scheduler import DeviceArbiter, SchedConfig
from gpushim.server.session import SessionInfo
from gpushim.server.validate import check_hello, check_status, first_frame_kind
from gpushim.server.worker import run_worker
from gpushim.wire import FrameError, pack, unpack_body

HANDSHAKE_TIMEOUT_S = 5.0  # a connection must complete its first frame (and TLS handshake) within this
MAX_PENDING = 256  # default cap on connections waiting for their first frame; beyond it the oldest is dropped
# what STATUS leaves out for a peer that is not the server's user
REDACTED = ("pid", "worker", "program", "nice")
PEER_LOG_BURST, PEER_LOG_WINDOW_S = 100, 10.0  # lines about misbehaving peers, at most this many per window
STATUS_TIMEOUT_S = 2.0  # a status request waits at most this long for the workers' summaries, in all
REPLY_TIMEOUT_S = 5.0  # a STATUS answer or a refusal that the peer does not read is abandoned after this
log = logging.getLogger("gpushim.server")


class ServeError(Exception):
    """The server cannot start (address in use, bad address, missing token)."""


@dataclass
class Pending:
    """A connection before its first frame (or after it, while an answer drains)."""
    sock: socket.socket
    peer: str
    owner: bool = False  # a Unix peer running as the server's user (or root): sees full status detail
    buf: bytearray = field(default_factory=bytearray)
    deadline: float = field(default_factory=lambda: time.monotonic() + HANDSHAKE_TIMEOUT_S)
    tls_done: bool = True  # False until a TLS connection's handshake completed
    out: bytes = b""  # an answer being sent before the connection is closed
    events: int = selectors.EVENT_READ


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
    for scheme in ("tcp", "tls"):
        if url.startswith(f"{scheme}://"):
            hostport = url[len(scheme) + 3:]
            host, _, port = hostport.rpartition(":")
            if not host or not port.isdigit():
                raise ServeError(f"a {scheme.upper()} address needs host and port: {scheme}://HOST:PORT, not {url}")
            return scheme, (host.strip("[]"), int(port))
    raise ServeError(f"listen address must be unix:///path, tcp://host:port or tls://host:port, not '{url}'")


def is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def raise_fd_limit() -> int:
    """Every connection and worker costs descriptors: use all the process may have (soft limit to hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, hard, e)
    return soft


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of a Unix socket's peer process (SO_PEERCRED), or None."""
    try:
        _, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        return uid
    except OSError:
        return None


class Supervisor:
    def __init__(self, backend: Backend, listen: str, token: str | None = None,
                 memory_quota: int | None = None, max_sessions: int = 64, module_cache: Path | None = None,
                 max_priority: int = 0, module_limits: ModuleLimits | None = None,
                 insecure_no_token: bool = False, tls_cert: str | None = None,
                 tls_key: str | None = None, socket_mode: int = 0o600, max_pending: int = MAX_PENDING,
                 sched: SchedConfig | None = None) -> None:
        self.backend = backend
        # created before any worker is forked: every worker inherits the shared table
        self.arbiter = DeviceArbiter(len(backend.devices()), max_sessions, sched or SchedConfig())
        self.max_priority = max_priority
        self.store = ModuleStore(module_cache or default_module_cache(), module_limits)
        self.listen_url = listen
        self.kind, self.addr = parse_listen(listen)
        self.socket_mode = socket_mode
        self.max_pending = max_pending
        if self.kind != "unix" and not token:
            if not is_loopback(self.addr[0]):
                raise ServeError(f"listening on {self.addr[0]} (not loopback) requires --token-file: anyone who "
                                 "can reach the port could otherwise use the GPUs")
            if not insecure_no_token:
                raise ServeError(f"listening on {self.kind}://{self.addr[0]} requires --token-file: any local user "
                                 "could otherwise use the GPUs (--insecure-no-token allows it on loopback, for "
                                 "development)")
        if self.kind == "tcp" and token and not is_loopback(self.addr[0]):
            log.warning("the token crosses the network in clear over tcp://; use tls:// with --tls-cert/--tls-key")
        self.tls = self._tls_context(tls_cert, tls_key)
        self.token = token
        self.memory_quota = memory_quota
        self.max_sessions = max_sessions
        self.pending: dict[int, Pending] = {}
        self.workers: dict[int, Worker] = {}
        self.next_session = 1
        self.stopping = False
        self.dropped = 0  # connections dropped because too many waited for a handshake (logged in batches)
        self.dropped_logged = 0.0
        self.peer_log_window, self.peer_log_count, self.peer_log_suppressed = 0.0, 0, 0
        self.fd_limit = raise_fd_limit()
        self.listener = self._bind()
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ)

    def _tls_context(self, cert: str | None, key: str | None) -> ssl.SSLContext | None:
        if self.kind != "tls":
            if cert or key:
                raise ServeError("--tls-cert/--tls-key need a tls://host:port listen address")
            return None
        if not cert:
            raise ServeError("a tls:// address needs --tls-cert (and --tls-key unless the key is in that file)")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.options |= getattr(ssl, "OP_IGNORE_UNEXPECTED_EOF", 0)  # a client that exits is not an error
        try:
            ctx.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as e:
            raise ServeError(f"cannot load the TLS certificate {cert} / key {key}: {e}") from None
        return ctx

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
            # 0600 by default: only its owner may use the GPUs through it (docs/security.md)
            os.chmod(path, self.socket_mode)
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
        # connections the kernel holds until they are accepted (it caps this at net.core.somaxconn): a burst
        # while the supervisor is busy or not scheduled waits there; a client that cannot wait (a non-blocking
        # connect to a full unix socket's queue: EAGAIN) is refused
        s.listen(4096)
        s.setblocking(False)
        return s

    @property
    def address(self) -> str:
        if self.kind == "unix":
            return f"unix://{self.addr}"
        host, port = self.listener.getsockname()[:2]
        return f"{self.kind}://{host}:{port}"

    # -- main loop ---------------------------------------------------------------------------------------
    def serve_forever(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        log.info("%s", self.backend.describe())
        log.info("gpushim %s listening on %s", __version__, self.address)
        # after "listening": clients start meanwhile, and their connections wait in the listen queue
        self.backend.preload()
        try:
            while not self.stopping:
                self._reap()
                for key, mask in self.sel.select(0.5):
                    if key.fileobj is self.listener:
                        self._guarded(None, self._accept)
                    else:
                        p = self.pending.get(key.fd)
                        if p is not None:
                            self._guarded(p, self._on_event, p, mask)
                self._expire_pending()
        finally:
            self.shutdown()

    def _guarded(self, p: Pending | None, fn: Any, *args: Any) -> None:
        """Nothing a peer sends may end the supervisor: an unexpected exception here is a bug in it, logged
        with its traceback, and costs only the connection being served."""
        try:
            fn(*args)
        except Exception:
            log.exception("internal error serving %s; that connection is closed", p.peer if p else "the listener")
            if p is not None:
                self._drop(p)

    def _peer_log(self, level: int, msg: str, *args: Any) -> None:
        """What misbehaving peers cause, logged at most PEER_LOG_BURST times per PEER_LOG_WINDOW_S: a flood of
        bad connections must not fill the disk with log lines."""
        now = time.monotonic()
        if now - self.peer_log_window >= PEER_LOG_WINDOW_S:
            if self.peer_log_suppressed:
                log.warning("%d more messages about connections that broke the protocol were not logged",
                            self.peer_log_suppressed)
            self.peer_log_window, self.peer_log_count, self.peer_log_suppressed = now, 0, 0
        self.peer_log_count += 1
        if self.peer_log_count <= PEER_LOG_BURST:
            log.log(level, msg, *args)
        else:
            self.peer_log_suppressed += 1

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def _accept(self) -> None:
        for _ in range(64):  # a burst of connections, without starving the others
            try:
                sock, peer = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM) and self.pending:
                    self._peer_log(logging.WARNING, "out of file descriptors (limit %d): dropping the oldest "
                                   "unauthenticated connection", self.fd_limit)
                    self._drop(next(iter(self.pending.values())))
                    continue
                log.warning("accept failed: %s", e)
                return
            if len(self.pending) >= self.max_pending:
                self._shed(next(iter(self.pending.values())))
            try:
                self._admit(sock, str(peer) or "a local process")
            except Exception:
                sock.close()  # not left open behind the guard's back
                raise

    def _admit(self, sock: socket.socket, peer: str) -> None:
        """A new connection joins the pending table, to send its first frame."""
        sock.setblocking(False)
        p = Pending(sock, peer)
        if self.kind == "unix":
            uid = peer_uid(sock)
            p.owner = uid in (os.getuid(), 0)
            p.peer = f"a local process of uid {uid}"
        if self.tls is not None:
            p.sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            p.tls_done = False
        self.sel.register(p.sock, selectors.EVENT_READ)
        self.pending[p.sock.fileno()] = p

    def _shed(self, p: Pending) -> None:
        """Drops the oldest connection still waiting for its handshake, telling it why."""
        self.dropped += 1
        if time.monotonic() - self.dropped_logged > 5:
            log.warning("more than %d connections are waiting for a handshake: dropped the oldest (%d so far)",
                        self.max_pending, self.dropped)
            self.dropped_logged = time.monotonic()
        if p.tls_done and not p.out:
            try:
                p.sock.send(pack([HELLO, {"proto": PROTOCOL_VERSION, "error": int(Err.DEVICES_UNAVAILABLE),
                                          "message": f"the server has more than {self.max_pending} connections waiting "
                                                     "for a handshake; try again"}]))
            except OSError:
                pass
        self._drop(p)

    def _expire_pending(self) -> None:
        now = time.monotonic()
        for p in list(self.pending.values()):
            if now > p.deadline:
                if not p.out:
                    self._peer_log(logging.INFO, "closing a connection from %s that sent no handshake in %.0f s",
                                   p.peer, HANDSHAKE_TIMEOUT_S)
                self._drop(p)

    def _set_events(self, p: Pending, events: int) -> None:
        if events != p.events:
            self.sel.modify(p.sock, events)
            p.events = events

    def _on_event(self, p: Pending, mask: int) -> None:
        if p.out:
            self._flush(p)
            return
        if not p.tls_done:
            assert isinstance(p.sock, ssl.SSLSocket)
            try:
                p.sock.do_handshake()
            except ssl.SSLWantReadError:
                self._set_events(p, selectors.EVENT_READ)
                return
            except ssl.SSLWantWriteError:
                self._set_events(p, selectors.EVENT_WRITE)
                return
            except (ssl.SSLError, OSError) as e:
                self._peer_log(logging.INFO, "TLS handshake with %s failed: %s", p.peer, e)
                self._drop(p)
                return
            p.tls_done = True
            self._set_events(p, selectors.EVENT_READ)
        self._read_pending(p)

    def _read_pending(self, p: Pending) -> None:
        while True:
            room = 4 + MAX_FIRST_FRAME - len(p.buf)  # never more than one first frame is buffered
            try:
                data = p.sock.recv(max(room, 1))
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                return
            except ssl.SSLWantWriteError:
                self._set_events(p, selectors.EVENT_WRITE)
                return
            except OSError:
                data = b""
            if not data:
                self._drop(p)
                return
            p.buf += data
            if len(p.buf) >= 4:
                (n,) = struct.unpack_from("<I", p.buf)
                if n > MAX_FIRST_FRAME:
                    self._peer_log(logging.WARNING, "%s announced a first frame of %d bytes (the limit before a "
                                   "handshake is %d); closed", p.peer, n, MAX_FIRST_FRAME)
                    self._answer(p, [HELLO, self._refusal(Err.INVALID_VALUE,
                                 f"malformed frame: a first frame of {n} bytes exceeds the {MAX_FIRST_FRAME}-byte "
                                 "limit before a handshake")])
                    return
                if len(p.buf) >= 4 + n:
                    body, leftover = bytes(p.buf[4:4 + n]), bytes(p.buf[4 + n:])
                    p.buf.clear()
                    self._first_frame(p, body, leftover)
                    return
            if not (isinstance(p.sock, ssl.SSLSocket) and p.sock.pending()):
                return  # wait for more (TLS may hold decrypted bytes the selector does not see)

    def _answer(self, p: Pending, msg: list[Any]) -> None:
        """Sends msg without blocking the supervisor, then closes the connection."""
        p.out = pack(msg)
        p.deadline = time.monotonic() + REPLY_TIMEOUT_S
        self._flush(p)

    def _flush(self, p: Pending) -> None:
        try:
            while p.out:
                n = p.sock.send(p.out)
                p.out = p.out[n:]
        except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError):
            self._set_events(p, selectors.EVENT_WRITE)
            return
        except ssl.SSLWantReadError:
            self._set_events(p, selectors.EVENT_READ)
            return
        except OSError:  # the peer left without reading its answer (EPIPE, ECONNRESET): nothing to do
            pass
        self._drop(p)

    def _drop(self, p: Pending) -> None:
        if self.pending.get(p.sock.fileno()) is p:
            del self.pending[p.sock.fileno()]
            try:
                self.sel.unregister(p.sock)
            except (KeyError, ValueError):
                pass
        p.sock.close()

    def _detach(self, p: Pending) -> None:
        """Takes a connection out of the pending table (it becomes a session)."""
        del self.pending[p.sock.fileno()]
        self.sel.unregister(p.sock)

    @staticmethod
    def _refusal(code: int, message: str) -> dict[str, Any]:
        return {"proto": PROTOCOL_VERSION, "error": int(code), "message": message}

    def _refuse(self, p: Pending, code: int, message: str) -> None:
        self._answer(p, [HELLO, self._refusal(code, message)])

    def _first_frame(self, p: Pending, body: bytes, leftover: bytes) -> None:
        try:
            msg = unpack_body(body)
        except FrameError as e:
            self._peer_log(logging.WARNING, "malformed handshake from %s: %s", p.peer, e)
            self._refuse(p, Err.INVALID_VALUE, f"malformed frame: {e}")
            return
        kind = first_frame_kind(msg)
        if isinstance(kind, str):
            self._peer_log(logging.WARNING, "connection from %s did not start with a handshake; closed", p.peer)
            self._refuse(p, Err.INVALID_VALUE, f"malformed frame: {kind}")
            return
        if kind == STATUS:
            self._answer_status(p, msg[1])
            return
        hello = check_hello(msg[1])
        if isinstance(hello, str):
            self._peer_log(logging.WARNING, "malformed handshake from %s: %s", p.peer, hello)
            self._refuse(p, Err.INVALID_VALUE, f"malformed handshake: {hello}")
            return
        refusal = self._check_hello(hello)
        if refusal:
            self._peer_log(logging.WARNING, "refused %s (pid %s): %s", hello["program"], hello["pid"], refusal[1])
            self._refuse(p, *refusal)
            return
        devices = self._devices_for(hello["devices"])
        if isinstance(devices, str):
            self._refuse(p, Err.INVALID_DEVICE, devices)
            return
        runtime = hello["runtime"]
        policy = build_policy(runtime or self.backend.driver_version(), self.backend.driver_version(),
                              [(self.backend.devices()[d].props["major"], self.backend.devices()[d].props["minor"])
                               for d in devices])
        verdict = policy.session_verdict()
        if not verdict.ok:
            log.warning("refused %s (pid %s): %s", hello["program"], hello["pid"], verdict.reason)
            self._refuse(p, verdict.error, verdict.reason)
            return
        info = SessionInfo(
            session_id=self.next_session,
            pid=hello["pid"],
            program=hello["program"][:200],
            runtime=runtime,
            priority=max(-19, min(hello["priority"], self.max_priority)),
            devices=devices,
            memory_quota=self.memory_quota,
            policy=policy,
            transport="unix" if self.kind == "unix" else "tcp",
        )
        self.next_session += 1
        info.sched_slot = self.arbiter.open_slot(info.session_id, 0, info.priority)
        welcome = {"proto": PROTOCOL_VERSION, "session": info.session_id, "error": 0, "message": "",
                   "driver": self.backend.driver_version(), "devices": len(devices),
                   "server": f"gpushim {__version__}", "backend": self.backend.name,
                   # the device addresses this server hands out (GPUSHIM_SERVER=a,b routes pointers by them)
                   "arena": list(self.backend.arena()) if hasattr(self.backend, "arena") else None}
        self._detach(p)
        try:
            p.sock.settimeout(REPLY_TIMEOUT_S)  # a fresh connection's buffer takes it at once
            p.sock.sendall(pack([HELLO, welcome]))
            p.sock.settimeout(None)
        except OSError:
            p.sock.close()
            self.arbiter.close_slot(info.sched_slot)
            return
        self._fork_worker(p.sock, info, leftover)

    def _answer_status(self, p: Pending, body: Any) -> None:
        req = check_status(body)
        if isinstance(req, str):
            self._answer(p, [STATUS, {"error": int(Err.INVALID_VALUE), "message": f"malformed frame: {req}"}])
        elif not self._token_ok(req.get("token")):
            self._answer(p, [STATUS, {"error": int(Err.NOT_PERMITTED), "message": "wrong or missing token"}])
        else:
            self._answer(p, [STATUS, self.status(full=p.owner)])

    def _check_hello(self, hello: dict[str, Any]) -> tuple[int, str] | None:
        if hello["proto"] != PROTOCOL_VERSION:
            return (Err.INSUFFICIENT_DRIVER,
                    f"protocol version {hello['proto']} is not this server's {PROTOCOL_VERSION}; "
                    "use the same gpushim version on both sides")
        if not self._token_ok(hello["token"]):
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

    # -- workers -----------------------------------------------------------------------------------------
    def _fork_worker(self, conn: socket.socket, info: SessionInfo, leftover: bytes) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            parent_ctl, child_ctl = socket.socketpair()
        except OSError as e:
            log.error("cannot start a worker for session %d: %s", info.session_id, e)
            conn.close()
            self.arbiter.close_slot(info.sched_slot)
            return
        try:
            pid = os.fork()
        except OSError as e:
            log.error("cannot start a worker for session %d: %s", info.session_id, e)
            for s in (conn, parent_ctl, child_ctl):
                s.close()
            self.arbiter.close_slot(info.sched_slot)
            return
        if pid == 0:  # the worker
            code = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the supervisor, which stops us
                self.sel.close()
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

    def _ask_workers(self, timeout: float) -> dict[int, dict[str, Any]]:
        """Each worker's summary, asked of all at once: a status request costs at most timeout in all,
        however many workers are busy."""
        asked: dict[socket.socket, tuple[Worker, bytearray]] = {}
        sel = selectors.DefaultSelector()
        for w in self.workers.values():
            try:
                w.control.setblocking(False)
                while w.control.recv(65536):  # a late answer to an earlier request is stale now
                    pass
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                continue
            try:
                w.control.send(b"s")
            except OSError:
                continue
            asked[w.control] = (w, bytearray())
            sel.register(w.control, selectors.EVENT_READ)
        out: dict[int, dict[str, Any]] = {}
        deadline = time.monotonic() + timeout
        try:
            while asked and (left := deadline - time.monotonic()) > 0:
                for key, _ in sel.select(left):
                    w, line = asked[key.fileobj]  # type: ignore[index]
                    try:
                        chunk = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        chunk = b""
                    line += chunk
                    if chunk and not line.endswith(b"\n"):
                        continue
                    del asked[key.fileobj]  # type: ignore[arg-type]
                    sel.unregister(key.fileobj)
                    try:
                        out[w.pid] = json.loads(line)
                    except ValueError:
                        pass
        finally:
            sel.close()
        return out

    def status(self, full: bool = True) -> dict[str, Any]:
        """The server's devices and sessions. Without full (a peer that is not the server's user), no
        process ids or program names: those are not for other users (docs/security.md)."""
        self._reap()
        summaries = self._ask_workers(STATUS_TIMEOUT_S)
        sessions = []
        for w in list(self.workers.values()):
            entry: dict[str, Any] = {"session": w.info.session_id, "program": w.info.program, "pid": w.info.pid,
                                     "worker": w.pid, "runtime": w.info.runtime}
            entry.update(summaries.get(w.pid) or {"state": f"busy (did not answer within {STATUS_TIMEOUT_S:.0f} s)"})
            if not full:
                for key in REDACTED:
                    entry.pop(key, None)
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

