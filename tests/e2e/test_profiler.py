"""Profiler calls are no-ops that succeed (no profiler runs under gpushim): the runtime's cudaProfilerStart/Stop
(tests/programs/textures.cu, part "profiler") and the driver's cuProfilerStart/Stop, also found through
cuGetProcAddress (tests/programs/drv_profiler.c)."""

from __future__ import annotations

from .conftest import kv


def test_runtime_profiler_calls_succeed(server):
    r = server.run("textures", "profiler")
    assert r.returncode == 0, r.stdout + r.stderr
    assert kv(r.stdout)["profiler"] == "ok"
    assert "not supported" not in r.stderr.lower()


def test_driver_profiler_calls_succeed(server):
    r = server.run("drv_profiler")
    assert r.returncode == 0, r.stdout + r.stderr
    assert kv(r.stdout)["profiler"] == "ok"
