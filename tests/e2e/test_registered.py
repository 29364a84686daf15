"""Registered host memory that kernels reach (tests/programs/registered.cu, drv_registered.c). With the client on
the server's host, cudaHostRegister(..., cudaHostRegisterMapped) / cuMemHostRegister(..., DEVICEMAP) moves the
pages holding the range into the emulator's memory, mapped over the application's own pages: the pointer and the
data (neighbours on the same pages too) stay valid, and kernels use the device pointer from
cudaHostGetDevicePointer. That pointer differs from the host pointer, as CUDA allows where
CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM is 0 (Driver API, cuMemHostRegister)."""

from __future__ import annotations

from .conftest import BIN, SHIM, emulator_only


def _values(stdout: str) -> dict[str, str]:
    return dict(t.split("=", 1) for t in stdout.split() if "=" in t)


@emulator_only
def test_registered_memory_reached_by_kernels(server):
    r = server.run("registered")
    assert r.returncode == 0, r.stdout + r.stderr
    v = _values(r.stdout)
    expect = {
        "can_use_host_pointer": "0", "flags": "2", "data_kept": "1", "neighbours_kept": "1",
        "same_pointer": "0", "interior": "1",  # a distinct device address; interior pointers map in step
        "kernel_rw_errors": "0", "host_write_errors": "0", "neighbour": "x", "dtoh": "1",
        "shared_pages": "1", "moved": "1",  # a second registration on the same pages shares them
        "partial_overlap_refused": "1",  # one on some of them and more is not mapped
        "fork_child_private": "1", "fork_parent_kept": "1",  # a forked child's writes stay its own
        "after_unregister_errors": "0", "writable": "1", "h2": "16", "private": "1",  # data kept, pages private again
        "reregistered": "1", "file_kept": "1", "done": "1",
    }
    assert {k: v.get(k) for k in expect} == expect, r.stdout + r.stderr
    # what is not mapped says why
    assert "cudaHostRegisterMapped): it is not private anonymous read-write memory" in r.stderr
    assert "cudaHostRegisterMapped): its pages overlap another mapped registration's in part" in r.stderr
    assert "cudaHostGetDevicePointer: kernels can reach only memory" in r.stderr


@emulator_only
def test_registered_memory_over_tcp_is_pinned_only(make_server):
    s = make_server("--insecure-no-token", listen="tcp://127.0.0.1:0")
    r = s.run("registered", "tcp")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _values(r.stdout).get("tcp") == "refused", r.stdout
    assert "the client is not on the server's host (TCP)" in r.stderr


@emulator_only
def test_registered_memory_through_the_driver(server):
    r = server.run("drv_registered", str(BIN / "drv_kernels"), LD_LIBRARY_PATH=str(SHIM.parent / "driver"))
    assert r.returncode == 0, r.stdout + r.stderr
    v = _values(r.stdout)
    expect = {"can_use_host_pointer": "0", "same_pointer": "0", "kernel_rw_errors": "0", "dtoh": "1",
              "after_unregister_errors": "0", "done": "1"}
    assert {k: v.get(k) for k in expect} == expect, r.stdout + r.stderr
