"""Every operation with hostile arguments (right types, absurd values): the session answers with a CUDA
error or ends the session with a protocol error -- never an internal error, never an exception."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest

from gpushim.backends.emulator.backend import EmulatorBackend
from gpushim.protocol import CALL, OPS, POST, REPLY, Op, arg_spec
from gpushim.server.modules import ModuleStore
from gpushim.server.session import ProtocolError, Session, SessionInfo

INTS = [0, 1, -1, 7, 4096, 2**31 - 1, 2**32, 2**63 - 1, -(2**63), 0x3000_0000_0000, 0x3000_0000_0200, 0x6000_0010]


def value(rng: random.Random, op: Op, name: str) -> object:
    """A value of the argument's type; an int is absurd but mostly inside the protocol's range (the rest,
    outside it, must end the session with a protocol error)."""
    f = arg_spec(op, name)
    if f.type is int:
        v = rng.choice(INTS + [rng.randrange(-(2**40), 2**40), f.lo, f.hi])
        return v if rng.random() < 0.05 else min(max(v, f.lo), f.hi)
    if f.type is bytes:
        return rng.choice([b"", b"\x00" * 32, rng.randbytes(rng.randrange(0, 300))])
    if f.type is str:
        return rng.choice(["", "x", "_Z6kernelPf", "\u00e9" * 10, "0000:10:00.0"])
    return [rng.choice(INTS) for _ in range(rng.choice([0, 1, 3, 3, 3, 4]))]


@pytest.fixture
def session(tmp_path: Path) -> tuple[Session, list]:
    sent: list = []
    s = Session(EmulatorBackend(memory_limit=1 << 30), SessionInfo(1, 1, "fuzz", 13000, 0, [0]), sent.append,
                logging.getLogger("fuzz"), ModuleStore(tmp_path / "modules"))
    return s, sent


def test_hostile_arguments_never_break_the_session(session, caplog) -> None:
    s, sent = session
    caplog.set_level(logging.ERROR, logger="fuzz")
    errors: dict[int, int] = {}
    rng = random.Random(1234)
    ptr = s.bs.malloc(0, 8192)
    INTS.append(ptr)
    seq = 0
    for _ in range(4000):
        op = rng.choice(OPS)
        if op.name in ("CALLBACK_DONE",):
            continue
        args = [value(rng, op, a) for a in op.args]
        seq += 1
        kind = rng.choice([CALL, POST])
        sent.clear()
        try:
            s.dispatch([kind, seq, op.id, args])
        except ProtocolError:
            continue  # a list with the wrong element types: the session would end, with the reason
        s.progress()
        for msg in sent:
            if msg[0] == REPLY:
                assert msg[2] != 999, f"{op.name}{args}: internal error: {msg[5]}"
                errors[msg[2]] = errors.get(msg[2], 0) + 1
    assert s.summary()["calls"] > 3000
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "the session logged internal errors"
    assert errors.get(0, 0) > 100 and len(errors) > 5  # both successes and many kinds of CUDA errors happened
