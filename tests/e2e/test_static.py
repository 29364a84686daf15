"""nvcc's default builds (the CUDA runtime linked statically, issue 13) run under gpushim like -cudart shared ones:
the static runtime reaches gpushim through its libcuda.so.1, cuGetProcAddress and the driver's private tables
(cuGetExportTable, shim/drv_export*.c). The programs are tests/programs/bin/static/* (Makefile); the same
assertions as the shared builds' tests run on them."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import test_runtime, test_sync
from .conftest import BIN, Server, emulator_only, kv
from .test_kernels import check_kernel_program


class StaticBuilds:
    """A server whose run() runs the static build of a test program."""

    def __init__(self, server: Server) -> None:
        self._server = server

    def __getattr__(self, name: str):
        return getattr(self._server, name)

    def run(self, program: str, *args: str, **kw) -> subprocess.CompletedProcess:
        return self._server.run(f"static/{program}", *args, **kw)


def test_export_tables_answer_and_refuse(server):
    r = server.run("drv_export")
    assert r.returncode == 0, r.stderr + r.stdout
    v = kv(r.stdout)
    assert v["cudart_interface.size"] == "80"  # slot 0 of a table is its size in bytes (10 slots)
    assert v["tools_tls.size"] == "32" and v["integrity.size"] == "24"
    assert v["primary_same"] == "1"  # the runtime's primary context is the driver face's
    assert v["cls.get"] == "1" and v["checks"] == "0,0"
    # a slot gpushim cannot honour is an error naming the table and slot, not a crash
    assert v["tools_tls.slot1"] == "801"
    assert "TOOLS_TLS slot 1 is not supported by gpushim" in r.stderr
    # integrity check versions ending in 0 and 1 answer constants; newer ones a keyed hash of the call
    assert v["integrity.13000"] == "3341181c03cb675c8ed383aa1f4cd1e8"
    assert v["integrity.12081"] == "1841181c03cb675c8ed383aa1f4cd1e8"
    assert v["integrity.keyed_depends_on_time"] == "1"
    assert "01020300000000000000000000000000): gpushim offers no such table" in r.stderr
    assert r.stdout.strip().endswith("OK")


@emulator_only
def test_static_device_query_equals_the_shared_build(make_server):
    server = make_server("--memory-cap", "1T")
    shared, static = server.run("device_query"), server.run("static/device_query", GPUSHIM_LOG="2")
    assert static.returncode == 0, static.stderr
    assert kv(static.stdout) == kv(shared.stdout)  # every property, attribute and version the same
    assert kv(static.stdout)["runtime"] == "13000"
    # the server learns the runtime version the program was built with (from its driver look-ups)
    assert "as a CUDA 13000 client" in static.stderr
    # the static runtime passed the integrity check: its keyed version was asked and answered
    assert "INTEGRITY_CHECK(13002)" in static.stderr


def test_static_memory(server):
    test_runtime.test_memory_copies_memset_2d_pinned_attributes(StaticBuilds(server))


def test_static_streams_events_callbacks(server):
    test_runtime.test_streams_events_callbacks(StaticBuilds(server))


def test_static_kernels(server):
    r = server.run("static/kernels")
    out = r.stdout
    # everything up to cudaFuncGetAttributes on a host function runs as in the shared build (test_kernels.py)
    v = kv(out)
    for check in ("template_float", "template_double", "struct_by_value", "streams_events_dynshared"):
        assert v[check] == "ok", check
    assert v["constant_memory"] == "ok counter=10000"
    assert v["symbol_address"] == "ok size=1024"
    assert v["func_attrs maxThreads"] == "1024 ptx=1"
    assert v["occupancy_positive"] == "1"


# Why this fails (traced with gdb in static/kernels): the CUDA 13 static runtime looks the pointer up among its
# registered kernels; cudaFuncGetAttributes passes a pointer it does not know to cuKernelGetFunction as a
# cudaKernel_t (its lookup returns 98 itself only for NULL, or when its caller asks for registered kernels only)
# and returns the driver's CUresult unchanged: its CUresult -> cudaError map there is the identity. No CUresult
# is 98, so the runtime reports cudaErrorInvalidDeviceFunction only if a driver answers 98, which no driver
# documentation says. A public report from a real GPU (NVIDIA/cutlass#2478: cudaFuncSetAttribute of a function
# the runtime does not know gives "invalid resource handle") matches what gpushim answers (400).
@pytest.mark.xfail(strict=True, reason="the CUDA 13 static runtime hands a host function it does not know to "
                   "cuKernelGetFunction as a cudaKernel_t and returns the driver's code unchanged; a driver can "
                   "only give 98 there with an undocumented code (real GPUs seem to give 400, as gpushim does)")
def test_static_kernels_whole_program(server):
    check_kernel_program(server.run("static/kernels"))


@pytest.fixture(scope="module")
def sync_server(tmp_path_factory, built: Path) -> Iterator[tuple[Server, int]]:
    s = Server(tmp_path_factory.mktemp("static_sync"))
    yield s, 1
    s.stop()


@pytest.mark.parametrize("case", [
    test_sync.test_sync_h2d_from_pinned_memory_has_read_it,
    test_sync.test_sync_h2d_is_ordered_after_earlier_stream_work,
    test_sync.test_legacy_stream_waits_do_not_wait_for_non_blocking_streams,
    test_sync.test_d2h_on_a_blocking_stream_waits_for_legacy_work,
], ids=lambda f: f.__name__.removeprefix("test_"))
def test_static_sync(sync_server, case):
    case(sync_server, "static/sync")


def test_static_builds_exist(built):
    for name in ("device_query", "memory", "streams", "sync", "kernels"):
        assert (BIN / "static" / name).exists(), name


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bin"
# the tables each static runtime asks for (observed; adapters/cudadrv/export_tables.json)
OLD_TABLES = {"CUDART_INTERFACE", "TOOLS_RUNTIME_CALLBACK_HOOKS", "TOOLS_TLS", "CONTEXT_LOCAL_STORAGE",
              "INTEGRITY_CHECK"}


@pytest.mark.parametrize("version,tables", [("11.8", OLD_TABLES), ("12.4", OLD_TABLES | {"CONTEXT_CHECKS"})])
def test_old_static_runtime(server, version, tables):
    """The 11.8 and 12.4 static runtimes: tests/programs/kernels built by nvcc 11.8 / 12.4 with its default
    -cudart static (tests/fixtures, static_e2e_kernels; the archive comes from Debian's nvidia-cuda-dev through
    adapters/tools/toolkits.py static) passes every check of the shared builds, cudaFuncGetAttributes of a host
    function included (cudaErrorInvalidDeviceFunction: these runtimes do not take it for a cudaKernel_t)."""
    exe = FIXTURES / version / "static_e2e_kernels"
    if not exe.exists():
        pytest.skip(f"no {exe} (tests/fixtures/build_fixtures.py {version} --only=static_e2e_kernels builds it)")
    r = subprocess.run([str(exe)], env=server.env(GPUSHIM_LOG="2"), capture_output=True, text=True, timeout=300)
    check_kernel_program(r)
    asked = set(re.findall(r"cuGetExportTable\([0-9a-f]{32}\): ([A-Z_]+)$", r.stderr, re.M))
    assert asked == tables
    major, minor = map(int, version.split("."))
    v = major * 1000 + minor * 10
    assert f"INTEGRITY_CHECK({v + 2})" in r.stderr  # the keyed hash, which the runtime checks
    # the server learns the version the program was built with (11.8 connects after a 11.7 look-up)
    assert f"as a CUDA {v} client" in r.stderr or f"told the server this is a CUDA {v} client" in r.stderr
    assert f"client runtime: CUDA {v} (learned" in server.log.read_text() or f"CUDA runtime {v}," in \
        server.log.read_text()
