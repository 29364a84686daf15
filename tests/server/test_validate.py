"""After the handshake every CALL/POST is checked against the protocol's schema before the session reads
it: a wrong type or a value out of range ends that session with FATAL and the reason, nothing else."""

from __future__ import annotations

import os

from conftest import connect, recv, send

from gpushim.protocol import CALL, FATAL, HELLO, OPS, OPS_BY_NAME, POST, PROTOCOL_VERSION, arg_spec
from gpushim.server.validate import check_call

OP = {name: op.id for name, op in OPS_BY_NAME.items()}
GOOD_LAUNCH = [0, b"h" * 32, "_Z1kv", [1, 1, 1], [32, 1, 1], 0, 0, b""]


CASES = [
    ([CALL, 1, OP["MALLOC"], [0, -1]], "MALLOC: argument size = -1 is out of range [0, 18446744073709551615]"),
    ([CALL, 1, OP["MALLOC"], [2**31, 64]], "MALLOC: argument dev = 2147483648 is out of range"),
    ([POST, 1, OP["MEMSET"], [0x3000_0000_0000, 2**40, 16, 0]], "MEMSET: argument value = 1099511627776 is out"),
    ([CALL, 1, OP["STREAM_CREATE"], [0, 2**32, 0]], "STREAM_CREATE: argument flags = 4294967296 is out of range"),
    ([CALL, 1, OP["LAUNCH"], GOOD_LAUNCH[:3] + [[1, 1], [1, 1, 1]] + GOOD_LAUNCH[5:]],
     "LAUNCH: argument grid has length 2"),
    ([CALL, 1, OP["LAUNCH"], GOOD_LAUNCH[:3] + [[1, 1, -1]] + GOOD_LAUNCH[4:]],
     "LAUNCH: argument grid must be a list of integers in [0, 4294967295]"),
    ([CALL, 1, OP["MODULE_QUERY"], [b"x" * 31]], "MODULE_QUERY: argument hash has length 31"),
    ([CALL, 1, OP["FUNC_INFO"], [0, b"h" * 32, ""]], "FUNC_INFO: argument name has length 0"),
    ([CALL, 1, OP["DEVICE_LIMIT"], [0, 0, 0, 2]], "DEVICE_LIMIT: argument set = 2 is out of range [0, 1]"),
    ([CALL, 1, OP["DEVICE_COUNT"], [True]], "DEVICE_COUNT takes 0 arguments, got 1"),
    ([CALL, 1, OP["MALLOC"], [0, 1.0]], "MALLOC: argument size must be int, got float"),
    ([CALL, 1, OP["MALLOC"], [False, 64]], "MALLOC: argument dev must be int, got bool"),
    ([CALL, -1, OP["DEVICE_COUNT"], []], "seq = -1 is out of range"),
    ([CALL, 1, OP["DEVICE_COUNT"], {}], "DEVICE_COUNT: the arguments must be a list, got dict"),
    ([True, 1, OP["DEVICE_COUNT"], []], "expected [CALL|POST, seq, op, args]"),
    ([CALL, 1, "MALLOC", []], "unknown operation 'MALLOC'"),
]



def test_a_call_outside_the_schema_ends_the_session_with_the_reason(server):
    for frame, reason in CASES:
        assert reason in (check_call(frame) or ""), (frame, check_call(frame))
        s = connect(server.url)
        send(s, [HELLO, {"proto": PROTOCOL_VERSION, "runtime": 13000, "pid": os.getpid(), "program": "pytest"}])
        assert recv(s)[1]["error"] == 0
        send(s, [CALL, 1, OP["DEVICE_COUNT"], []])
        assert recv(s)[3] == [1]  # the session works
        send(s, frame)
        reply = recv(s)
        assert reply is not None and reply[0] == FATAL and reason in reply[3], (frame, reply)
        assert recv(s) is None
        s.close()
    assert server.proc.poll() is None
    assert "Traceback" not in server.log.read_text()


def test_every_argument_of_every_operation_has_a_schema():
    """The shim writes each argument with gs_w_int (signed) or gs_w_uint; the schema accepts what it
    writes: the extremes of each range pass, one beyond them does not."""
    for op in OPS:
        for name in op.args:
            f = arg_spec(op, name)
            assert f.type in (int, bytes, str, list), (op.name, name)
            if f.type is int:
                assert f.lo < f.hi
                args = [0 if arg_spec(op, a).type is int else None for a in op.args]
                args = [v if v is not None else _fill(arg_spec(op, a)) for v, a in zip(args, op.args, strict=True)]
                for v, ok in ((f.lo, True), (f.hi, True), (f.lo - 1, False), (f.hi + 1, False)):
                    args[op.args.index(name)] = v
                    assert (check_call([CALL, 1, op.id, args]) is None) == ok, (op.name, name, v)


def _fill(f):  # noqa: ANN001, ANN202
    if f.type is list:
        return [1] * f.lo
    return f.type() if f.lo == 0 else f.type(("x" if f.type is str else b"x") * f.lo)


def test_the_generated_fast_check_agrees_with_the_full_check():
    """check_call's fast path (a check generated per operation from the schema) must accept exactly what the
    full check accepts: random frames of every operation, with values at, inside and beyond each range, of
    the wrong type (bool, float, None, str for bytes, a memoryview for bytes), the wrong length or count."""
    import random

    from gpushim.server.validate import _FAST, _check_call_full

    rng = random.Random(16)

    def value(f):  # noqa: ANN001, ANN202
        r = rng.random()
        if r < 0.08:
            return rng.choice([True, False, None, 1.0, "x", b"x", [], {}, memoryview(b"ab")])
        if f.type is int:
            return rng.choice([f.lo, f.hi, f.lo - 1, f.hi + 1, 0, 1, -1, (f.lo + f.hi) // 2, 2**64, -(2**63) - 1])
        if f.type is list:
            n = rng.choice([f.lo, f.hi, f.lo - 1 if f.lo else 0, min(f.hi, 3), 0])
            lo, hi = f.item_range
            return [rng.choice([lo, hi, hi + 1, lo - 1, 1, True, None]) for _ in range(max(0, min(n, 8)))]
        n = rng.choice([f.lo, min(f.hi, f.lo + 3), max(0, f.lo - 1), f.hi + 1 if f.hi < 1 << 20 else f.lo])
        if f.type is str:
            return "s" * n
        return memoryview(b"b" * n) if rng.random() < 0.3 else b"b" * n

    accepted = rejected = fast_hits = 0
    for _ in range(20000):
        op = rng.choice(OPS)
        args = [value(arg_spec(op, a)) for a in op.args]
        if rng.random() < 0.03:
            args = args[:-1] if args and rng.random() < 0.5 else args + [0]
        kind = rng.choice([CALL, POST, CALL, POST, 2, True])
        seq = rng.choice([1, 0, 2**64 - 1, 2**64, -1, True])
        frame = [kind, seq, op.id, args]
        fast, full = check_call(frame), _check_call_full(frame)
        assert (fast is None) == (full is None), (frame, fast, full)
        assert fast == full
        accepted += full is None
        rejected += full is not None
        fast_hits += full is None and _FAST[op.id] is not None and _FAST[op.id](args)
    assert accepted > 1000 and rejected > 1000 and fast_hits > 1000, (accepted, rejected, fast_hits)
