"""Module uploads over the protocol: rejected uploads never reach the disk, and each session's uploads are
limited (--session-uploads / --session-upload-bytes)."""

from __future__ import annotations

import hashlib
import os
import random

from gpushim.fatbin import fatbins_in_elf
from gpushim.protocol import CALL, OPS_BY_NAME

from .conftest import BIN, SHIM
from .test_isolation import hello, raw_client, recv, send

OPS = OPS_BY_NAME


def upload(s, seq: int, data: bytes) -> int:
    send(s, [CALL, seq, OPS["MODULE_LOAD"].id, [hashlib.sha256(data).digest(), data]])
    r = recv(s)
    assert r[1] == seq
    return r[2]


def test_twenty_garbage_uploads_leave_nothing_on_disk(server):
    s = raw_client(server)
    hello(s)
    rng = random.Random(5)
    for i in range(20):
        assert upload(s, i + 1, rng.randbytes(1 << 20)) == 200  # cudaErrorInvalidKernelImage
    send(s, [CALL, 99, OPS["DEVICE_SYNC"].id, [0]])  # the session is fine
    assert recv(s)[2] == 0
    s.close()
    store = server.log.parent / "modules"
    assert os.listdir(store) == []
    log = server.log.read_text()
    assert "internal error" not in log and "Traceback" not in log


def test_uploads_per_session_are_limited(make_server, built):
    server = make_server("--session-uploads", "1")
    first, second = (fatbins_in_elf(built / name)[-1] for name in ("spin", "quota"))
    s = raw_client(server)
    hello(s)
    assert upload(s, 1, first) == 0
    assert upload(s, 2, second) == 2  # cudaErrorMemoryAllocation: the session's allowance is spent
    [info] = server.status()["sessions"]
    assert info["module_uploads"] == 1 and info["module_upload_bytes"] == len(first)
    s.close()
    t = raw_client(server)  # another session has its own allowance
    hello(t)
    assert upload(t, 1, second) == 0
    t.close()
    stored = sorted(hashlib.sha256(d).hexdigest() + ".fatbin" for d in (first, second))
    assert sorted(os.listdir(server.log.parent / "modules")) == stored
    # a program whose module is already stored uses it (the shim uploads the same bytes, by the same hash)
    r = server.run("quota", "globals", "1")
    assert r.returncode == 0 and "globals.again=0" in r.stdout, r.stderr
    assert sorted(os.listdir(server.log.parent / "modules")) == stored


def test_refused_upload_says_why(make_server, built):
    """The limit's CUDA_ERROR_OUT_OF_MEMORY comes with the reason, printed by the shim and logged by the server
    (numba-cuda's test_array_alignment hit the old default of 256 and saw only the bare error)."""
    server = make_server("--session-uploads", "0")
    r = server.run("drv_vecadd", str(BIN / "drv_kernels"), "ptx", LD_LIBRARY_PATH=str(SHIM.parent / "driver"))
    assert r.returncode == 1 and "CUDA_ERROR_OUT_OF_MEMORY" in r.stderr, r.stdout + r.stderr
    assert "module upload refused: this session has uploaded 0 modules" in r.stderr
    assert "--session-uploads 0" in r.stderr
    assert "module upload refused" in server.log.read_text()
    # a module the store already holds writes nothing: uploading it again is not charged
    one = make_server("--session-uploads", "1")
    data = fatbins_in_elf(built / "spin")[-1]
    s = raw_client(one)
    hello(s)
    assert upload(s, 1, data) == 0
    assert upload(s, 2, data) == 0
    [info] = one.status()["sessions"]
    assert info["module_uploads"] == 1
    s.close()
