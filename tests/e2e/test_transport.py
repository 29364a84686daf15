"""Transports: TCP loopback with and without a token, and the same-host shared-memory path on and off."""

from __future__ import annotations

import subprocess
import sys

from .conftest import ROOT, kv


def test_tcp_loopback_runs_programs(make_server):
    s = make_server("--insecure-no-token", listen="tcp://127.0.0.1:0")
    assert s.url.startswith("tcp://127.0.0.1:")
    r = s.run("memory")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("OK")
    r = s.run("streams")
    assert r.returncode == 0, r.stderr
    assert kv(r.stdout)["order"] == "1,2,3,"


def test_managed_memory_needs_the_same_host(make_server):
    s = make_server("--insecure-no-token", listen="tcp://127.0.0.1:0")
    r = s.run("managed")
    assert r.returncode == 1
    assert "cudaErrorNotSupported" in r.stderr
    assert "managed memory needs the client on the server's host" in r.stderr


def test_tcp_token_is_required_and_checked(make_server, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    s = make_server("--token-file", str(token), listen="tcp://127.0.0.1:0")
    r = s.run("device_query")
    assert r.returncode == 1
    assert "refused this client: wrong or missing token" in r.stderr
    assert "refused" in s.log.read_text()
    r = s.run("device_query", GPUSHIM_TOKEN="wrong")
    assert r.returncode == 1 and "wrong or missing token" in r.stderr
    r = s.run("device_query", GPUSHIM_TOKEN_FILE=str(token))
    assert r.returncode == 0, r.stderr
    assert kv(r.stdout)["count"] == "1"
    # the status of a server with a token is only for those who hold it
    status = [sys.executable, "-m", "gpushim", "status", "--server", s.url, "--json"]
    r = subprocess.run(status, cwd=ROOT, capture_output=True, text=True, env={**s.env(), "GPUSHIM_TOKEN": "no"})
    assert r.returncode != 0 and "refused the status request" in r.stderr
    r = subprocess.run(status, cwd=ROOT, capture_output=True, text=True,
                       env={**s.env(), "GPUSHIM_TOKEN_FILE": str(token)})
    assert r.returncode == 0 and '"sessions"' in r.stdout


def test_pinned_memory_with_and_without_shared_memory(server):
    mapped = []
    for shm in ("1", "0"):
        r = server.run("memory", GPUSHIM_SHM=shm)
        assert r.returncode == 0, (shm, r.stderr)
        assert r.stdout.strip().endswith("OK")
        mapped.append(server.log.read_text().count("of the client's pinned memory"))
    # cudaMallocHost's and cudaHostAlloc's buffers and the staging ring for pageable copies were shared
    assert mapped[0] == 3
    assert mapped[1] == mapped[0]  # with GPUSHIM_SHM=0 nothing was, and the data is still right
