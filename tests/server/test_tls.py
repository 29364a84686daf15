"""TLS for TCP (issue 11 item 10): real CUDA programs over tls://127.0.0.1, the server's certificate is
verified by the shim and the CLI, and the token never crosses the wire in clear."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from certs import Certs, make_certs
from conftest import ROOT, kv

TOKEN = "tls-test-token-9f3e1c"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "pki")


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    p = tmp_path / "token"
    p.write_text(TOKEN + "\n")
    return p


@pytest.fixture
def tls_server(make_server, certs: Certs, token_file: Path):  # noqa: ANN201
    return make_server("--token-file", str(token_file), "--tls-cert", str(certs.cert), "--tls-key", str(certs.key),
                       listen=f"tls://127.0.0.1:{free_port()}")


class Recorder:
    """A TCP proxy on loopback that records every byte it forwards, both ways."""

    def __init__(self, target: tuple[str, int], host: str = "127.0.0.1") -> None:
        self.target = target
        self.seen = bytearray()
        self.lock = threading.Lock()
        self.listener = socket.create_server((host, 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                a, _ = self.listener.accept()
            except OSError:
                return
            b = socket.create_connection(self.target)
            for src, dst in ((a, b), (b, a)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                with self.lock:
                    self.seen += data
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def recorder() -> Iterator:
    made: list[Recorder] = []

    def make(url: str, host: str = "127.0.0.1") -> Recorder:
        target, _, port = url.split("://", 1)[1].rpartition(":")
        r = Recorder((target, int(port)), host)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def test_cuda_programs_run_over_tls(tls_server, certs):
    env = {"GPUSHIM_TLS_CA": str(certs.ca), "GPUSHIM_TOKEN": TOKEN}
    r = tls_server.run("memory", **env)  # copies of every kind, some of several MiB
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("OK")
    r = tls_server.run("streams", **env)
    assert r.returncode == 0, r.stderr
    assert kv(r.stdout)["order"] == "1,2,3,"
    r = tls_server.run("threads_fork", **env)  # 8 threads at once; a forked child opens its own connection
    assert r.returncode == 0, r.stderr
    assert kv(r.stdout)["threads_ok"] == "8/8" and kv(r.stdout)["parent"] == "66 child_status=0"
    # the CLI speaks TLS too, with the same trust rule
    st = subprocess.run([sys.executable, "-m", "gpushim", "status", "--server", tls_server.url, "--json"], cwd=ROOT,
                        capture_output=True, text=True, timeout=60, env={**os.environ, **env})
    assert st.returncode == 0, st.stderr
    assert '"address": "tls://127.0.0.1:' in st.stdout
    assert "Traceback" not in tls_server.log.read_text()


def test_a_server_certificate_from_another_ca_is_refused(tls_server, tmp_path):
    other = make_certs(tmp_path / "other", prefix="other-")
    for env in ({"GPUSHIM_TLS_CA": str(other.ca)}, {}):  # a wrong CA, and the system store (which lacks ours)
        r = tls_server.run("device_query", GPUSHIM_TOKEN=TOKEN, **env)
        assert r.returncode != 0
        assert "the TLS certificate of 127.0.0.1 is not trusted: unable to get local issuer certificate" in r.stderr
        assert "set GPUSHIM_TLS_CA" in r.stderr
        st = subprocess.run([sys.executable, "-m", "gpushim", "status", "--server", tls_server.url], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, env={**os.environ, **env})
        assert st.returncode != 0 and "TLS certificate is not trusted" in st.stderr
    r = tls_server.run("device_query", GPUSHIM_TOKEN=TOKEN, GPUSHIM_TLS_CA=str(tmp_path / "missing.pem"))
    assert r.returncode != 0 and "cannot load GPUSHIM_TLS_CA" in r.stderr
    assert "TLS handshake with" in tls_server.log.read_text()  # the server saw the refusals, and carries on
    assert tls_server.proc.poll() is None


def test_the_certificate_must_name_the_address(tls_server, certs, recorder):
    """The certificate names 127.0.0.1 and localhost; another address of the same server is not it."""
    port = tls_server.url.rsplit(":", 1)[1]
    r = tls_server.run("device_query", GPUSHIM_TOKEN=TOKEN, GPUSHIM_TLS_CA=str(certs.ca),
                       GPUSHIM_SERVER=f"tls://localhost:{port}")
    assert r.returncode == 0, r.stderr
    rec = recorder(tls_server.url, host="127.0.0.2")  # the same server, reached through another address
    r = tls_server.run("device_query", GPUSHIM_TOKEN=TOKEN, GPUSHIM_TLS_CA=str(certs.ca),
                       GPUSHIM_SERVER=f"tls://127.0.0.2:{rec.port}")
    assert r.returncode != 0
    assert "the TLS certificate of 127.0.0.2 is not trusted: " in r.stderr, r.stderr


def test_the_token_never_crosses_in_clear(tls_server, make_server, token_file, certs, recorder):
    rec = recorder(tls_server.url)
    r = tls_server.run("device_query", GPUSHIM_TOKEN=TOKEN, GPUSHIM_TLS_CA=str(certs.ca),
                       GPUSHIM_SERVER=f"tls://127.0.0.1:{rec.port}")
    assert r.returncode == 0, r.stderr
    assert len(rec.seen) > 1000  # the session went through the recorder
    assert TOKEN.encode() not in rec.seen and b"device_query" not in rec.seen
    # the control: over tcp:// the same recorder sees the token (so the check above can fail)
    plain = make_server("--token-file", str(token_file), listen="tcp://127.0.0.1:0")
    rec = recorder(plain.url)
    r = plain.run("device_query", GPUSHIM_TOKEN=TOKEN, GPUSHIM_SERVER=f"tcp://127.0.0.1:{rec.port}")
    assert r.returncode == 0, r.stderr
    assert TOKEN.encode() in rec.seen


def test_a_plain_tcp_client_of_a_tls_server_fails_clearly(tls_server):
    port = tls_server.url.rsplit(":", 1)[1]
    r = tls_server.run("device_query", GPUSHIM_SERVER=f"tcp://127.0.0.1:{port}")
    assert r.returncode != 0 and "no usable gpushim server" in r.stderr
    assert tls_server.proc.poll() is None
    assert "Traceback" not in tls_server.log.read_text()


def test_without_openssl_a_tls_client_fails_clearly(tls_server, certs, tmp_path):
    """The shim loads libssl only for tls:// (GPUSHIM_LIBSSL names another one); when it cannot, every call
    fails with the reason. The shim itself never links it."""
    r = tls_server.run("device_query", GPUSHIM_TOKEN=TOKEN, GPUSHIM_TLS_CA=str(certs.ca),
                       GPUSHIM_LIBSSL=str(tmp_path / "libssl.so.3"))
    assert r.returncode != 0
    assert "tls:// needs the system's OpenSSL (libssl.so.3), which cannot be loaded" in r.stderr, r.stderr
    from conftest import SHIM

    needed = subprocess.run(["readelf", "-d", str(SHIM)], capture_output=True, text=True).stdout
    assert "NEEDED" in needed and "libssl" not in needed and "libcrypto" not in needed
