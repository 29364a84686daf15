"""LAUNCH_EX (cuLaunchKernelEx's launch attributes, gpushim/backends/launch_attrs.py) at the frame level on the
emulator: the schema's checks, the attributes' own, CUDA's cluster rules (CUDA Programming Guide, "Thread Block
Clusters": the grid a multiple of the cluster, at most 8 blocks portably; CUDA_ERROR_INVALID_CLUSTER_SIZE), the
launch completion event recorded after the kernel, and LAUNCH without attributes unchanged (old clients)."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest

from gpushim.backends import launch_attrs as la
from gpushim.backends.emulator.backend import EmulatorBackend
from gpushim.cuda_errors import Err
from gpushim.protocol import CALL, OPS_BY_NAME, check_args
from gpushim.server.modules import ModuleStore
from gpushim.server.session import Session, SessionInfo

PTX = b""".version 8.0
.target sm_80
.address_size 64
.visible .entry _Z3setPi(.param .u64 p)
{
\t.reg .u64 %rd<2>;
\t.reg .u32 %r<2>;
\tld.param.u64 %rd1, [p];
\tmov.u32 %r1, 7;
\tst.global.u32 [%rd1], %r1;
\tret;
}
"""
KEY = hashlib.sha256(PTX).digest()
NAME = "_Z3setPi"


@pytest.fixture
def session(tmp_path: Path) -> tuple[Session, list]:
    sent: list = []
    s = Session(EmulatorBackend(memory_limit=1 << 28), SessionInfo(1, 1, "attrs", 13000, 0, [0]), sent.append,
                logging.getLogger("attrs"), ModuleStore(tmp_path / "modules"))
    s.dispatch([CALL, 1, OPS_BY_NAME["MODULE_LOAD"].id, [KEY, PTX]])
    assert sent.pop()[2] == 0
    return s, sent


def call(s: Session, sent: list, op: str, *args) -> tuple[int, list]:
    s.dispatch([CALL, 9, OPS_BY_NAME[op].id, list(args)])
    reply = sent.pop()
    return reply[2], reply[3]


def launch_ex(s: Session, sent: list, ptr: int, grid: list[int], attrs: list[int]) -> int:
    return call(s, sent, "LAUNCH_EX", 0, KEY, NAME, grid, [1, 1, 1], 0, 0, attrs, ptr.to_bytes(8, "little"))[0]


def test_launch_ex_runs_and_checks(session) -> None:
    s, sent = session
    err, (ptr,) = call(s, sent, "MALLOC", 0, 64)
    assert err == 0
    every = [la.CLUSTER_DIMENSION, 2, 1, 1, la.PRIORITY, 0xFFFF_FFFF, 0, 0, la.PROGRAMMATIC_STREAM_SERIALIZATION, 1,
             0, 0, la.MEM_SYNC_DOMAIN, 1, 0, 0, la.ACCESS_POLICY_WINDOW, ptr, 64, 0, la.COOPERATIVE, 0, 0, 0]
    assert launch_ex(s, sent, ptr, [4, 2, 1], every) == 0
    assert s.bs.read(None, ptr, 4) == (7).to_bytes(4, "little")  # the kernel ran (read waits for it)
    # the cluster shape, as CUDA checks it at the launch
    for dims in ([3, 1, 1], [1, 3, 1], [16, 1, 1], [0, 1, 1], [2, 2, 4]):
        assert launch_ex(s, sent, ptr, [4, 2, 1], [la.CLUSTER_DIMENSION, *dims]) == Err.INVALID_CLUSTER_SIZE, dims
    assert launch_ex(s, sent, ptr, [8, 1, 1], [la.CLUSTER_DIMENSION, 8, 1, 1]) == 0
    # 16 blocks once the kernel allows a non-portable size (cudaFuncSetAttribute, attribute 14), and not after
    for allowed, want in ((1, 0), (0, Err.INVALID_CLUSTER_SIZE)):
        assert call(s, sent, "FUNC_SET_ATTR", 0, KEY, NAME, 14, allowed)[0] == 0
        assert launch_ex(s, sent, ptr, [16, 1, 1], [la.CLUSTER_DIMENSION, 16, 1, 1]) == want
    # malformed attributes: not 4 integers each, an unknown id, a flag that is not 0/1, an event not of this session
    assert launch_ex(s, sent, ptr, [1, 1, 1], [la.PRIORITY, 0, 0, 0, 5]) == Err.INVALID_VALUE
    assert launch_ex(s, sent, ptr, [1, 1, 1], [99, 0, 0, 0]) == Err.INVALID_VALUE
    assert launch_ex(s, sent, ptr, [1, 1, 1], [la.COOPERATIVE, 2, 0, 0]) == Err.INVALID_VALUE
    assert launch_ex(s, sent, ptr, [1, 1, 1], [la.LAUNCH_COMPLETION_EVENT, 0x1234, 0, 0]) == \
        Err.INVALID_RESOURCE_HANDLE
    assert s.sticky is None and s.bs.take_async_error() is None  # refused at the launch, nothing queued
    # the schema: attrs is a list of at most 128 unsigned integers, before params
    op = OPS_BY_NAME["LAUNCH_EX"]
    assert check_args(op, [0, KEY, NAME, [1, 1, 1], [1, 1, 1], 0, 0, "x", b""])
    assert check_args(op, [0, KEY, NAME, [1, 1, 1], [1, 1, 1], 0, 0, [-1, 0, 0, 0], b""])
    assert check_args(op, [0, KEY, NAME, [1, 1, 1], [1, 1, 1], 0, 0, [0] * 132, b""])
    assert check_args(op, [0, KEY, NAME, [1, 1, 1], [1, 1, 1], 0, 0, [8, 0, 0, 0], b""]) is None
    # LAUNCH, as clients without attributes send it, is unchanged
    assert call(s, sent, "LAUNCH", 0, KEY, NAME, [1, 1, 1], [1, 1, 1], 0, 0, ptr.to_bytes(8, "little"))[0] == 0


def test_completion_event_is_recorded_after_the_kernel(session) -> None:
    s, sent = session
    _, (ptr,) = call(s, sent, "MALLOC", 0, 64)
    _, (start,) = call(s, sent, "EVENT_CREATE", 0, 0)
    _, (end,) = call(s, sent, "EVENT_CREATE", 0, 0)
    assert call(s, sent, "EVENT_RECORD", start, 0, 0)[0] == 0
    # before: the end event was never recorded, so no time lies between the two (CUDA: an error)
    assert call(s, sent, "EVENT_ELAPSED", start, end)[0] != 0
    for attr in (la.LAUNCH_COMPLETION_EVENT, la.PROGRAMMATIC_EVENT):
        assert launch_ex(s, sent, ptr, [1, 1, 1], [attr, end, 0, 0]) == 0
        assert s.bs.read(None, ptr, 4) == (7).to_bytes(4, "little")  # the stream's work is done
        assert call(s, sent, "EVENT_ELAPSED", start, end)[0] == 0


def test_tensor_map_on_the_emulator(session) -> None:
    """TENSOR_MAP_ENCODE: the emulator cannot encode a TMA descriptor (the layout is the driver's own) and says
    so; fields that do not fit the rank are the client's error."""
    s, sent = session
    fields = [7, 2, 0x7000_0000_0000, 64, 64, 256, 32, 32, 1, 1, 0, 0, 0, 0]
    assert call(s, sent, "TENSOR_MAP_ENCODE", 0, fields)[0] == Err.NOT_SUPPORTED
    assert call(s, sent, "TENSOR_MAP_ENCODE", 0, fields[:-1])[0] == Err.INVALID_VALUE
    assert call(s, sent, "TENSOR_MAP_ENCODE", 0, [7, 6, *fields[2:]])[0] == Err.INVALID_VALUE
    assert check_args(OPS_BY_NAME["TENSOR_MAP_ENCODE"], [0, [0] * 9])  # fewer than a rank-1 map has
    assert call(s, sent, "TENSOR_MAP_REPLACE_ADDRESS", 0, 0x7000_0000_0000, bytes(128))[0] == Err.NOT_SUPPORTED
    assert check_args(OPS_BY_NAME["TENSOR_MAP_REPLACE_ADDRESS"], [0, 0, bytes(64)])  # a descriptor is 128 bytes
