"""The command line: run (embedded server, exit status), status, shim-path, devices, bad arguments, and
a client with no server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from .conftest import BIN, ROOT, SHIM, emulator_only, kv


def gpushim(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpushim", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=timeout)


def no_server_env(tmp_path) -> dict:
    env = dict(os.environ)
    env["GPUSHIM_SERVER"] = f"unix://{tmp_path}/none.sock"
    return env


@emulator_only
def test_run_starts_embedded_server_and_returns_exit_status(built, tmp_path):
    env = no_server_env(tmp_path)
    r = gpushim("run", "--emulate-gpu", "a100", "--", str(BIN / "device_query"), env=env)
    assert r.returncode == 0, r.stderr
    assert kv(r.stdout)["dev0.name"] == "NVIDIA A100-SXM4-40GB"
    r = gpushim("run", "--", "sh", "-c", "exit 7", env=env)
    assert r.returncode == 7
    static = ROOT / "tests" / "fixtures" / "bin" / "13.0" / "static_kernels"
    r = gpushim("run", "--", str(static), env=env)  # nvcc's default build: the runtime linked statically (issue 13)
    assert r.returncode == 0, r.stderr + r.stdout
    assert kv(r.stdout)["sum"] == kv(r.stdout)["sum.want"] and "statically" not in r.stderr
    r = gpushim("run", "--", str(tmp_path / "missing-program"), env=env)
    assert r.returncode != 0 and "cannot run" in r.stderr
    assert not list(tmp_path.glob("*.sock"))


def test_run_uses_a_reachable_server(server):
    env = dict(os.environ, GPUSHIM_SERVER=server.url)
    r = gpushim("run", "--", str(BIN / "device_query"), env=env)
    assert r.returncode == 0, r.stderr
    assert "session 1" in server.log.read_text()


@emulator_only
def test_status_lists_sessions_and_holdings(server):
    p = server.start("hold", "4", "1", "600")  # until killed below (20 s came close on a loaded host)
    try:
        p.stdout.readline()
        r = gpushim("status", "--server", server.url, "--json")
        assert r.returncode == 0, r.stderr
        st = json.loads(r.stdout)
        assert st["devices"][0]["name"] == "NVIDIA H100 80GB HBM3"
        assert st["sessions"][0]["allocated_bytes"] == 4 << 20
        text = gpushim("status", "--server", server.url).stdout
        assert "1 session(s)" in text and "hold" in text
    finally:
        p.kill()
        p.wait()


def test_client_without_server_fails_clearly(built, tmp_path):
    env = no_server_env(tmp_path)
    env["LD_PRELOAD"] = str(SHIM)
    r = subprocess.run([str(BIN / "device_query")], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "cudaErrorNoDevice" in r.stderr
    assert r.stderr.count("no usable gpushim server") == 1
    assert "gpushim serve" in r.stderr


def test_shim_has_no_python_and_exports_three_abis(built):
    ldd = subprocess.run(["ldd", str(SHIM)], capture_output=True, text=True).stdout
    assert "python" not in ldd
    syms = subprocess.run(["objdump", "-T", str(SHIM)], capture_output=True, text=True).stdout
    for node in ("libcudart.so.11.0", "libcudart.so.12", "libcudart.so.13"):
        assert f"{node} cudaMalloc" in syms or f"({node}) cudaMalloc" in syms
    assert any(f"{v} cudaGetDeviceProperties_v2" in syms for v in ("(libcudart.so.12)", "libcudart.so.12"))
    assert " gs_" not in syms  # implementation names stay private


def test_shim_path_devices_and_bad_arguments(built, tmp_path):
    calls = [("shim-path",), ("devices", "--backend", "emulator", "--emulate-devices", "2", "--json"),
             ("devices", "--emulate-gpu", "nosuchgpu"), ("serve", "--listen", "http://x"),
             ("serve", "--listen", "tcp://0.0.0.0:0", "--backend", "emulator"),
             ("status", "--server", f"unix://{tmp_path}/none.sock"), ("serve", "--backend", "cuda"), ("run",)]
    # independent commands, each a fresh Python process (most of its time is imports): run side by side
    with ThreadPoolExecutor(max_workers=4) as pool:
        shim, devices, gpu, listen, token, status, cuda, run = pool.map(lambda a: gpushim(*a), calls)
    assert shim.stdout.strip() == str(SHIM)
    d = json.loads(devices.stdout)
    assert len(d["devices"]) == 2 and d["driver"] == 13000
    assert gpu.returncode != 0 and "unknown GPU model" in gpu.stderr
    assert listen.returncode != 0 and "listen address" in listen.stderr
    assert token.returncode != 0 and "requires --token-file" in token.stderr
    assert status.returncode != 0 and "no gpushim server" in status.stderr
    assert cuda.returncode != 0 and "--backend cuda" in cuda.stderr
    assert run.returncode == 2  # click usage error: COMMAND is required


def test_a_silent_peer_does_not_hang_the_application(built, tmp_path):
    import socket
    import time

    path = tmp_path / "silent.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)  # accepts (in the backlog) and never answers
    env = dict(os.environ, LD_PRELOAD=str(SHIM), GPUSHIM_SERVER=f"unix://{path}", GPUSHIM_CONNECT_TIMEOUT="1")
    t = time.monotonic()
    r = subprocess.run([str(BIN / "device_query")], env=env, capture_output=True, text=True, timeout=60)
    assert time.monotonic() - t < 20
    assert r.returncode == 1
    assert "no answer to the handshake within 1 s" in r.stderr
    listener.close()
