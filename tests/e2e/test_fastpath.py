"""The server worker's C fast path (gpushim/server/fastpath.c) seen from a CUDA program: tests/programs/fastpath.cu
makes the calls it answers (stream and event queries and synchronisations, memsets, small copies pageable and
pinned, cudaMemGetInfo, launches of empty kernels) and the ones it must
leave to the Python path (a stream held by a host function, a memset out of range, a sticky error), against a
server with the fast path and one without it (GPUSHIM_WORKER_FASTPATH=0). CUDA's answers are asserted, and both
servers must give the same ones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpushim.server import fastpath

from .conftest import BACKEND, Server, kv

pytestmark = pytest.mark.skipif(BACKEND != "emulator", reason="the C fast path serves the emulator only")

NOT_READY, INVALID_VALUE, ILLEGAL_ADDRESS = 600, 1, 700


def run(tmp: Path, monkeypatch: pytest.MonkeyPatch, fast: bool) -> tuple[dict[str, str], int]:
    monkeypatch.setenv("GPUSHIM_WORKER_FASTPATH", "1" if fast else "0")  # the server's workers inherit it
    server = Server(tmp / ("fast" if fast else "python"))
    try:
        r = server.run("fastpath", timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.strip().endswith("OK"), r.stdout
    finally:
        server.stop()
    log = server.log.read_text()
    [answered] = re.findall(r"client disconnected after \d+ calls; freeing its resources \((\d+) calls answered", log)
    return kv(r.stdout), int(answered)


@pytest.mark.parametrize("fast", [True, False], ids=["c", "python"])
def test_fastpath_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    if fast and fastpath.not_built():
        pytest.skip(f"no C fast path: {fastpath.not_built()}")
    (tmp_path / ("fast" if fast else "python")).mkdir()
    v, answered = run(tmp_path, monkeypatch, fast)
    for key in ("query_idle", "event_idle", "memset_bytes", "memset_sync", "held_memset", "copies", "meminfo_back",
                "held_copy"):
        assert v[key] == "1", key
    assert v["timed_out"] == "0"
    assert int(v["memset_oob"]) == INVALID_VALUE
    # Error Handling, cudaGetLastError: "Returns the last error that has been produced by any of the runtime
    # calls in the same instance of the CUDA Runtime library in the host thread"
    assert int(v["memset_oob_after"]) == INVALID_VALUE
    assert v["launch"] == "0" and v["launch_sync"] == "0"
    assert int(v["copy_oob"]) == INVALID_VALUE and int(v["copy_oob_after"]) == INVALID_VALUE
    assert int(v["meminfo_drop"]) == 1 << 20  # cudaMemGetInfo: "free ... bytes"; a 1 MiB allocation takes 1 MiB
    # CUDA Runtime API, Stream Management, cudaStreamQuery: "Returns cudaSuccess if all operations in stream
    # have completed, or cudaErrorNotReady if not"; the legacy stream waits for blocking streams
    # ("Stream synchronization behavior"); Event Management, cudaEventQuery: cudaErrorNotReady until the work
    # before the record has completed
    assert int(v["held_query"]) == NOT_READY
    assert int(v["held_legacy_query"]) == NOT_READY
    assert int(v["held_event_query"]) == NOT_READY
    assert v["released_query"] == "0"
    # a kernel's illegal address is sticky: every later call returns it
    assert int(v["sticky_sync"]) == ILLEGAL_ADDRESS
    assert int(v["sticky_query"]) == ILLEGAL_ADDRESS
    assert int(v["sticky_memset"]) == ILLEGAL_ADDRESS
    if fast:
        assert answered > 5000  # most of the program's ~12 000 calls
    else:
        assert answered == 0
