"""RUNTIME_VERSION: a client that connected before its runtime started tells the server its version later
(issue 13: CuPy calls cuInit before its static runtime's look-ups). Only a newer CUDA 11+ version replaces the
recorded one; anything else is an error for that call alone."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpushim.backends.emulator.backend import EmulatorBackend
from gpushim.cuda_errors import Err
from gpushim.protocol import CALL, OPS_BY_NAME, REPLY
from gpushim.server.modules import ModuleStore
from gpushim.server.session import Session, SessionInfo

_SENT: list = []


@pytest.fixture
def s(tmp_path: Path) -> Session:
    return Session(EmulatorBackend(memory_limit=1 << 28), SessionInfo(1, 1, "rt", 0, 0, [0]), _SENT.append,
                   logging.getLogger("rt"), ModuleStore(tmp_path / "modules"))


def call(s: Session, op: str, *args) -> int:
    _SENT.clear()
    s.dispatch([CALL, 1, OPS_BY_NAME[op].id, list(args)])
    (reply,) = [m for m in _SENT if m[0] == REPLY]
    return reply[2]


def test_a_newer_version_is_recorded(s: Session) -> None:
    assert s.summary()["runtime"] == 0
    assert call(s, "RUNTIME_VERSION", 13000) == 0
    assert call(s, "RUNTIME_VERSION", 13020) == 0
    assert call(s, "RUNTIME_VERSION", 12080) == 0  # an older look-up changes nothing
    assert s.summary()["runtime"] == 13020


@pytest.mark.parametrize("bad", [0, 10020, 100000, 999_999])
def test_bad_versions_are_refused(s: Session, bad: int) -> None:
    assert call(s, "RUNTIME_VERSION", bad) == Err.INVALID_VALUE
    assert s.summary()["runtime"] == 0
    assert call(s, "SESSION_INFO") == 0  # the session goes on


@pytest.mark.parametrize("bad", [-1, 1_000_000, "13000", None])
def test_malformed_arguments_are_protocol_errors(s: Session, bad) -> None:
    from gpushim.server.session import ProtocolError

    with pytest.raises(ProtocolError):
        s.dispatch([CALL, 1, OPS_BY_NAME["RUNTIME_VERSION"].id, [bad]])
