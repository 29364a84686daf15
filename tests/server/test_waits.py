"""A waiting call whose completion fails with something other than a CUDA error (a server bug) is answered
with an error and leaves the waiting list: it never holds back the replies queued behind it, and the bug is
logged with its traceback."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpushim.backends.emulator.backend import EmulatorBackend
from gpushim.cuda_errors import Err
from gpushim.protocol import CALL, OPS_BY_NAME, POST, REPLY
from gpushim.server.modules import ModuleStore
from gpushim.server.session import ProtocolError, Session, SessionInfo
from gpushim.server.wait import Wait

OPS = OPS_BY_NAME


@pytest.fixture
def session(tmp_path: Path) -> tuple[Session, list]:
    sent: list = []
    s = Session(EmulatorBackend(memory_limit=1 << 30), SessionInfo(1, 1, "waits", 13000, 0, [0]), sent.append,
                logging.getLogger("waits"), ModuleStore(tmp_path / "modules"))
    yield s, sent
    s.close()


def replies(sent: list) -> dict[int, list]:
    return {m[1]: m for m in sent if m[0] == REPLY}


def test_a_failing_wait_is_answered_and_the_queue_behind_it_drains(session, caplog) -> None:
    s, sent = session
    caplog.set_level(logging.ERROR, logger="waits")
    s.dispatch([CALL, 1, OPS["MALLOC"].id, [0, 4096]])
    ptr = replies(sent)[1][3][0]
    s.dispatch([CALL, 2, OPS["STREAM_HOST_FUNC"].id, [0, 77]])  # holds the legacy stream until CALLBACK_DONE

    def broken(*args: object) -> bytes:
        raise ValueError("a bug in the copy")

    s.bs.read_2d = broken  # type: ignore[method-assign]
    s.dispatch([CALL, 10, OPS["MEMCPY2D_D2H"].id, [ptr, 64, 64, 2, 0]])
    s.dispatch([CALL, 11, OPS["DEVICE_SYNC"].id, [0]])
    s.dispatch([CALL, 12, OPS["MEMCPY_D2H"].id, [ptr, 4, 0]])
    assert [seq for seq, _ in s.waiting] == [10, 11, 12]
    sent.clear()
    s.dispatch([CALL, 13, OPS["CALLBACK_DONE"].id, [77]])
    got = replies(sent)
    assert [m[1] for m in sent if m[0] == REPLY] == [10, 11, 12, 13]  # in order, none held back
    assert got[10][2] == Err.UNKNOWN and "a bug in the copy" in got[10][5]
    assert "internal server error in MEMCPY2D_D2H" in got[10][5]
    assert got[11][2] == 0 and got[12][2] == 0 and bytes(got[12][3][0]) == b"\0" * 4 and got[13][2] == 0
    assert s.waiting == []
    [record] = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert record.exc_info is not None and record.exc_info[0] is ValueError  # logged with its traceback
    sent.clear()
    s.dispatch([CALL, 14, OPS["STREAM_SYNC"].id, [0]])  # later synchronising calls work
    assert replies(sent)[14][2] == 0


def test_a_wait_whose_condition_raises_is_answered_too(session, caplog) -> None:
    s, sent = session
    caplog.set_level(logging.ERROR, logger="waits")

    def ready() -> bool:
        raise RuntimeError("condition broke")

    s.waiting.append((5, Wait(ready)))
    s.waiting.append((6, Wait(lambda: True, lambda: [42])))
    s.progress()
    got = replies(sent)
    assert got[5][2] == Err.UNKNOWN and got[6][2] == 0 and got[6][3] == [42]
    assert s.waiting == []
    assert any(r.exc_info for r in caplog.records)


def test_a_negative_2d_copy_is_a_clear_cuda_error(session) -> None:
    s, sent = session
    s.dispatch([CALL, 1, OPS["MALLOC"].id, [0, 4096]])
    ptr = replies(sent)[1][3][0]
    # height -1 is no uint64: the protocol's validator ends the session (tests/server/test_validate.py); a
    # height that fits the schema but reaches far beyond the allocation is the call's CUDA error
    s.dispatch([CALL, 2, OPS["MEMCPY2D_D2H"].id, [ptr, 64, 64, 1 << 62, 0]])
    r = replies(sent)[2]
    assert r[2] == Err.INVALID_VALUE and s.waiting == []
    with pytest.raises(ProtocolError, match="height = -1 is out of range"):
        s.dispatch([CALL, 3, OPS["MEMCPY2D_D2H"].id, [ptr, 64, 64, -1, 0]])


def test_queued_stream_work_that_raises_is_a_sticky_internal_error(session, caplog) -> None:
    """A bug in queued stream work (here a memset held behind a host function) must not escape from the
    unrelated call that runs the queue (CALLBACK_DONE): that call succeeds, the bug is logged with its
    traceback and reported as the session's asynchronous error at the next synchronising call."""
    s, sent = session
    caplog.set_level(logging.ERROR)
    s.dispatch([CALL, 1, OPS["MALLOC"].id, [0, 4096]])
    ptr = replies(sent)[1][3][0]
    s.dispatch([CALL, 2, OPS["STREAM_HOST_FUNC"].id, [0, 78]])
    mem = s.bs.memory_of(ptr)

    def broken(*args: object) -> None:
        raise ValueError("a bug in the fill")

    mem.fill = broken  # type: ignore[method-assign]
    s.dispatch([CALL, 3, OPS["MEMSET"].id, [ptr, 1, 64, 0]])
    sent.clear()
    s.dispatch([POST, 4, OPS["CALLBACK_DONE"].id, [78]])  # posted, as the shim does: it runs the queue
    assert sent == []
    s.dispatch([CALL, 5, OPS["STREAM_SYNC"].id, [0]])
    r = replies(sent)[5]
    assert r[2] == Err.UNKNOWN and "a bug in the fill" in r[5]
    assert any(r.exc_info and r.exc_info[0] is ValueError for r in caplog.records)


def test_cudafree_waits_for_the_device_and_behind_earlier_waits(session) -> None:
    """cudaFree synchronises the device (CUDA Runtime API, cudaFree: "performs an implicit device
    synchronization" unless the memory is stream-ordered; docs/semantics.md): while a host function holds the
    legacy stream the free neither happens nor is answered, and it is answered after the calls that waited
    before it. With the device idle and nothing waiting it is answered at once (without a Wait), and an
    asynchronous error still surfaces in its reply, as in any synchronising call."""
    s, sent = session
    ptrs = []
    for seq in (1, 2, 3):
        s.dispatch([CALL, seq, OPS["MALLOC"].id, [0, 1 << 20]])
        ptrs.append(replies(sent)[seq][3][0])
    a, b, c = ptrs
    s.dispatch([CALL, 4, OPS["STREAM_HOST_FUNC"].id, [0, 79]])
    sent.clear()
    s.dispatch([CALL, 5, OPS["DEVICE_SYNC"].id, [0]])
    s.dispatch([CALL, 6, OPS["FREE"].id, [a]])
    assert sent == [] and [seq for seq, _ in s.waiting] == [5, 6]
    assert s.bs.pointer_info(a)[0] == 2  # not freed yet: queued work may still use it
    s.dispatch([CALL, 7, OPS["CALLBACK_DONE"].id, [79]])
    assert [m[1] for m in sent if m[0] == REPLY] == [5, 6, 7] and all(m[2] == 0 for m in sent)
    assert s.bs.pointer_info(a)[0] == 0
    sent.clear()
    s.dispatch([CALL, 8, OPS["FREE"].id, [b]])  # idle, nothing waiting: answered at once
    assert replies(sent)[8][2] == 0 and s.waiting == [] and s.bs.pointer_info(b)[0] == 0
    s.dispatch([POST, 9, OPS["MEMSET"].id, [b, 0, 64, 0]])  # a posted call that fails: its error is deferred
    s.dispatch([CALL, 10, OPS["FREE"].id, [c]])
    r = replies(sent)[10]
    assert r[2] == Err.INVALID_VALUE and s.bs.pointer_info(c)[0] == 0  # freed, and the error reported
    s.dispatch([CALL, 11, OPS["FREE"].id, [c]])  # a double free fails at once
    assert replies(sent)[11][2] == Err.INVALID_VALUE and s.waiting == []
