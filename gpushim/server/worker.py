"""A session's worker process: reads the client's frames, runs them through its Session, answers status
requests from the supervisor. It ends when the client disconnects (everything it held is freed with the
process) or breaks the protocol (the reason is logged and sent to the client).

A client that goes away while the worker is busy (a kernel of 2^31 blocks, a huge memset) must not leave
the worker running: a watcher thread waits for the socket's hang-up and, if the worker has not ended on its
own shortly after, ends the process (`os._exit`). Ending the process is the one cancellation that works
whatever the worker is doing (a PTX launch loop, a numpy fill, a pending wait): the kernel frees its memory,
memfds and sockets, the module store never holds partial files (uploads are unnamed until complete), and
the session's share of the host-RAM ledger is given back before exiting (or reclaimed as a dead process's).
"""

from __future__ import annotations

import json
import logging
import os
import select
import selectors
import socket
import ssl
import threading
from typing import Any

from gpushim.backends.base import Backend
from gpushim.cuda_errors import Err
from gpushim.protocol import FATAL, OPS_BY_NAME, REPLY
from gpushim.server import fastpath
from gpushim.server.modules import ModuleStore
from gpushim.server.scheduler import DeviceArbiter
from gpushim.server.session import ClientGone, ProtocolError, Session, SessionInfo
from gpushim.wire import FrameError, FrameReader, decode_bulk_call, pack, reply_with_bulk, unpack_body

BULK_INLINE = 64 << 10  # replies with more data than this are sent without copying it
H2D_OP = OPS_BY_NAME["MEMCPY_H2D"].id
BULK_DECODE_MIN = 4096  # smaller frames are not worth the in-place decoding
HANGUP_GRACE_S = 0.5  # after the client hangs up, how long the worker may take to end by itself
# how a client that went away shows up while sending to it (SSLError: a TLS client that left mid-send)
GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, ssl.SSLError)


def run_worker(conn: socket.socket, control: socket.socket, backend: Backend, info: SessionInfo,
               pending: bytes, store: ModuleStore, arbiter: DeviceArbiter | None = None) -> int:
    """Serves one session until it ends; returns the process exit status. With GPUSHIM_WORKER_PROFILE=DIR
    set, the session runs under cProfile and its statistics go to DIR/worker-PID.prof (bench/profile.py)."""
    where = os.environ.get("GPUSHIM_WORKER_PROFILE")
    if not where:
        return _run_worker(conn, control, backend, info, pending, store, arbiter)
    import cProfile

    prof = cProfile.Profile()
    try:
        return prof.runcall(_run_worker, conn, control, backend, info, pending, store, arbiter)
    finally:
        prof.dump_stats(os.path.join(where, f"worker-{os.getpid()}.prof"))


def _run_worker(conn: socket.socket, control: socket.socket, backend: Backend, info: SessionInfo,
                pending: bytes, store: ModuleStore, arbiter: DeviceArbiter | None = None) -> int:
    log = logging.getLogger(f"gpushim.session.{info.session_id}")
    conn.setblocking(True)
    _apply_priority(info.priority, log)

    sendall = conn.sendall

    def send(msg: list[Any]) -> None:
        results = msg[3] if msg[0] == REPLY else None
        try:
            if results and isinstance(results[-1], memoryview | bytes) and len(results[-1]) >= BULK_INLINE:
                _send_pieces(conn, reply_with_bulk(msg[1], results[:-1], results[-1], msg[4], msg[5]))
            else:
                sendall(pack(msg))
        except GONE as e:
            raise ClientGone(str(e)) from None

    try:
        session = Session(backend, info, send, log, store)
    except Exception as e:  # a backend that cannot open (no GPU left, CUDA init failure)
        log.error("could not open a backend session: %s", e)
        _send_quietly(conn, [FATAL, 0, Err.INITIALIZATION_ERROR, f"the server could not open a session: {e}"])
        return 1
    attach = getattr(session.bs, "attach_scheduler", None)
    if arbiter is not None and info.sched_slot >= 0:
        if attach is None and arbiter.config.policy != "off":
            log.warning("the %s backend does not take part in device scheduling: its sessions' work is not "
                        "arbitrated", backend.name)
        elif attach is not None:
            attach(arbiter, info.sched_slot)  # with --sched off: accounting only
    log.info("session started: pid %d, program %s, CUDA runtime %d, devices %s, priority %d",
             info.pid, info.program, info.runtime, info.devices, info.priority)
    finished = threading.Event()  # set when this thread ends the session itself
    _keepalive(conn)
    threading.Thread(target=_watch_client, args=(conn, session, finished, log), daemon=True,
                     name="client-watcher").start()
    frames = FrameReader(conn, pending)
    sel = selectors.DefaultSelector()
    sel.register(conn, selectors.EVENT_READ, "client")
    sel.register(control, selectors.EVENT_READ, "control")
    # Backends whose queued work completes on its own (cuda) are polled while replies wait: tick() says how
    # long select may sleep, and their wakeup_fd becomes readable when a stream reaches a host function.
    tick = getattr(session.bs, "tick", None)
    wakeup_fd = getattr(session.bs, "wakeup_fd", None)
    if wakeup_fd is not None:
        sel.register(wakeup_fd, selectors.EVENT_READ, "backend")
    status = 0
    try:
        if not _handle_frames(session, frames, conn, log):
            return 1
        if tick is None and wakeup_fd is None:
            # Nothing completes behind the worker's back (the emulator): block on the client's socket alone,
            # one receive per batch of frames, and answer the supervisor from a thread.
            sel.unregister(control)
            threading.Thread(target=_answer_status, args=(control, session, log), daemon=True).start()
            return _serve_client(session, frames, conn, log)
        while True:
            timeout = None
            if tick is not None:
                timeout = tick(bool(session.waiting))
                session.progress()
            for key, _ in sel.select(timeout):
                if key.data == "backend":
                    continue  # the next tick() delivers
                if key.data == "control":
                    req = control.recv(64)
                    if not req:
                        log.info("supervisor gone; ending session")
                        return 0
                    control.sendall(json.dumps(session.summary()).encode() + b"\n")
                    continue
                ended = _receive(session, frames, conn, log)
                if ended is not None:
                    return ended
    except (ClientGone, *GONE):
        log.info("client connection lost after %d calls; freeing its resources", session.total_calls())
    finally:
        finished.set()
        session.close()
        sel.close()
    return status


def _watch_client(conn: socket.socket, session: Session, finished: threading.Event, log: logging.Logger) -> None:
    """Ends the worker when its client hangs up and the worker does not end by itself (it was busy)."""
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLRDHUP)  # HUP and ERR are always reported
    while True:
        try:
            events = poller.poll()
        except InterruptedError:
            continue
        except (OSError, ValueError):
            return
        if events:
            break
    if finished.wait(HANGUP_GRACE_S):
        return  # the main thread saw the end and is tidying up
    log.info("client disconnected while the worker was busy (after %d calls); ending the worker", session.total_calls())
    try:
        session.bs.account.close()  # give the host-RAM ledger slot back now
    except Exception:  # noqa: BLE001 - the process ends either way; a dead process's slot is reclaimed
        pass
    for h in logging.getLogger().handlers:
        try:
            h.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(0)


def _keepalive(conn: socket.socket) -> None:
    """TCP: a client host that vanishes without a FIN is noticed within about a minute."""
    if conn.family not in (socket.AF_INET, socket.AF_INET6):
        return
    try:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 30)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 10)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
    except (OSError, AttributeError):
        pass


def _apply_priority(priority: int, log: logging.Logger) -> None:
    """A session's priority orders its work against other sessions' through the OS scheduler: each session
    is its own process, running at nice -priority (priority 0 -> nice 0, -5 -> 5; a positive priority, which
    the server must allow with --max-priority, needs the privilege to lower nice values)."""
    nice = max(-20, min(19, -priority))
    if nice == os.getpriority(os.PRIO_PROCESS, 0):
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError as e:
        log.warning("cannot set this session's scheduling priority to nice %d: %s", nice, e)


def _serve_client(session: Session, frames: FrameReader, conn: socket.socket, log: logging.Logger) -> int:
    why_not = fastpath.unavailable(session, conn)
    if why_not is None:  # the common calls answered in C (fastpath.py); the rest through _handle_frames below
        step = fastpath.FastPath(session, frames, conn, log, _handle_frames, _receive).step
    else:
        log.log(logging.WARNING if why_not == fastpath.not_built() else logging.DEBUG,
                "the C fast path is off: %s", why_not)

        def step() -> int | None:
            return _receive(session, frames, conn, log)
    while True:
        ended = step()
        if ended is not None:
            return ended


def _receive(session: Session, frames: FrameReader, conn: socket.socket, log: logging.Logger) -> int | None:
    """One receive from the client and the frames it completed; the worker's exit status when the session
    is over (the client left, or broke the protocol), else None."""
    try:
        nread, fds = frames.read()
    except (ConnectionResetError, TimeoutError):  # the client went away (or TCP keepalive gave up on it)
        nread, fds = 0, []
    except ssl.SSLError as e:  # a TLS client whose stream broke (or was tampered with): it is gone
        log.info("the client's TLS connection failed: %s", e)
        nread, fds = 0, []
    except FrameError as e:
        log.warning("malformed frame from the client; ending the session: %s", e)
        _send_quietly(conn, [FATAL, 0, Err.INVALID_VALUE, f"malformed frame: {e}"])
        return 1
    session.received_fds.extend(fds)
    if not nread:
        log.info("client disconnected after %d calls; freeing its resources (%d calls answered by the C fast "
                 "path)", session.total_calls(), session.fast_calls())
        return 0
    if not _handle_frames(session, frames, conn, log):
        return 1
    if isinstance(conn, ssl.SSLSocket) and conn.pending():  # decrypted bytes that select cannot see
        return _receive(session, frames, conn, log)
    return None


def _answer_status(control: socket.socket, session: Session, log: logging.Logger) -> None:
    """The supervisor's status requests, from a thread: the summary only reads the session's state."""
    while True:
        try:
            req = control.recv(64)
        except OSError:
            return
        if not req:
            log.info("supervisor gone; ending session")
            os._exit(0)
        for _ in range(3):
            try:
                summary = session.summary()
                break
            except RuntimeError:  # a table changed size while the main thread ran a call; read again
                continue
            except Exception:  # a bug: logged with its traceback, status still answered
                log.exception("internal error summarising the session for status")
                summary = {"state": "unknown (internal error)"}
                break
        else:
            summary = {"state": "busy"}
        try:
            control.sendall(json.dumps(summary).encode() + b"\n")
        except OSError:
            return


def _send_pieces(conn: socket.socket, pieces: list[bytes | memoryview]) -> None:
    views = [memoryview(p).cast("B") for p in pieces]
    if isinstance(conn, ssl.SSLSocket):  # TLS has no sendmsg: each piece on its own (still not copied)
        for v in views:
            conn.sendall(v)
        return
    while views:
        sent = conn.sendmsg(views)
        while views and sent >= len(views[0]):
            sent -= len(views[0])
            views.pop(0)
        if views and sent:
            views[0] = views[0][sent:]


def _handle_frames(session: Session, frames: FrameReader, conn: socket.socket, log: logging.Logger) -> bool:
    """Runs every complete frame of the last receive (a burst of posted calls is drained in one loop)."""
    dispatch = session.dispatch
    try:
        for body in frames.frames():
            if len(body) > BULK_DECODE_MIN:
                dispatch(decode_bulk_call(body, H2D_OP, 3) or unpack_body(body))
            else:
                dispatch(unpack_body(body))
    except (FrameError, ProtocolError) as e:
        log.warning("malformed frame from the client; ending the session: %s", e)
        _send_quietly(conn, [FATAL, 0, Err.INVALID_VALUE, f"malformed frame: {e}"])
        return False
    return True


def _send_quietly(conn: socket.socket, msg: list[Any]) -> None:
    try:
        conn.sendall(pack(msg))
    except OSError:
        pass
