"""Unmodified nvcc-built programs run their device, memory, stream and event work through gpushim."""

from __future__ import annotations

import pytest

from gpushim.backends.emulator.models import MODELS

from .conftest import emulator_only, kv


@emulator_only
def test_device_query_matches_emulated_model(make_server):
    # the operator lets the emulator present the model's full 80 GB (by default it is clamped to host RAM)
    server = make_server("--memory-cap", "1T")
    r = server.run("device_query")
    assert r.returncode == 0, r.stderr
    v = kv(r.stdout)
    h100 = MODELS["h100"]
    assert v["runtime"] == "13000"
    assert v["driver"] == "13000"
    assert v["count"] == "1"
    assert v["prop_size"] == "1008"  # the 13.0 ABI of cudaDeviceProp
    assert v["dev0.name"] == h100.name
    assert int(v["dev0.totalGlobalMem"]) == h100.total_mem
    assert v["dev0.cc"] == "9.0"
    assert v["dev0.multiProcessorCount"] == str(h100.sms) == v["dev0.attr.sms"]
    assert v["dev0.maxThreadsDim"] == "1024,1024,64"
    assert v["dev0.maxGridSize"] == "2147483647,65535,65535"
    assert v["dev0.attr.maxBlockDimZ"] == "64"
    assert v["dev0.l2CacheSize"] == str(h100.l2)
    assert v["dev0.pci"] == "0000:10:00.0 back=0"
    assert v["meminfo.total"] == str(h100.total_mem)
    assert v["priority"] == "0,-5"
    assert r.stdout.strip().endswith("OK")


@emulator_only
def test_other_model_and_device_count(make_server):
    s = make_server("--emulate-gpu", "t4", "--emulate-devices", "2", "--emulate-driver", "12.4")
    v = kv(s.run("device_query").stdout)
    assert v["count"] == "2"
    assert v["driver"] == "12040"
    assert v["dev1.name"] == "Tesla T4"
    assert v["dev1.cc"] == "7.5"
    assert v["dev1.pci"] == "0000:11:00.0 back=1"


@emulator_only
def test_requested_devices_are_remapped(make_server):
    s = make_server("--emulate-devices", "3")
    v = kv(s.run("device_query", GPUSHIM_DEVICES="2,0").stdout)
    assert v["count"] == "2"
    assert v["dev0.pci"] == "0000:12:00.0 back=0"  # client device 0 is the server's device 2
    bad = s.run("device_query", GPUSHIM_DEVICES="7")
    assert bad.returncode != 0
    assert "GPUSHIM_DEVICES names '7'" in bad.stderr


def test_memory_copies_memset_2d_pinned_attributes(server):
    r = server.run("memory")
    assert r.returncode == 0, r.stderr
    v = kv(r.stdout)
    assert v["attr.device type"] == "2 device=0 ptr_ok=1"
    assert v["attr.pinned type"] == "1 host_ok=1"
    assert v["attr.plain type"] == "0"
    assert v["reserved"] == "1,1"
    assert v["3d"] == "ok pitch=512"  # device ranges are inaccessible mappings in the application
    assert v["hostalloc flags"] == "1"
    assert r.stdout.strip().endswith("OK")


def test_streams_events_callbacks(server):
    r = server.run("streams")
    assert r.returncode == 0, r.stderr
    v = kv(r.stdout)
    assert v["flags"] == "1 prio=-5 (range 0..-5)"
    assert v["elapsed_nonneg"] == "1"
    assert v["order"] == "1,2,3,"  # host functions ran in stream order, each before the next work
    assert v["cross_stream"] == "1"
    assert v["query_pending"] == "600,600 query_after=0,0"  # cudaErrorNotReady while the host function runs
    assert v["callback_without_sync"] == "1"
    assert v["per_thread"] == "1"
    assert r.stdout.strip().endswith("OK")


def test_error_codes_of_a_real_gpu(server):
    r = server.run("errors", "launch")
    assert r.returncode == 0, r.stderr + r.stdout
    v = kv(r.stdout)
    assert v["name"] == "cudaErrorInvalidValue string=invalid argument"
    assert v["unknown"] == "unrecognized error code"


def test_threads_and_fork(server):
    r = server.run("threads_fork")
    assert r.returncode == 0, r.stderr
    v = kv(r.stdout)
    assert v["threads_ok"] == "8/8"
    assert v["child"] == "23"
    assert v["parent"] == "66 child_status=0"
    assert r.stdout.strip().endswith("OK")


@emulator_only
@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_kernel_reaches_peer_memory_only_with_peer_access(make_server, monkeypatch, engine):
    # CUDA Programming Guide, "Peer-to-Peer Memory Access": after cudaDeviceEnablePeerAccess a kernel may use
    # the peer device's pointers; without peer access (never enabled, or disabled again) that is an error.
    monkeypatch.setenv("GPUSHIM_PTX_ENGINE", engine)  # the server process inherits it
    s = make_server("--emulate-devices", "2")
    r = s.run("peer_kernel", "enabled")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "kernel on device 0 read and wrote device 1's memory: 777 elements ok" in r.stdout
    for mode in ("none", "disabled"):
        r = s.run("peer_kernel", mode)
        assert r.returncode == 0, r.stderr + r.stdout
        assert f"peer access {mode}: kernel cudaErrorIllegalAddress" in r.stdout
        assert "ld.global.u32 (line 46): 4 bytes out of bounds" in r.stderr  # the load of device 1's memory


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_device_heap_persists_across_launches_with_peer_access(make_server, monkeypatch, engine):
    # CUDA Programming Guide, "Dynamic Global Memory Allocation and Operations": memory from device malloc()
    # persists for the context's lifetime and the heap is cudaLimitMallocHeapSize. With peer access on, each
    # launch sees a new view of the memories: the heap (its blocks and its limit) must still be the device's.
    monkeypatch.setenv("GPUSHIM_PTX_ENGINE", engine)
    s = make_server("--emulate-devices", "2")
    r = s.run("peer_heap")
    assert r.returncode == 0, r.stderr + r.stdout
    v = kv(r.stdout)
    assert v["alloc"] == "1"
    assert v["sum"] == f"{4096 * 4095 // 2} expected={4096 * 4095 // 2}"  # the next launch reads the block
    assert v["limit"] == str(64 << 10)
    assert v["malloc_56KiB"] == "0"  # 16 KiB of the 64 KiB heap are still held by the first launch's block
    assert v["malloc_40KiB"] == "1"
    assert v["malloc_56KiB_after_free"] == "1"
    assert r.stdout.strip().endswith("OK")


def test_limits_stream_ordered_allocation_peers(make_server):
    s = make_server("--emulate-devices", "2")
    r = s.run("misc")
    assert r.returncode == 0, r.stderr + r.stdout
    v = kv(r.stdout)
    assert v["heap_default"] == str(8 << 20) and v["stack_default"] == "1024"
    assert v["heap_set"] == "4096 malloc_1MiB=1,0"  # the kernel's malloc honours the heap limit
    assert v["cache_config"] == "2"
    assert v["capturing"] == "0"
    assert v["malloc_async"] == "1"
    assert v["peer_copy"] == "1" and v["peer_access"] == "1"
    assert v["func_name"] == "_Z4fillPiii"
    assert r.stdout.strip().endswith("OK")


def test_managed_memory_after_a_device_allocation_overlapped_host_memory(server):
    # A device allocation whose pages overlap host memory is not reserved; the page it shares with a neighbour
    # must be released with that neighbour, or a managed allocation there later fails (EEXIST).
    r = server.run("managed_reserve")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "overlaps host memory of this process" in r.stderr  # the situation the test sets up
    assert "managed at d1: 1" in r.stdout  # the managed allocation got the once-shared page
    assert "managed after overlap ok" in r.stdout


def test_managed_memory_on_one_host(server):
    r = server.run("managed")
    assert r.returncode == 0, r.stderr + r.stdout
    v = kv(r.stdout)
    assert v["managed_kernel"] == "ok"  # host writes, a kernel updates in place, the host reads
    assert v["managed_list"] == "55"  # host-built pointers followed by a kernel
    assert v["managed_attr"] == "3"  # cudaMemoryTypeManaged
    assert v["managed_copy"] == "1"
