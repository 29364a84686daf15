"""CUDA IPC memory handles between two processes using one server (shim/api_ipc.c,
gpushim/server/ops_ipc.py, gpushim/backends/emulator/ipc.py), run by tests/programs/graphs_ipc.cu."""

from __future__ import annotations

import subprocess

from .conftest import BIN, kv


def test_ipc_memory_between_processes(server):
    exporter = subprocess.Popen([str(BIN / "graphs_ipc"), "export"], env=server.env(), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = exporter.stdout.readline()
        assert first, exporter.stderr.read()
        handle, rest_of_line = kv(first)["handle"].split(" ", 1)
        # any pointer into an allocation names it (the same handle twice); CUDA refuses to open a handle in the
        # process that made it (cudaErrorInvalidContext, 201) and to export host memory (1)
        assert rest_of_line == "same=1 own=201 host=1"
        imp = server.run("graphs_ipc", "import", handle)
        assert imp.returncode == 0, imp.stderr
        w = kv(imp.stdout)
        # the importer reads the exporter's data and a kernel of its own changes it in place; cudaFree of IPC
        # memory, a forged handle, unknown flags and a second close are cudaErrorInvalidValue (1)
        assert w["open"] == "0"
        assert w["importer_read"] == "ok type=2 free=1 junk=1 flags=1 close_again=1"
        exporter.stdin.write("\n")
        exporter.stdin.flush()
        rest, err = exporter.communicate(timeout=60)
        assert exporter.returncode == 0, err
        assert kv(rest)["exporter_sees"] == "ok"
    finally:
        if exporter.poll() is None:
            exporter.kill()
    # the exporting session is gone: its handles no longer open
    late = server.run("graphs_ipc", "import", handle)
    assert kv(late.stdout)["open"] == "1"
