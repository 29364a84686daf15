"""CUDA IPC memory and event handles between two processes using one server (shim/api_ipc.c,
gpushim/server/ops_ipc.py, gpushim/backends/emulator/ipc.py), run by tests/programs/graphs_ipc.cu."""

from __future__ import annotations

import subprocess

from .conftest import BIN, kv


def _popen(server, *args: str) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "graphs_ipc"), *args], env=server.env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _line(p: subprocess.Popen) -> str:
    line = p.stdout.readline()
    assert line, p.stderr.read()
    return line


def test_ipc_between_processes(server):
    exporter = _popen(server, "export")
    importer = None
    try:
        mem_handle, ev_handle, rest = kv(_line(exporter))["handle"].split(" ", 2)
        # any pointer into an allocation names it (the same handle twice); CUDA refuses to open a handle in the
        # process that made it (cudaErrorInvalidContext, 201), to export host memory (1) and an event made
        # without cudaEventInterprocess (cudaErrorInvalidResourceHandle, 400)
        assert rest == "same=1 own=201 host=1 plain_event=400 own_event=201"
        importer = _popen(server, "import", mem_handle, ev_handle)
        assert kv(_line(importer))["open"] == "0"
        # the exporter's stream is held by a host function: its event is pending in the importer too (600)
        assert kv(_line(importer))["event_query"] == "600"
        exporter.stdin.write("go\n")  # release it: the importer's cudaStreamWaitEvent returns after it
        exporter.stdin.flush()
        out, err = importer.communicate(timeout=60)
        assert importer.returncode == 0, err
        w = kv(out)
        # after the wait the importer sees the exporter's last kernel (+7); its own kernel changes the memory
        # in place; cudaFree of IPC memory, a forged handle, unknown flags and a second close are
        # cudaErrorInvalidValue (1)
        assert w["after_wait query"] == "0"
        assert w["importer_read"] == "ok type=2 free=1 junk=1 flags=1 close_again=1"
        exporter.stdin.write("done\n")
        exporter.stdin.flush()
        rest_out, err = exporter.communicate(timeout=60)
        assert exporter.returncode == 0, err
        assert kv(rest_out)["exporter_sees"] == "ok"
    finally:
        for p in (exporter, importer):
            if p is not None and p.poll() is None:
                p.kill()
    # the exporting session is gone: its handles no longer open
    late = server.run("graphs_ipc", "import", mem_handle, ev_handle)
    assert kv(late.stdout)["open"] == "1"
