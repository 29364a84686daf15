"""CUDA's synchronisation semantics (issue 10, docs/semantics.md): tests/programs/sync.cu holds a stream with a
host function, makes the call under test and reports what it sees right after the call returns. Every case runs
in the legacy build (`sync`) and the per-thread default stream build (`sync_ptds`), against servers with one and
two emulated devices.

Citations are to the CUDA Runtime API reference, "API synchronization behavior" (APISYNC) and "Stream
synchronization behavior" (STREAMSYNC), and to each function's own documentation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Server, kv

BUILDS = ["sync", "sync_ptds"]


@pytest.fixture(scope="module", params=[1, 2], ids=["1dev", "2dev"])
def sync_server(request, tmp_path_factory, built: Path) -> Iterator[tuple[Server, int]]:
    devices = request.param
    s = Server(tmp_path_factory.mktemp(f"sync{devices}"), "--emulate-devices", str(devices))
    yield s, devices
    s.stop()


_cache: dict[tuple[str, int, str], tuple[dict[str, str], str]] = {}


def run_case(sync_server: tuple[Server, int], build: str, case: str) -> dict[str, str]:
    server, devices = sync_server
    key = (build, devices, case)
    if key not in _cache:
        r = server.run(build, case, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.strip().endswith("OK"), r.stdout
        _cache[key] = (kv(r.stdout), r.stderr)
    return _cache[key][0]


@pytest.mark.parametrize("build", BUILDS)
def test_sync_h2d_from_pinned_memory_has_read_it(sync_server, build):
    # APISYNC cudaMemcpy: "For transfers from pinned host memory to device memory, the function is synchronous
    # with respect to the host." The buffer may be reused at once, and other streams see the data.
    v = run_case(sync_server, build, "pinned_h2d")
    assert v["pinned_reuse"] == "1"
    assert v["pinned_nb_kernel"] == "1"
    assert v["to_symbol_pinned"] == "1"


@pytest.mark.parametrize("build", BUILDS)
def test_sync_h2d_is_ordered_after_earlier_stream_work(sync_server, build):
    # APISYNC: "For transfers from pageable host memory to device memory, a stream sync is performed before the
    # copy is initiated"; from pinned memory the copy is synchronous, in stream order.
    v = run_case(sync_server, build, "h2d_order")
    for kind in ("pageable_small", "pageable_large", "registered", "pinned"):
        assert v[f"h2d_order_{kind}"] == "1", kind


@pytest.mark.parametrize("build", BUILDS)
def test_legacy_stream_waits_do_not_wait_for_non_blocking_streams(sync_server, build):
    # STREAMSYNC: the legacy stream synchronises with blocking streams only; cudaStreamNonBlocking streams "do
    # not synchronize with the legacy stream". The held non-blocking stream waits for this thread: the calls
    # return at once (timed_out=0), and cudaStreamQuery of the default stream says it is idle (item 10).
    v = run_case(sync_server, build, "legacy_nb")
    assert v["legacy_nb"] == "query=0,0 timed_out=0 data=1"


@pytest.mark.parametrize("build", BUILDS)
def test_d2h_on_a_blocking_stream_waits_for_legacy_work(sync_server, build):
    # STREAMSYNC: work issued to a blocking stream waits for earlier legacy-stream work. APISYNC: a D2H copy to
    # pageable memory returns "only once the copy has completed", also cudaMemcpyAsync.
    v = run_case(sync_server, build, "blocking_d2h")
    assert v["blocking_d2h"] == "1"
    assert v["blocking_d2h_2d"] == "1"
    assert v["default_d2h"] == "1"


@pytest.mark.parametrize("build", BUILDS)
def test_each_device_has_its_own_legacy_stream(sync_server, build):
    # STREAMSYNC: the legacy stream is per context (device); cudaDeviceSynchronize waits for that device's work.
    v = run_case(sync_server, build, "two_devices")
    if sync_server[1] < 2:
        assert v["two_devices"] == "skip"
        return
    assert v["dev1_blocking"] == "1"
    assert v["dev1_device_sync"] == "1"
    assert v["dev1_wait_event"] == "1"


@pytest.mark.parametrize("build", BUILDS)
def test_memcpy_peer_is_serialised_with_all_three_devices(sync_server, build):
    # cudaMemcpyPeer: "serialized with respect to all pending and future asynchronous work in to the current
    # device, srcDevice, and dstDevice".
    v = run_case(sync_server, build, "peer")
    assert v["peer"] == ("1" if sync_server[1] >= 2 else "skip")


@pytest.mark.parametrize("build", BUILDS)
def test_memcpy_from_symbol_into_pinned_memory_completes(sync_server, build):
    # cudaMemcpyFromSymbol is synchronous (APISYNC: D2H to pinned memory "the function is synchronous").
    v = run_case(sync_server, build, "from_symbol")
    assert v["from_symbol_pinned"] == "1"


@pytest.mark.parametrize("build", BUILDS)
def test_memset_on_pinned_and_managed_memory_is_synchronous(sync_server, build):
    # APISYNC Memset: "The synchronous memset functions are asynchronous with respect to the host except when
    # the target is pinned host memory or a Unified Memory region, in which case they are fully synchronous."
    v = run_case(sync_server, build, "memset_host")
    assert v["memset_pinned"] == "0,1"
    # "The Async versions are always asynchronous with respect to the host": returns at once, runs in order
    assert v["memset_async_pinned"] == "0,1 timed_out=0,1"
    assert v["memset_managed"] == "0,1"


@pytest.mark.parametrize("build", BUILDS)
def test_small_ones(sync_server, build):
    v = run_case(sync_server, build, "small")
    stderr = _cache[(build, sync_server[1], "small")][1]
    # a freed managed range leaves no mapping behind that a later device range would overlap
    assert v["managed_reuse"] == "1"
    assert "overlaps host memory" not in stderr, stderr
    # a direction that contradicts the pointers is an error, not a crash (cudaErrorInvalidValue)
    assert v["direction"] == "1,1,1,1,1,1"
    # sizes that wrap around 2^64 are rejected before anything is queued
    assert v["wrap"] == "1,1,1"


@pytest.mark.parametrize("build", BUILDS)
def test_device_reset_clears_a_sticky_error(sync_server, build):
    # CUDA: a sticky error (cudaErrorIllegalAddress) is returned by every call "until the context is destroyed";
    # cudaDeviceReset destroys the primary context and the next call starts a fresh one (the driver_types.h note
    # that the process "must be terminated" is about the GPU's state; the runtime API itself recovers).
    v = run_case(sync_server, build, "reset")
    assert v["reset"] == "sync=700 sticky=700 reset=0 after=0 data=1 last=0"


@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("transport", ["tcp", "unix-noshm"])
def test_the_same_rules_without_shared_memory(make_server, build, transport):
    # Over TCP, or with GPUSHIM_SHM=0, pinned memory is not shared with the server: its copies take the
    # pageable paths (inline frames, pipelined chunks), which follow the same rules.
    cases = ["pinned_h2d", "h2d_order", "legacy_nb", "blocking_d2h", "from_symbol"]
    if transport == "tcp":
        s = make_server("--insecure-no-token", listen="tcp://127.0.0.1:0")
        r = s.run(build, *cases, timeout=60)
    else:
        s = make_server()
        r = s.run(build, *cases, "memset_host", timeout=60, GPUSHIM_SHM="0")
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout + r.stderr
    v = kv(r.stdout)
    for key in ("pinned_reuse", "pinned_nb_kernel", "to_symbol_pinned", "h2d_order_pageable_small",
                "h2d_order_pageable_large", "h2d_order_registered", "h2d_order_pinned", "blocking_d2h",
                "blocking_d2h_2d", "default_d2h", "from_symbol_pinned"):
        assert v[key] == "1", key
    assert v["legacy_nb"] == "query=0,0 timed_out=0 data=1"
    if transport != "tcp":
        assert v["memset_pinned"] == "0,1" and v["memset_async_pinned"] == "0,1 timed_out=0,1"
