"""Stream capture and CUDA graphs (shim/api_capture.c, api_graph_exec.c): captured work becomes graph nodes in
the client; an executable graph is uploaded to the server and launched with one frame."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import ROOT, kv


@pytest.mark.parametrize("shm", ["1", "0"], ids=["shared-pinned", "socket-pinned"])
def test_capture_instantiate_launch(server, shm):
    r = server.run("graphs", GPUSHIM_SHM=shm)
    assert r.returncode == 0, r.stderr
    v = kv(r.stdout)
    # cudaStreamIsCapturing: None, Active (only the capturing stream), None again
    assert v["before"] == "0"
    assert v["during"] == "1 other=0"
    assert v["after"] == "0 graph=1"
    assert v["nodes"] == "5"  # memset, two kernels, two copies
    assert v["untouched"] == "1"  # nothing ran while capturing
    # Launched three times on another stream, with the device input and the pinned input changed in between
    # (the kernel keeps the struct parameter it was captured with; the graph outlives cudaGraphDestroy).
    assert v["launch0"] == "ok first=1 last=1000"
    assert v["launch1"] == "ok first=2001.5 last=3000.5"
    assert v["launch2"] == "ok first=4002 last=5001"
    assert v["relaunch"] == "ok"
    assert v["host_calls_captured"] == "0" and v["host_calls"] == "2"
    # 2D memset and copies, pageable and pinned host memory read or written when the graph runs, and a graph
    # launched inside another capture
    assert v["kinds"] == "ok nodes=4"
    # CUDA's rules: a synchronous call on a capturing stream fails with 900 and invalidates the capture
    # (status 2, later work 901), whose end returns 901 and no graph.
    assert v["sync_in_capture"] == "900 status=2 more=901 end=901 graph_null=1 after=0"
    assert v["device_sync_in_capture"] == "900 end=901"
    assert v["begin_twice"] == "401 empty_nodes=0 end_not_capturing=401 legacy=900"
    # A stream forked from the capture (it waited on an event recorded in it) that never joins back: the
    # capture ends with cudaErrorStreamCaptureUnjoined (904) (CUDA Programming Guide, "Cross-stream
    # Dependencies and Events": forked streams must be joined back into the origin stream).
    assert v["fork"] == "0 end=904"
    assert r.stdout.strip().endswith("OK")


def test_11x_abi(server, tmp_path):
    """The same program built by nvcc 11.8: cudaGraphInstantiate's 11.x ABI (error node and log buffer).
    Runs where the 11.8 toolkit and runtime are installed already (adapters/tools/toolkits.py,
    tests/fixtures/build_fixtures.py); nothing is downloaded here."""
    sys.path.insert(0, str(ROOT / "adapters" / "tools"))
    try:
        import fetch_runtimes
        import toolkits
    finally:
        sys.path.remove(str(ROOT / "adapters" / "tools"))
    nvcc = toolkits.toolkit_dir("11.8") / "bin" / "nvcc"
    lib = fetch_runtimes.CACHE / "runtimes" / "11.8" / "lib"
    if not nvcc.exists() or not lib.is_dir():
        pytest.skip("the CUDA 11.8 toolkit and runtime are not installed (adapters/tools/toolkits.py install 11.8)")
    exe = tmp_path / "graphs"
    subprocess.run([str(nvcc), *toolkits.flags("11.8"), "-O2", "-o", str(exe), "graphs.cu"],
                   cwd=ROOT / "tests" / "programs", check=True, capture_output=True, timeout=300)
    r = subprocess.run([str(exe)], env=server.env(LD_LIBRARY_PATH=str(lib)), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    v = kv(r.stdout)
    assert v["instantiate11 err_node"] == "1 log=1"
    assert v["launch2"] == "ok first=4002 last=5001"
    assert v["sync_in_capture"] == "900 status=2 more=901 end=901 graph_null=1 after=0"
    assert r.stdout.strip().endswith("OK")
