"""A protocol fuzzer against a real `gpushim serve`, over a Unix socket, TCP and TLS: random and mutated
frames before and after the handshake. The supervisor must survive, a session running meanwhile must not
notice, and nothing may be logged as an internal error or with a traceback (issue 11).

Seeded and bounded in time: GPUSHIM_FUZZ_SECONDS (default 21, split between the transports) and
GPUSHIM_FUZZ_SEED (default 11); `make fuzz` runs it for 10 minutes. Operations with in-range random
arguments are fuzzed in-process by test_session_fuzz.py; here the frames are wrong in shape, type or range,
plus a few cheap valid calls, so that the test exercises validation and the supervisor, not emulator speed."""

from __future__ import annotations

import collections
import os
import random
import socket
import ssl
import struct
import time
from pathlib import Path
from typing import Any

import msgpack
from certs import make_certs
from conftest import connect, kv, recv

from gpushim.protocol import CALL, HELLO, HELLO_FIELDS, OPS, OPS_BY_NAME, POST, PROTOCOL_VERSION, STATUS, arg_spec

SECONDS = float(os.environ.get("GPUSHIM_FUZZ_SECONDS") or "21")
SEED = int(os.environ.get("GPUSHIM_FUZZ_SEED") or "11")
TOKEN = "fuzz-token"
CHEAP = [OPS_BY_NAME[n] for n in ("DEVICE_COUNT", "DRIVER_VERSION", "SESSION_INFO", "MEM_INFO", "STREAM_QUERY")]
BAD_LOG = ("Traceback", "internal error", "worker crashed")


def any_value(rng: random.Random, depth: int = 0) -> Any:
    """A random msgpack value: every type, sizes at the edges, some nesting."""
    k = rng.randrange(12 if depth < 3 else 8)
    if k == 0:
        return rng.choice([0, 1, -1, 2**31, 2**32, 2**63 - 1, -(2**63), 2**64 - 1, 10**15])
    if k == 1:
        return rng.randrange(-(2**70), 2**70) % (2**64) - rng.choice([0, 2**63])
    if k == 2:
        return rng.random() * rng.choice([1, 1e300, -1e-300])
    if k == 3:
        return rng.choice([True, False, None])
    if k == 4:
        return "".join(rng.choice("aé\x00\u20ac_Z9") for _ in range(rng.choice([0, 1, 10, 5000])))
    if k == 5:
        return rng.randbytes(rng.choice([0, 1, 32, 300]))
    if k in (6, 7):
        return rng.randrange(256)
    if k in (8, 9):
        return [any_value(rng, depth + 1) for _ in range(rng.choice([0, 1, 2, 4, 6]))]
    return {any_value(rng, 3) if rng.random() < 0.3 else rng.choice(list(HELLO_FIELDS) + ["x"]):
            any_value(rng, depth + 1) for _ in range(rng.choice([0, 1, 3, 40]))}


def body(value: Any) -> bytes:
    b = msgpack.packb(value, use_bin_type=True)
    return struct.pack("<I", len(b)) + b


def valid_hello() -> dict:
    return {"proto": PROTOCOL_VERSION, "runtime": 13000, "pid": os.getpid(), "program": "fuzz", "token": TOKEN,
            "devices": "", "priority": 0}


def mutate_map(rng: random.Random, m: dict) -> dict:
    m = dict(m)
    for _ in range(rng.randint(1, 3)):
        r = rng.random()
        if r < 0.5 and m:
            m[rng.choice(list(m))] = any_value(rng)
        elif r < 0.7 and m:
            del m[rng.choice(list(m))]
        else:
            m[any_value(rng, 3) if rng.random() < 0.5 else "extra"] = any_value(rng)
    return m


def first_frame(rng: random.Random) -> bytes:
    r = rng.random()
    if r < 0.15:
        return rng.randbytes(rng.randrange(1, 200))
    if r < 0.25:
        return struct.pack("<I", rng.choice([2**32 - 1, 1 << 30, 65537, 70000])) + rng.randbytes(rng.randrange(300))
    if r < 0.45:
        return body(any_value(rng))
    if r < 0.75:
        return body([HELLO, mutate_map(rng, valid_hello())])
    if r < 0.85:
        return body([STATUS, mutate_map(rng, {"token": TOKEN})])
    return body([rng.choice([HELLO, STATUS, CALL, 9, -1]), any_value(rng)])


def bad_call(rng: random.Random, seq: int) -> bytes:
    """A frame after the handshake: mostly malformed (shape, type, range), sometimes a cheap valid call."""
    r = rng.random()
    op = rng.choice(OPS)
    args = [0 if arg_spec(op, a).type is int else arg_spec(op, a).type() for a in op.args]
    if r < 0.1:
        good = rng.choice(CHEAP)
        return body([CALL, seq, good.id, [0] * len(good.args)])
    if r < 0.3 and args:
        i = rng.randrange(len(args))
        f = arg_spec(op, op.args[i])
        outside = [v for v in (f.lo - 1, f.hi + 1) if -(2**63) <= v < 2**64] if f.type is int else []
        args[i] = rng.choice([any_value(rng), *outside])
        return body([rng.choice([CALL, POST]), seq, op.id, args])
    if r < 0.45:
        return body([CALL, seq, op.id, args + [0]])
    if r < 0.6:
        return body([rng.choice([CALL, POST, 2, 4, 5, 6, 7]), any_value(rng), any_value(rng), any_value(rng)])
    if r < 0.7:
        return body([CALL, seq, rng.choice([0, 99, 1000, -5, 2**64 - 1, "MALLOC"]), args])
    if r < 0.85:
        return body(any_value(rng))
    return rng.randbytes(rng.randrange(1, 100))


def open_connection(rng: random.Random, url: str, ca: Path | None, trail: collections.deque) -> socket.socket:
    """A connection; to a tls:// server mostly with TLS, sometimes raw bytes that are not TLS at all."""
    if not url.startswith("tls://"):
        return connect(url, timeout=5)
    host, _, port = url[6:].rpartition(":")
    s = socket.create_connection((host, int(port)), timeout=5)
    if rng.random() < 0.15:
        garbage = rng.randbytes(rng.randrange(1, 300))
        trail.append(("tls-raw", garbage[:120]))
        try:
            s.sendall(garbage)
            s.settimeout(5)
            while s.recv(4096):  # the server ends the TLS handshake (perhaps with an alert), then closes
                pass
        finally:
            s.close()
        raise ConnectionAbortedError  # nothing more on this connection
    return ssl.create_default_context(cafile=str(ca)).wrap_socket(s, server_hostname=host)


def one_connection(rng: random.Random, url: str, trail: collections.deque, ca: Path | None = None) -> None:
    try:
        s = open_connection(rng, url, ca, trail)
    except (OSError, TimeoutError):
        return  # a refused TLS handshake (after raw garbage) is the server doing its job
    try:
        if rng.random() < 0.4:
            frame = first_frame(rng)
            trail.append(("pre", frame[:120]))
            s.sendall(frame)
        else:
            s.sendall(body([HELLO, valid_hello()]))
            welcome = recv(s)
            assert welcome is not None and welcome[0] == HELLO, welcome
            if welcome[1].get("error"):
                return  # e.g. the server is full of sessions still ending: a clear refusal is fine
            for seq in range(1, rng.randint(2, 6)):
                frame = bad_call(rng, seq)
                trail.append(("post", frame[:120]))
                s.sendall(frame)
        if rng.random() < 0.3:  # leave without reading, with a reset
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return
        if isinstance(s, ssl.SSLSocket):
            s.settimeout(0.5)  # TLS has no half-close: take the answers that come soon, then leave
        else:
            s.shutdown(socket.SHUT_WR)  # no more frames: the server answers what it has, then closes
            s.settimeout(2)
        for _ in range(8):  # read the answers until the server closes
            if recv(s) is None:
                break
    except (OSError, TimeoutError):
        pass  # the server may close first (a malformed frame); that is the point
    finally:
        s.close()


def fuzz(url: str, server, seconds: float, rng: random.Random, ca: Path | None = None) -> int:
    trail: collections.deque = collections.deque(maxlen=20)
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        one_connection(rng, url, trail, ca)
        n += 1
        assert server.proc.poll() is None, f"the server died (seed {SEED}, connection {n}); last frames: {trail}"
    return n


def test_the_server_survives_a_protocol_fuzzer(make_server, tmp_path):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    rng = random.Random(SEED)
    counts = {}
    certs = make_certs(tmp_path / "pki")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        tls_port = probe.getsockname()[1]
    transports = [([], None), ([], "tcp://127.0.0.1:0"),
                  (["--tls-cert", str(certs.cert), "--tls-key", str(certs.key)], f"tls://127.0.0.1:{tls_port}")]
    share = SECONDS / len(transports)
    for extra, listen in transports:
        srv = make_server("--token-file", str(token), *extra, listen=listen)
        # a well-behaved session holds memory through the whole fuzzing (until the stop file, however long)
        stop = tmp_path / f"stop-{len(counts)}"
        held = srv.start("hold", "4", "7", "600", str(stop), GPUSHIM_TOKEN=TOKEN, GPUSHIM_TLS_CA=str(certs.ca))
        assert held.stdout.readline().startswith("ready")
        counts[srv.url.split(":")[0]] = fuzz(srv.url, srv, share, rng, certs.ca)
        stop.touch()
        out, err = held.communicate(timeout=120)
        assert held.returncode == 0 and "intact 7" in out, err  # it never noticed
        r = srv.run("device_query", GPUSHIM_TOKEN=TOKEN, GPUSHIM_TLS_CA=str(certs.ca))  # the server still serves
        assert r.returncode == 0 and kv(r.stdout)["count"] == "1", r.stderr
        log = srv.log.read_text()
        bad = [line for line in log.splitlines() if any(b in line for b in BAD_LOG)]
        assert not bad, f"seed {SEED}: {bad[:5]}"
        assert "malformed" in log  # the fuzzer did reach the validators
    print(f"fuzzed connections (seed {SEED}): {counts}")
    assert all(n > 10 for n in counts.values()), counts
