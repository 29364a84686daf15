"""End-to-end fixtures: build the shim and the CUDA test programs, run a real `gpushim serve` process,
run programs under LD_PRELOAD against it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SHIM = ROOT / "gpushim" / "lib" / "libgpushim.so"
# nvcc 13: /usr/local/cuda on these machines, else $CUDA_HOME (e.g. tools/install_nvcc.sh's) or the PATH's
CUDA_HOME = Path("/usr/local/cuda") if Path("/usr/local/cuda/bin/nvcc").exists() else \
    Path(os.environ.get("CUDA_HOME") or Path(shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc").parent.parent)
NVCC = CUDA_HOME / "bin" / "nvcc"
CUDA_LIB = CUDA_HOME / ("lib64" if (CUDA_HOME / "lib64").exists() else "lib")
BACKEND = os.environ.get("GPUSHIM_TEST_BACKEND", "emulator")
# Assertions about the emulator's own model (names, sizes, fault messages) hold only there.
emulator_only = pytest.mark.skipif(BACKEND != "emulator", reason="checks the emulator's GPU model")


@pytest.fixture(scope="session", autouse=True)
def usable_backend() -> None:
    if BACKEND == "cuda":
        from gpushim.backends.probe import probe_cuda

        usable, why = probe_cuda()
        if not usable:
            pytest.skip(f"GPUSHIM_TEST_BACKEND=cuda but no usable GPU: {why}")
BIN = ROOT / "tests" / "programs" / "bin"


@pytest.fixture(scope="session")
def built() -> Path:
    """Builds libgpushim.so and tests/programs/*.cu (make is incremental)."""
    subprocess.run(["make", "-s", "shim", "programs"], cwd=ROOT, check=True)
    return BIN


class Server:
    def __init__(self, tmp: Path, *args: str, listen: str | None = None) -> None:
        self.url = listen or f"unix://{tmp}/gpushim.sock"
        self.log = tmp / "server.log"
        self._log = open(self.log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gpushim", "serve", "--listen", self.url,
             "--backend", BACKEND,
             "--log-level", "debug", "--module-cache", str(tmp / "modules"), *args],
            cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT,
        )
        self.path = Path(self.url[len("unix://"):]) if self.url.startswith("unix://") else tmp / "no-socket"
        deadline = time.monotonic() + 60
        while "listening on" not in self.log.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()  # not left running behind the failed test
                raise RuntimeError(f"server did not start:\n{self.log.read_text()}")
            time.sleep(0.05)
        if self.url.startswith("tcp://"):  # port 0: the log names the port the kernel chose
            line = next(ln for ln in self.log.read_text().splitlines() if "listening on" in ln)
            self.url = line.rsplit("listening on ", 1)[1].strip()

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env["LD_PRELOAD"] = str(SHIM)
        env["GPUSHIM_SERVER"] = self.url
        env.update(extra)
        return env

    def run(self, program: str, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / program), *args], env=self.env(**env), capture_output=True, text=True,
                              timeout=timeout)

    def start(self, program: str, *args: str, **env: str) -> subprocess.Popen:
        return subprocess.Popen([str(BIN / program), *args], env=self.env(**env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def status(self) -> dict:
        from gpushim.cli import query_status

        # the answer takes up to 2 s when workers are busy, and longer on a loaded host: the 5 s default is short
        return query_status(self.url, timeout=60)

    def session_of(self, pid: int) -> dict:
        """The STATUS entry of the client process pid (sessions of earlier tests may still be closing)."""
        [entry] = [s for s in self.status()["sessions"] if s.get("pid") == pid]
        return entry

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


@pytest.fixture
def server(tmp_path: Path, built: Path) -> Iterator[Server]:
    s = Server(tmp_path)
    yield s
    s.stop()


@pytest.fixture
def make_server(tmp_path: Path, built: Path) -> Iterator:
    started: list[Server] = []

    def make(*args: str, listen: str | None = None) -> Server:
        d = tmp_path / f"s{len(started)}"
        d.mkdir()
        s = Server(d, *args, listen=listen)
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


def kv(stdout: str) -> dict[str, str]:
    """key=value lines of a test program's output."""
    out = {}
    for line in stdout.splitlines():
        if "=" in line:
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out
