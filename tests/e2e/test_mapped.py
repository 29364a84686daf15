"""Mapped pinned memory end to end (tests/programs/mapped.cu): with the client on the server's host, memory from
cudaHostAlloc(..., cudaHostAllocMapped) is emulator device memory mapped at the same address in the client, so
cudaHostGetDevicePointer returns the host pointer (CUDA C++ Programming Guide, "Mapped Memory" and "Unified
Virtual Address Space") and kernels read and write it while the host does; over TCP the device pointer is
refused with the reason."""

from __future__ import annotations

from .conftest import emulator_only, kv


@emulator_only
def test_mapped_pinned_memory_on_one_host(server):
    r = server.run("mapped")
    assert r.returncode == 0, r.stdout + r.stderr
    v = kv(r.stdout)
    assert v["flags"] == "2"  # cudaHostAllocMapped, as given
    assert v["same_pointer"] == "1"
    assert v["kernel_rw_errors"] == "0"
    assert v["host_pointer_errors"] == "0"
    assert v["attr_type"] == "1 attr_same=1"  # cudaMemoryTypeHost, device pointer == host pointer
    # the kernel signalled the host through mapped memory, then saw the host's write while it was running
    assert v["kernel_started"] == "1"
    assert v["kernel_saw"] == "107"
    assert v["reuse"] == "16"
    assert v["done"] == "1"
    # registered memory cannot be reached by kernels: refused with the reason
    assert "kernels can reach only memory allocated with cudaHostAlloc" in r.stderr


@emulator_only
def test_mapped_pinned_memory_over_tcp_is_refused(make_server):
    s = make_server("--insecure-no-token", listen="tcp://127.0.0.1:0")
    r = s.run("mapped", "tcp")
    assert r.returncode == 0, r.stdout + r.stderr
    v = kv(r.stdout)
    assert v["flags"] == "2" and v["tcp"] == "refused"
    assert "cudaHostAllocMapped" in r.stderr and "kernels cannot reach it" in r.stderr
