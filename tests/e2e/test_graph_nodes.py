"""CUDA graphs built node by node, updated, captured across streams, with memory nodes
(tests/programs/graphs_nodes.cu), and the cost of a launch: one frame (shim/api_graph_exec.c,
gpushim/server/ops_graph.py)."""

from __future__ import annotations

import subprocess

import pytest

from .conftest import BACKEND, BIN, kv


def test_graph_nodes(server, tmp_path):
    dot = tmp_path / "graph.dot"
    r = server.run("graphs_nodes", str(dot))
    assert r.returncode == 0, r.stderr
    v = kv(r.stdout)
    # memset, memcpy (H2D), kernel, host, child graph, empty, memcpy (D2H), event record: cudaGraphNodeType
    # values 2, 1, 0, 3, 4, 5, 1, 7; two roots; eight edges.
    assert v["build nodes"] == "8 roots=2 edges=8 types=2,1,0,3,4,5,1,7"
    # cudaGraphKernelNodeGetParams gives the function, the configuration and the argument values back
    assert v["kernel_params func"] == "1 grid=4 block=64 n=256"
    assert v["child_nodes"] == "1 event=1"
    # c = 2 * (7 + b): the memset (4-byte elements), the copy in, the kernel, the child graph's kernel ran in
    # dependency order; the host node ran once; the event record node completed (cudaEventQuery 0)
    assert v["every_type"] == "ok host_calls=1 event=0"
    assert v["exec_flags"] == "0"
    assert v["set_event"] == "1"
    # cudaGraphDebugDotPrint: the eight nodes, the child graph's kernel and the eight edges
    text = dot.read_text()
    assert text.startswith("digraph") and text.count("[label=") == 9 and text.count("->") == 8
    assert "kernel" in text and "event_record" in text
    assert v["find_in_clone"] == "1"
    # a memcpy node reads pageable host memory when the graph runs (CUDA Programming Guide, "CUDA Graphs":
    # node parameters are pointers; the data is whatever they point to at execution)
    assert v["relaunch"] == "ok host_calls=2"
    # a copy node reads host memory after the host node before it wrote it
    assert v["host_then_copy"] == "50,65"
    # cudaGraphAddNode with cudaGraphNodeParams (memset, kernel) and a 3D copy node between pitched buffers
    assert v["add_node box"] == "3,3,3,3,3,42,3,3,3,3,3,3,3,3,3,3"
    # nodes added before their edges (cudaGraphAddDependencies): the launch follows the edges, not the order
    # the nodes were added in
    assert v["diamond x"] == "42,84,420,504 deps=2 dependents=2 roots=1 root_is_a=1 edges=4"
    assert v["cycle"] == "1"
    # cudaGraphExecKernelNodeSetParams and cudaGraphExecUpdate change what later launches do
    assert v["exec_set x"] == "9,18,90,108"
    assert v["exec_node_set x"] == "11,22,110,132"
    assert v["update"] == "0 x=5,10,50,60"
    # another topology: cudaErrorGraphExecUpdateFailure (910), cudaGraphExecUpdateErrorTopologyChanged (2)
    assert v["update_topology"] == "910 result=2"
    # fork/join capture: both streams report the same capture and graph; the forked stream's dependency is
    # the kernel captured before the fork; the graph has the diamond's four nodes and edges, and the
    # forked stream stops capturing when the origin ends the capture
    assert v["capture_info s"] == "1 s2=1 same_id=1 same_graph=1 s2_deps=1 s2_dep_type=0"
    assert v["fork_join nodes"] == "4 edges=4 x=1,2,3,5 s2_after=0"
    # cudaStreamUpdateCaptureDependencies(..., cudaStreamSetCaptureDependencies) with no nodes: the next
    # captured kernel is a second root
    assert v["update_deps roots"] == "2 edges=1"
    assert v["capture_to_graph same"] == "1 nodes=2 edges=1 x1=8"
    # cudaMallocAsync / cudaFreeAsync in a capture: MemAlloc (10) and MemFree (11) nodes; the memory stays
    # usable across launches of the executable graph after the graph is destroyed
    assert v["mem_nodes types"] == "10,2,0,1,11 result=ok"
    # a user object moved into a graph: its clone and executable graph keep it; the destructor runs when the
    # last of them is destroyed, and the object is gone then (cudaErrorInvalidValue)
    assert v["user_object after_graphs"] == "0 after_exec=1 gone=1"
    # bad input: cudaErrorInvalidValue (1) each; an external semaphore node: cudaErrorNotSupported (801), named
    assert v["bad null_graph"] == ("1 foreign_dep=1 dup_dep=1 wrong_type=1 null_params=1 ext_sem=801 "
                                   "exec_foreign=1 host_memset=1")
    assert "node type 8" in r.stderr
    assert v["destroyed launch"] == "1 graph=1"
    assert r.stdout.strip().endswith("OK")


def _line(proc) -> str:
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    return line.strip()


def test_graph_launch_is_one_frame(server):
    """100 launches of an uploaded graph reach the server as 100 calls (plus the synchronize that follows)."""
    p = subprocess.Popen([str(BIN / "graphs_nodes"), "count"], env=server.env(), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _line(p) == "phase=ready"
        before = server.session_of(p.pid)
        p.stdin.write("\n")
        p.stdin.flush()
        assert _line(p) == "phase=launched"
        after = server.session_of(p.pid)
        p.stdin.write("\n")
        p.stdin.flush()
        assert _line(p) == "count=101"  # the first launch and 100 more
        assert p.wait(30) == 0
    finally:
        if p.poll() is None:
            p.kill()
    assert after["calls"] - before["calls"] == 101


def test_kernel_nodes_with_extra(server):
    """Runtime-face kernel nodes whose arguments come packed in cudaKernelNodeParams.extra
    (tests/programs/graphs_extra.cu)."""
    r = server.run("graphs_extra")
    assert r.returncode == 0, r.stdout + r.stderr
    v = kv(r.stdout)
    # the node holds the argument values it was given (a = 2, not the 50 written after), given back as
    # kernelParams by cudaGraphKernelNodeGetParams
    assert v["get_params"] == "1,2,128"
    # y = 2x, then y += 1x (the cudaGraphAddNode node)
    assert v["extra"] == "0,3,381"
    # cudaGraphExecKernelNodeSetParams with extra: the first node now adds 10x (3x + 11x)
    assert v["exec_set"] == "14,1778"
    # a buffer smaller than the parameters, both kernelParams and extra, no buffer pointer (CUDA Runtime API,
    # cudaKernelNodeParams: "either kernelParams or extra"): cudaErrorInvalidValue, nothing added
    assert v["bad"] == "cudaErrorInvalidValue,cudaErrorInvalidValue,cudaErrorInvalidValue nodes=2"


@pytest.mark.skipif(BACKEND != "emulator", reason="device graph launch runs on the emulator's device runtime")
def test_device_graph_launch(server):
    """A graph instantiated with cudaGraphInstantiateFlagDeviceLaunch, launched by a kernel of a host-launched
    graph (CUDA Programming Guide, "Device Graph Launch"; tests/programs/graphs_devlaunch.cu)."""
    r = server.run("graphs_devlaunch")
    assert r.returncode == 0, r.stdout + r.stderr
    v = kv(r.stdout)
    # the device graph is x += 1 then x *= 2, in that order: fire and forget (0 -> 2), tail launch (2 -> 6),
    # cudaGraphLaunch returning cudaSuccess in the kernel each time
    assert v["fire_and_forget"] == "0,2 seen=-1"
    # a tail launch runs after the whole launching graph: its node after the launcher saw x = 2
    assert v["tail"] == "0,6 seen=2"
    # the same executable graph launched from the host
    assert v["host_launch"] == "14"
    # cudaGraphLaunch in device code of a graph instantiated for the host only; a host node in a graph
    # instantiated for device launch (device graphs hold kernels, memsets and copies)
    assert v["not_for_device"] == "cudaErrorInvalidValue"
    assert v["host_node"] == "cudaErrorInvalidValue"
    assert "graphs devlaunch ok" in r.stdout
