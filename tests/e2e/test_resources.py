"""Memory limits: every allocation path counts against --memory-quota, and the emulator never presents or
hands out more memory than the host can back (--memory-cap, by default from MemAvailable)."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from gpushim.backends.emulator.models import MODELS

from .conftest import BIN, emulator_only, kv
from .test_isolation import wait_line, wait_sessions

MIB = 1 << 20
ERR_MEMORY_ALLOCATION = "2"  # cudaErrorMemoryAllocation


@pytest.fixture
def quota_server(make_server):
    return make_server("--memory-quota", "64M")


@pytest.mark.parametrize("path", ["malloc", "pitch", "3d", "managed", "async"])
def test_every_allocation_path_counts_against_the_quota(quota_server, path):
    # 40 MiB fits a 64 MiB quota, 40 more do not (cudaErrorMemoryAllocation), and after freeing it fits again
    r = quota_server.run("quota", path, "40")
    assert r.returncode == 0, r.stderr
    v = kv(r.stdout)
    assert v[f"{path}.first"] == "0"
    assert v[f"{path}.second"] == ERR_MEMORY_ALLOCATION, r.stdout
    assert v[f"{path}.again"] == "0"
    # cudaMemGetInfo's free memory is what the quota still allows (24 MiB; managed memory is page-rounded)
    assert int(v["meminfo.free"]) == 24 * MIB


def test_module_variables_count_against_the_quota(quota_server):
    # 48 MiB held: the module's 24 MiB __device__ array cannot be placed; once freed it can, and a kernel uses it
    r = quota_server.run("quota", "globals", "48")
    assert r.returncode == 0, r.stderr
    v = kv(r.stdout)
    assert v["globals.first"] == ERR_MEMORY_ALLOCATION
    assert v["globals.again"] == "0" and v["globals.kernel"] == "0"
    assert int(v["meminfo.free"]) == 40 * MIB  # 64 MiB less the 24 MiB variable


def test_device_heap_counts_against_the_quota(quota_server):
    r = quota_server.run("quota", "heap", "24")
    assert r.returncode == 0, r.stderr
    v = kv(r.stdout)
    # CUDA Runtime API, cudaDeviceSetLimit: returns cudaErrorMemoryAllocation among its errors
    assert v["heap.limit_big"] == ERR_MEMORY_ALLOCATION
    # Programming guide, dynamic global memory allocation: malloc() returns NULL when memory is short
    assert v["heap.first"] == "0"
    assert v["heap.again"] == "1"


@emulator_only
def test_cap_clamps_the_device_and_is_shared_by_all_sessions(make_server):
    s = make_server("--memory-cap", "96M")
    v = kv(s.run("device_query").stdout)
    assert v["dev0.totalGlobalMem"] == str(96 * MIB)
    assert v["meminfo.total"] == str(96 * MIB)
    holder = s.start("hold", "64", "3", "60")
    try:
        wait_line(holder, "ready")
        # 64 MiB held by another session: 40 more would exceed what the host may back
        v = kv(s.run("quota", "malloc", "40").stdout)
        assert v["malloc.first"] == ERR_MEMORY_ALLOCATION
        assert int(v["meminfo.free"]) <= 32 * MIB
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    wait_sessions(s, 0)
    v = kv(s.run("quota", "malloc", "40").stdout)  # the killed session's share came back
    assert v["malloc.first"] == "0" and v["malloc.second"] == "0"  # 80 of 96 MiB



@emulator_only
def test_a_long_lived_sessions_meminfo_follows_the_other_sessions(make_server):
    # The server answers cudaMemGetInfo from a per-worker view of the sessions sharing its host-RAM ledger
    # (gpushim/backends/accounting.py, built at the first query): sessions that start, allocate and end after
    # the view was built must still change the answer, at once.
    s = make_server("--memory-cap", "96M")
    watch = subprocess.Popen([str(BIN / "meminfo_watch")], env=s.env(), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def free() -> int:
        watch.stdin.write("?\n")
        watch.stdin.flush()
        return int(wait_line(watch, "free=").split()[0].partition("=")[2])

    try:
        assert free() == 96 * MIB  # nobody holds anything
        holder = s.start("hold", "64", "3", "60")
        try:
            wait_line(holder, "ready")
            assert free() <= 32 * MIB  # a session that started after the view was built
        finally:
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait()
        wait_sessions(s, 1)
        assert free() == 96 * MIB  # ... and ended
        second = s.start("hold", "16", "5", "60")
        try:
            wait_line(second, "ready")
            assert 64 * MIB <= free() <= 80 * MIB
        finally:
            os.kill(second.pid, signal.SIGKILL)
            second.wait()
    finally:
        watch.stdin.close()
        assert watch.wait(30) == 0, watch.stderr.read()

@emulator_only
def test_default_cap_follows_the_hosts_available_memory(server):
    v = kv(server.run("device_query").stdout)
    total = int(v["dev0.totalGlobalMem"])
    with open("/proc/meminfo") as f:
        mem_total = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    assert total == int(v["meminfo.total"])
    assert total <= min(MODELS["h100"].total_mem, mem_total)
    log = server.log.read_text()
    assert f"device memory {total} bytes (host RAM cap" in log


def test_memory_size_flags_reject_bad_values(make_server, tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "gpushim", "serve", "--memory-cap", "lots", "--listen",
                        f"unix://{tmp_path}/x.sock"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "is not a size" in r.stderr
