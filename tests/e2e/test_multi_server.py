"""Several servers as one device list (issue 15): GPUSHIM_SERVER=url1,url2,... with servers emulating
different GPUs; kernels on every device, copies between devices of different servers (staged through the
client's multiplexer), device selection by ordinal, UUID and SERVER:ORDINAL, and bad lists refused."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.e2e.conftest import BIN, ROOT, emulator_only, kv

ARENA_B = "0x400000000000"
ARENA_C = "0x500000000000"


def _list(*servers) -> str:  # noqa: ANN002
    return ",".join(s.url for s in servers)


def _multiplexers(url: str) -> list[int]:
    ps = subprocess.run(["pgrep", "-f", f"gpushim multiplex --fd 3 {url}"], capture_output=True, text=True)
    return [int(x) for x in ps.stdout.split()]


def _running(pid: int) -> bool:
    """pid exists and is not a zombie (an orphan's zombie may wait for a reaper that never comes)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


@emulator_only
def test_two_servers_are_one_device_list(make_server) -> None:
    a = make_server("--emulate-gpu", "h100")
    b = make_server("--emulate-gpu", "a100", "--emulate-devices", "2", "--arena-base", ARENA_B)
    env = {"GPUSHIM_SERVER": _list(a, b)}
    q = a.run("device_query", **env)
    assert q.returncode == 0, q.stderr
    out = kv(q.stdout)
    assert out["count"] == "3"
    assert [out[f"dev{i}.name"] for i in range(3)] == ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB",
                                                       "NVIDIA A100-SXM4-40GB"]
    assert [out[f"dev{i}.cc"] for i in range(3)] == ["9.0", "8.0", "8.0"]
    # each server's devices sit in their own PCI domain, and cudaDeviceGetByPCIBusId finds each one back
    assert [out[f"dev{i}.pci"] for i in range(3)] == ["0000:10:00.0 back=0", "0001:10:00.0 back=1",
                                                      "0001:11:00.0 back=2"]
    r = a.run("multi_device", "1", **env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("ok")
    # one session on each server, for the same client program
    assert any("multi_device" in line and "-> worker" in line for line in a.log.read_text().splitlines())
    assert any("multi_device" in line and "-> worker" in line for line in b.log.read_text().splitlines())


@emulator_only
def test_three_servers_large_copies_and_device_selection(make_server) -> None:
    a = make_server("--emulate-gpu", "h100")
    b = make_server("--emulate-gpu", "a100", "--arena-base", ARENA_B)
    c = make_server("--emulate-gpu", "l4", "--arena-base", ARENA_C)
    env = {"GPUSHIM_SERVER": _list(a, b, c)}
    # 20 MiB per copy: more than one staged chunk (16 MiB) between each pair of servers
    r = a.run("multi_device", "20", **env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [ln.split(" cc=")[0] for ln in r.stdout.splitlines()[:3]] == [
        "dev0 name=NVIDIA H100 80GB HBM3", "dev1 name=NVIDIA A100-SXM4-40GB", "dev2 name=NVIDIA L4"]
    # by SERVER:ORDINAL, UUID and combined ordinal, in the order named
    uuid_a100 = b.status()["devices"][0]["uuid"]
    sel = a.run("multi_device", "1", GPUSHIM_DEVICES=f"2:0,GPU-{uuid_a100},0", **env)
    assert sel.returncode == 0, sel.stdout + sel.stderr
    assert [ln.split(" cc=")[0] for ln in sel.stdout.splitlines()[:3]] == [
        "dev0 name=NVIDIA L4", "dev1 name=NVIDIA A100-SXM4-40GB", "dev2 name=NVIDIA H100 80GB HBM3"]
    # a server none of whose devices is named gets no session
    only = a.run("device_query", GPUSHIM_DEVICES="1:0", **env)
    assert only.returncode == 0 and kv(only.stdout)["count"] == "1"
    for bad, why in (("7", "names '7'"), ("0,0", "twice"), ("3:0", "names '3:0'"), ("GPU-00ff", "GPU-00ff")):
        p = a.run("device_query", GPUSHIM_DEVICES=bad, **env)
        assert p.returncode != 0 and why in p.stderr, (bad, p.stderr)


@emulator_only
def test_servers_with_the_same_device_addresses_are_refused(make_server) -> None:
    a = make_server("--emulate-gpu", "h100")
    b = make_server("--emulate-gpu", "a100")  # default arena, like a's
    p = a.run("device_query", GPUSHIM_SERVER=_list(a, b))
    assert p.returncode != 0
    assert "--arena-base" in p.stderr
    # the servers are unharmed
    assert a.run("device_query").returncode == 0 and b.run("device_query").returncode == 0


def test_an_unreachable_server_in_the_list_is_a_clear_error(make_server, tmp_path) -> None:
    a = make_server()
    p = a.run("device_query", GPUSHIM_SERVER=f"{a.url},unix://{tmp_path}/nobody.sock")
    assert p.returncode != 0
    assert "server 1" in p.stderr and "nobody.sock" in p.stderr
    p = a.run("device_query", GPUSHIM_SERVER=f"{a.url},http://example")
    assert p.returncode != 0 and "http://example" in p.stderr


@emulator_only
def test_losing_one_server_fails_the_client_cleanly(make_server, tmp_path) -> None:
    a = make_server("--emulate-gpu", "h100")
    b = make_server("--emulate-gpu", "a100", "--arena-base", ARENA_B)
    stop = tmp_path / "stop"  # the client's next call comes after b stopped, however slow the host
    p = a.start("hold", "16", "7", "60", str(stop), GPUSHIM_SERVER=_list(a, b))
    try:
        assert p.stdout is not None and p.stdout.readline().startswith("ready")
        [mux] = _multiplexers(a.url)  # the client's, started by its shim
        b.stop()  # the client's other server goes away while it holds memory on the first
        stop.touch()
        out, err = p.communicate(timeout=60)
        assert p.returncode != 0
        assert "server 1" in err and b.url in err, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # the multiplexer ended with its client (it exits after telling the client, which may get there first:
    # wait for the event); the remaining server is unharmed
    deadline = time.monotonic() + 60
    while _running(mux) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(mux) and _multiplexers(a.url) == []
    assert a.run("device_query").returncode == 0


@emulator_only
def test_a_tcp_server_in_the_list_and_the_cli_with_a_list(make_server, tmp_path) -> None:
    a = make_server("--emulate-gpu", "h100")
    b = make_server("--emulate-gpu", "a100", "--arena-base", ARENA_B, "--insecure-no-token", listen="tcp://127.0.0.1:0")
    env = {"GPUSHIM_SERVER": _list(a, b)}
    r = a.run("multi_device", "1", **env)
    assert r.returncode == 0, r.stdout + r.stderr
    # `gpushim run` uses the listed servers (no embedded server), `gpushim status` shows each
    run_env = {**os.environ, "GPUSHIM_SERVER": _list(a, b)}
    q = subprocess.run([sys.executable, "-m", "gpushim", "run", "--", str(BIN / "device_query")], cwd=ROOT,
                       env=run_env, capture_output=True, text=True, timeout=120)
    assert q.returncode == 0 and kv(q.stdout)["count"] == "2", q.stdout + q.stderr
    st = subprocess.run([sys.executable, "-m", "gpushim", "status"], cwd=ROOT, env=run_env, capture_output=True,
                        text=True, timeout=60)
    assert st.returncode == 0 and "server 0:" in st.stdout and "server 1:" in st.stdout, st.stdout + st.stderr
    bad = subprocess.run([sys.executable, "-m", "gpushim", "run", "--", str(BIN / "device_query")], cwd=ROOT,
                         env={**run_env, "GPUSHIM_SERVER": f"{a.url},unix://{tmp_path}/none.sock"},
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "do not answer" in bad.stderr


@emulator_only
def test_the_runtime_test_programs_pass_through_two_servers(make_server) -> None:
    """Streams, events, host functions, memory of every kind, sync semantics and managed memory on device 0
    behave as with one server when the client's device list spans two."""
    a = make_server("--emulate-gpu", "h100")
    b = make_server("--emulate-gpu", "a100", "--arena-base", ARENA_B)
    for program in ("streams", "memory", "sync", "managed"):
        r = a.run(program, GPUSHIM_SERVER=_list(a, b))
        assert r.returncode == 0 and r.stdout.strip().endswith("OK"), (program, r.stdout[-500:], r.stderr[-500:])


@emulator_only
def test_every_server_learns_the_runtime_version(make_server) -> None:
    """The CUDA 11.8 static runtime connects after an 11.7 look-up and says 11.8 later (RUNTIME_VERSION): each
    server of the list records it, not only the first device's (tests/fixtures, as test_static.py)."""
    exe = ROOT / "tests" / "fixtures" / "bin" / "11.8" / "static_e2e_kernels"
    if not exe.exists():
        pytest.skip(f"no {exe} (tests/fixtures/build_fixtures.py 11.8 --only=static_e2e_kernels builds it)")
    a = make_server("--emulate-gpu", "h100")
    b = make_server("--emulate-gpu", "a100", "--arena-base", ARENA_B)
    r = subprocess.run([str(exe)], env=a.env(GPUSHIM_SERVER=_list(a, b), GPUSHIM_LOG="2"), capture_output=True,
                       text=True, timeout=300)
    assert "told the server this is a CUDA 11080 client (learned after connecting): ok" in r.stderr, r.stderr[-3000:]
    for s in (a, b):
        assert "client runtime: CUDA 11080 (learned after the handshake" in s.log.read_text(), s.url
