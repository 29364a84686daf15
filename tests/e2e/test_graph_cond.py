"""Conditional graph nodes end to end (tests/programs/graphs_cond.cu; CUDA C++ Programming Guide,
"Conditional Graph Nodes"): IF/ELSE, SWITCH nested in an IF body, WHILE counted down by a kernel through
cudaGraphSetConditional, cudaGraphCondAssignDefault at each launch, errors, and one frame per launch."""

from __future__ import annotations

import subprocess

from .conftest import BIN, emulator_only, kv


@emulator_only
def test_conditional_nodes(server):
    r = server.run("graphs_cond")
    assert r.returncode == 0, r.stdout + r.stderr
    v = kv(r.stdout)
    assert v["if_else"] == "302"  # flags 1, 0, 7, 0, 0: two IF bodies (+1), three ELSE bodies (+100)
    assert v["switch"] == "70"  # values 2, 0, 5, 1: bodies 2, 0, none, 1 (+40, +10, +20)
    # 10 steps then the node after the loop (+2); the default 1 enters the loop again at the second launch
    assert v["while"] == "12,0,17"
    assert v["clone"] == "6" and v["captured"] == "3"  # a cloned graph (4 steps, +2); a body filled by capture
    assert v["held"] == "0,5"  # launched behind a host function: nothing ran while it held the stream
    assert v["destroy_body"] == "1"  # cudaErrorInvalidValue: a body graph belongs to its node
    assert v["bad_flags"] == "1"
    assert v["null_graph"] == "1"
    assert v["foreign_handle"] == "1"  # a handle made for another graph
    assert v["while_two_bodies"] == "1"  # WHILE takes exactly one body
    assert v["host_in_body"] == "801"  # gpushim refuses (cudaErrorNotSupported) what CUDA does not allow there
    assert v["done"] == "1"


def _line(p: subprocess.Popen) -> str:
    line = p.stdout.readline()
    assert line, p.stderr.read()
    return line.strip()


@emulator_only
def test_conditional_graph_launch_is_one_frame(server):
    """20 launches of a graph with a WHILE node reach the server as 20 calls (and the synchronize that
    follows): the server runs the loop."""
    p = subprocess.Popen([str(BIN / "graphs_cond"), "count"], env=server.env(), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(10):
            line = _line(p)
            if line == "phase=ready":
                break
        assert line == "phase=ready"
        before = server.session_of(p.pid)
        p.stdin.write("\n")
        p.stdin.flush()
        assert _line(p) == "phase=launched"
        after = server.session_of(p.pid)
        p.stdin.write("\n")
        p.stdin.flush()
        assert _line(p) == "count_steps=60"  # 20 launches: one step and +2 each
        assert p.wait(30) == 0
    finally:
        if p.poll() is None:
            p.kill()
    assert after["calls"] - before["calls"] == 21


@emulator_only
def test_endless_while_ends_at_the_watchdog(make_server, monkeypatch):
    """A WHILE loop that would run 2^30 times: the server ends it at the kernel watchdog's limit
    ($GPUSHIM_PTX_WATCHDOG_S, here 2 s) with cudaErrorLaunchTimeout instead of holding the session forever."""
    monkeypatch.setenv("GPUSHIM_PTX_WATCHDOG_S", "2")
    server = make_server()
    r = server.run("graphs_cond", "forever", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert kv(r.stdout)["forever"] == "702"  # cudaErrorLaunchTimeout
