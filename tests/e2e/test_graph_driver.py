"""Driver-face graph nodes (shim/drv_stream_graph.c, shim/drv_graph.c): copy nodes from CUDA_MEMCPY3D,
memory nodes, batch memory-op nodes, kernel nodes with packed `extra` arguments, cuGraphAddNode and
cuGraph(Exec)NodeSetParams of those types (tests/programs/drv_graph_mem.c), and a launch costing one frame."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import BACKEND, BIN, Server, kv

KERNELS = str(BIN / "drv_kernels")


@pytest.fixture(scope="module")
def drv(tmp_path_factory: pytest.TempPathFactory, built: Path) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("graph_driver"))
    yield s
    s.stop()


def test_driver_graph_nodes(drv: Server) -> None:
    p = drv.run("drv_graph_mem", KERNELS)
    assert p.returncode == 0, p.stdout + p.stderr
    v = kv(p.stdout)
    # cuGraphMemcpyNodeGetParams gives the CUDA_MEMCPY3D back; the node's type is CU_GRAPH_NODE_TYPE_MEMCPY (1)
    assert v["memcpy_get"] == "1024,1,1 type=1"
    # copy in, scale by 3 (the packed `extra` value when the node was made, not the 100 written after), copy
    # device to device, copy out
    assert v["copies"] == "0,3,765"
    # the copy-in node reads pageable host memory when the graph runs (now all ones)
    assert v["relaunch"] == "3,3"
    assert v["exec_set_copy"] == "3,3"
    # copy nodes into and out of a CUDA array: the 3 x 2 box from column 2, row 1 (values row * 10 + column)
    assert v["array"] == "12,14,22,0"
    # CU_GRAPH_NODE_TYPE_BATCH_MEM_OP is 12; GetParams gives the node's own copy of the operations
    assert v["batch_get"] == "4,1,7 type=12"
    # WRITE_VALUE_32 7, WRITE_VALUE_64 0x1122334455667788 (little-endian halves), then the waits they satisfy
    assert v["batch"] == "7,1122334455667788"
    # a WAIT_VALUE_32 node holds its stream: not finished and the node after it not run until another stream
    # writes the value (CUDA Driver API, "Stream Memory Operations")
    assert v["held"] == "CUDA_ERROR_NOT_READY before=0 after=5"
    # cuStreamWriteValue32/64 and cuStreamWaitValue32 captured: the graph writes the values given at capture
    assert v["captured"] == "77,aabbccdd00112233"
    # cuGraphAddNode: alloc, memset (32-bit 0x01020304 over 16 words), a write of 42 into word 1, copy out, free
    assert v["add_node nodes"] == "5 words=01020304,42,01020304"
    # cuGraphExecNodeSetParams changes the executable graph (43); cuGraphNodeSetParams only the graph (44),
    # which a new instantiation picks up (CUDA Programming Guide, "Updating Instantiated Graphs")
    assert v["node_set"] == "43"
    assert v["reinstantiated"] == "44"
    assert v["bad_input ok nodes"] == "5"
    # device graph launch (docs/graphs.md, "Device graph launch"): add_one then twice, tail-launched twice by
    # a kernel; the emulator runs it, the cuda backend refuses the instantiation
    want = "6,6,0" if BACKEND == "emulator" else "CUDA_ERROR_NOT_SUPPORTED"
    assert v["devgraph"] == want
    assert "drv graph mem ok" in p.stdout


def _line(p: subprocess.Popen) -> str:
    assert p.stdout is not None
    return p.stdout.readline().strip()


def test_driver_graph_launch_is_one_frame(drv: Server) -> None:
    """50 launches of a graph of a copy, a kernel with `extra` and two batch memory-op nodes reach the server as
    50 calls, and the cuStreamSynchronize after them one more."""
    p = subprocess.Popen([str(BIN / "drv_graph_mem"), KERNELS, "count"], env=drv.env(), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = _line(p)
        while line != "phase=ready":
            assert line, p.stderr.read() if p.stderr else ""
            line = _line(p)
        before = drv.session_of(p.pid)
        assert p.stdin is not None
        p.stdin.write("\n")
        p.stdin.flush()
        assert _line(p) == "phase=launched"
        after = drv.session_of(p.pid)
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.wait(60) == 0
    finally:
        if p.poll() is None:
            p.kill()
    assert after["calls"] - before["calls"] == 51
