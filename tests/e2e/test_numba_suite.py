"""numba-cuda's own test suite (shipped in the numba-cuda wheel) under gpushim: a curated list of its modules,
run with `python -m unittest` under the shim against a real server, must pass (code we did not write, so it
checks behaviour we did not think of). docs/numba-suite.md lists what was run, what passes and why the rest
does not. Also the regression programs for the bugs that suite found."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import BIN, CUDA_HOME, ROOT, SHIM, Server, emulator_only

DRIVER_DIR = SHIM.parent / "driver"

# Modules (or classes) of numba.cuda.tests that pass under gpushim's emulator, broad and quick (seconds each).
# The slower ones that pass too, and what fails and why, are in docs/numba-suite.md.
MODULES = [
    "cudadrv.test_cuda_driver.TestCudaDriver",  # with cuda.core's GraphBuilder (user objects, fixed)
    "cudadrv.test_events",
    "cudadrv.test_streams",
    "cudadrv.test_pinned",
    "cudadrv.test_host_alloc",  # mapped memory through cuMemcpyDtoH and cuMemGetAddressRange (fixed)
    "cudadrv.test_cuda_memory",  # cuMemHostRegister(DEVICEMAP) + cuMemHostGetDevicePointer (fixed)
    "cudadrv.test_deallocations",  # cuda.mapped / cuda.pinned context managers (fixed)
    "cudadrv.test_array_attr",
    "cudadrv.test_context_stack",
    "cudadrv.test_runtime",
    "cudadrv.test_emm_plugins",
    "cudadrv.test_select_device",
    "cudadrv.test_reset_device",
    "cudadrv.test_inline_ptx",
    "cudadrv.test_cuda_auto_context",
    "cudapy.test_idiv",
    "cudapy.test_boolean",
    "cudapy.test_freevar",
    "cudapy.test_mandel",
    "cudapy.test_blackscholes",
    "cudapy.test_typeconv",
    "cudapy.test_stream_api",
    "doc_examples.test_vecadd",
    "doc_examples.test_matmul",
    "doc_examples.test_reduction",
    "doc_examples.test_cg",  # grid.sync() links libcudadevrt (fixed)
]


@pytest.fixture(scope="module")
def nb(tmp_path_factory: pytest.TempPathFactory, built: Path) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("numba_suite"))
    yield s
    s.stop()


def _numba_suite_available() -> None:
    for mod, pip in (("numba.cuda", "numba-cuda"), ("filecheck", "filecheck")):  # numba.cuda.testing needs filecheck
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed (pip install {pip}); numba-cuda's tests need it")


def _env(nb: Server) -> dict[str, str]:
    return nb.env(LD_LIBRARY_PATH=str(DRIVER_DIR), CUDA_HOME=str(CUDA_HOME), PYTHONPATH=str(ROOT))


def test_numba_cuda_suite(nb: Server) -> None:
    """One unittest process for the whole list (numba's import and first compile cost seconds each time)."""
    _numba_suite_available()
    p = subprocess.run([sys.executable, "-W", "ignore", "-m", "unittest", "-v",
                        *(f"numba.cuda.tests.{m}" for m in MODULES)],
                       env=_env(nb), capture_output=True, text=True, timeout=900)
    out = p.stderr  # unittest reports on stderr
    bad = re.findall(r"^(?:ERROR|FAIL): (\S+) \((\S+)\)", out, re.M)
    assert p.returncode == 0 and not bad, f"failed: {bad}\n{out[-6000:]}"
    ran = re.search(r"^Ran (\d+) tests", out, re.M)
    assert ran and int(ran.group(1)) >= 100, out[-2000:]  # the list is 113 tests: the modules were found
    assert re.search(r"^OK\b", out, re.M)


def test_mapped_host_memory_as_device_memory(nb: Server) -> None:
    """cuMemHostAlloc(CU_MEMHOSTALLOC_DEVICEMAP) memory through cuMemsetD8, cuMemcpyDtoH/HtoD/DtoD and
    cuMemGetAddressRange at its device pointer (tests/programs/drv_mapped.c, which cites the driver API's
    "Unified Addressing"). numba-cuda's test_host_alloc found cuMemcpyDtoH and cuMemGetAddressRange refusing
    it."""
    p = nb.run("drv_mapped", LD_LIBRARY_PATH=str(DRIVER_DIR))
    assert p.returncode == 0, p.stdout + p.stderr
    v = dict(line.split("=", 1) for line in p.stdout.split())
    for key in ("same_pointer", "memset_seen", "dtoh", "htod", "dtod", "range", "done"):
        assert v.get(key) == "1", (key, p.stdout, p.stderr)


@emulator_only
def test_mapped_host_memory_bounds(nb: Server) -> None:
    # the emulator keeps the allocation's bounds: a copy past its end is refused, not run into other memory
    p = nb.run("drv_mapped", LD_LIBRARY_PATH=str(DRIVER_DIR))
    assert "past_end=1" in p.stdout, p.stdout + p.stderr



def test_user_objects_through_the_driver(nb: Server) -> None:
    """cuUserObjectCreate/Retain/Release and cuGraphRetainUserObject (tests/programs/drv_user_objects.c): they
    were unsupported stubs on the driver face, so cuda.core's GraphBuilder.complete() (numba-cuda's
    test_cuda_core_graph_builder_launch_user_facing) failed with CUDA_ERROR_NOT_SUPPORTED."""
    p = nb.run("drv_user_objects", LD_LIBRARY_PATH=str(DRIVER_DIR))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "alive_while_graph_holds=1" in p.stdout and "destroyed=1" in p.stdout and "done=1" in p.stdout


def _numba_program(nb: Server, script: str, *needs: str) -> subprocess.CompletedProcess:
    for mod in ("numba.cuda", *needs):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed")
    path = ROOT / "tests" / "programs" / "python" / script
    p = subprocess.run([sys.executable, "-W", "ignore", str(path)], env=_env(nb), capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    return p


def test_numba_grid_sync(nb: Server) -> None:
    """numba's cuda.cg.this_grid().sync() links libcudadevrt (cudaCGGetIntrinsicHandle, cudaCGSynchronize); the
    shim refused that archive with CUDA_ERROR_NOT_SUPPORTED (found by numba-cuda's doc_examples/test_cg)."""
    assert "grid sync ok" in _numba_program(nb, "numba_grid_sync.py").stdout


def test_numba_c_abi_void_function(nb: Server) -> None:
    """declare_device(abi="c") of a void CUDA C function: numba's prototype returns a value the definition does
    not; the PTX engine refused the call (found by numba-cuda's test_device_func.TestDeclareDeviceCABI)."""
    assert "cabi ok" in _numba_program(nb, "numba_cabi_void.py", "cffi").stdout


def test_ipc_through_the_driver(nb: Server) -> None:
    """cuIpcGetMemHandle/OpenMemHandle/CloseMemHandle and the event handles (tests/programs/drv_ipc.c): they were
    unsupported stubs on the driver face, which numba-cuda's test_ipc found (the runtime face had them)."""
    env = _env(nb)
    exporter = subprocess.Popen([str(BIN / "drv_ipc"), "export"], env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = exporter.stdout.readline()
        assert line.startswith("handle="), exporter.stderr.read()
        mem, ev, own = line.split()
        assert own == "own=201"  # CUDA_ERROR_INVALID_CONTEXT: not in the process that made the handle
        imp = subprocess.run([str(BIN / "drv_ipc"), "import", mem[len("handle="):], ev], env=env,
                             capture_output=True, text=True, timeout=120)
        assert imp.returncode == 0, imp.stderr
        assert "read=0x1234 event=0" in imp.stdout and "closed=1" in imp.stdout
        out, err = exporter.communicate("go\n", timeout=120)
        assert exporter.returncode == 0, err
        assert "exporter_sees=0x5678" in out  # the importer's write reached the exporter's allocation
    finally:
        if exporter.poll() is None:
            exporter.kill()
