"""TEX_CREATE / TEX_DESTROY with valid and hostile descriptions: descriptors land in device memory as given,
every bad description is a CUDA error (never an internal one), handles are not device memory to cudaFree."""

from __future__ import annotations

import logging
import random
import struct
from pathlib import Path

import pytest

from gpushim.backends.emulator.backend import EmulatorBackend
from gpushim.cuda_errors import Err
from gpushim.protocol import CALL, OPS_BY_NAME, REPLY
from gpushim.ptx import texdesc as td
from gpushim.server.modules import ModuleStore
from gpushim.server.session import Session, SessionInfo


@pytest.fixture
def s(tmp_path: Path) -> Session:
    return Session(EmulatorBackend(memory_limit=1 << 28), SessionInfo(1, 1, "tex", 13000, 0, [0]), _SENT.append,
                   logging.getLogger("tex"), ModuleStore(tmp_path / "modules"))


_SENT: list = []


def call(s: Session, op: str, *args) -> tuple[int, list]:
    _SENT.clear()
    s.dispatch([CALL, 1, OPS_BY_NAME[op].id, list(args)])
    s.progress()
    (reply,) = [m for m in _SENT if m[0] == REPLY]
    return reply[2], reply[3]


def fields(base: int, w: int = 8, h: int = 4, pitch: int = 32, **kw) -> list[int]:
    f = [td.RES_PITCH2D, base, pitch, w, h, 1, 0, 1, 32, td.KIND_FLOAT, 0, 1, 2, 1, 0, 1, 0,
         *struct.unpack("<4I", struct.pack("<4f", 0.5, 0, 0, 1))]
    for k, v in kw.items():
        f[int(k[1:])] = v
    return f


def test_descriptor_as_given(s: Session) -> None:
    ptr = s.bs.malloc(0, 128)
    err, (h,) = call(s, "TEX_CREATE", 0, 0, fields(ptr))
    assert err == 0
    d = td.unpack(bytes(s.bs.memory_of(h).read(h, td.SIZE)))
    assert d is not None and (d.magic, d.base, d.width, d.height, d.pitch) == (td.TEX_MAGIC, ptr, 8, 4, 32)
    assert d.addr == (0, 1, 2) and d.filter == 1 and d.normalized == 1 and d.border == (0.5, 0, 0, 1)
    assert call(s, "FREE", h)[0] == Err.INVALID_VALUE  # not cudaFree's to free
    assert call(s, "TEX_DESTROY", h)[0] == 0
    assert call(s, "TEX_DESTROY", h)[0] == Err.INVALID_VALUE  # once
    assert call(s, "TEX_DESTROY", ptr)[0] == Err.INVALID_VALUE  # plain memory is no object


def test_resource_must_lie_in_one_allocation(s: Session) -> None:
    ptr = s.bs.malloc(0, 128)
    assert call(s, "TEX_CREATE", 0, 0, fields(ptr, f4=5))[0] == Err.INVALID_VALUE  # 5 rows of 32 bytes > 128
    assert call(s, "TEX_CREATE", 0, 1, fields(ptr + 4096))[0] == Err.INVALID_VALUE
    err, (h,) = call(s, "TEX_CREATE", 0, 0, fields(ptr))
    assert err == 0
    assert call(s, "TEX_CREATE", 0, 0, fields(h, w=4, h=1, pitch=16))[0] == Err.INVALID_VALUE  # over a descriptor
    assert call(s, "TEX_CREATE", 1, 0, fields(ptr))[0] == Err.INVALID_DEVICE


def test_hostile_descriptions_are_cuda_errors(s: Session) -> None:
    ptr = s.bs.malloc(0, 4096)
    rng = random.Random(7)
    hostile = [0, 1, 3, 5, 2**31, 2**32 - 1, 2**63 - 1, ptr, ptr + 4000]
    created = 0
    for _ in range(500):
        f = fields(ptr)
        for _ in range(rng.randrange(1, 4)):
            f[rng.randrange(len(f))] = rng.choice(hostile)
        err, res = call(s, "TEX_CREATE", 0, rng.randrange(2), f)
        assert err in (0, Err.INVALID_VALUE), (f, err)
        created += err == 0
    assert 0 < created < 500
