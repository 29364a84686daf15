"""Fixtures for the compatibility tests: the committed fixture programs (tests/fixtures/bin/<version>/), the
libcudart each needs at run time (fetched into ~/.cache/gpushim/runtimes by adapters/tools/fetch_runtimes.py),
the shim, and gpushim servers emulating drivers of several eras."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "bin"
VERSIONS = ("11.8", "12.4", "13.0")
DRIVERS = ("11.8", "12.2", "12.4", "13.0")
H100 = [{"name": "NVIDIA H100 80GB HBM3", "cc": "9.0"}]
#: programs that run on their own (the shared library and the static build are compat-check-only)
NOT_PROGRAMS = {"libvadd.so", "static_kernels"}
# Programs of the end-to-end suite built with the old toolkits (tests/e2e/test_kernels.py runs them); they print
# their own results, not the compatibility matrix's.
E2E_PROGRAMS = {"e2e_kernels", "static_e2e_kernels"}


def manifest() -> dict[str, Any]:
    return json.loads((FIXTURES / "manifest.json").read_text())


def fixture_names(programs_only: bool = True) -> list[str]:
    """'13.0/kernels' ... for every committed fixture."""
    return [k for k, v in manifest().items()
            if not programs_only or v["program"] not in NOT_PROGRAMS | E2E_PROGRAMS]


def _load_e2e_server() -> type:
    spec = importlib.util.spec_from_file_location("gpushim_tests_e2e_conftest", ROOT / "tests" / "e2e" / "conftest.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Server


Server = _load_e2e_server()


def kv(stdout: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in stdout.splitlines():
        if "=" in line:
            k, _, v = line.partition("=")
            out.setdefault(k.strip(), v.strip())
    return out


@pytest.fixture(scope="session")
def runtime_libs() -> dict[str, Path]:
    """version -> the folder holding that version's libcudart (fetched once into the user's cache)."""
    sys.path.insert(0, str(ROOT / "adapters" / "tools"))
    try:
        import fetch_runtimes
    finally:
        sys.path.remove(str(ROOT / "adapters" / "tools"))
    out: dict[str, Path] = {}
    for v in VERSIONS:
        try:
            d = fetch_runtimes.runtime_dir(v)
        except (SystemExit, subprocess.CalledProcessError, OSError) as e:
            pytest.skip(f"cannot fetch libcudart {v} (adapters/tools/fetch_runtimes.py): {e}")
        out[v] = d / "lib"
    return out


@pytest.fixture(scope="session")
def shim() -> Path:
    subprocess.run(["make", "-s", "shim"], cwd=ROOT, check=True)
    return ROOT / "gpushim" / "lib" / "libgpushim.so"


class Servers:
    """One gpushim server per emulated driver version, started on first use, stopped at the end."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.running: dict[str, Any] = {}

    def __call__(self, driver: str, *extra: str) -> Any:
        key = " ".join((driver, *extra))
        if key not in self.running:
            d = self.base / f"driver-{driver}-{len(self.running)}"
            d.mkdir()
            # --memory-cap: the emulated H100 presents its full memory, which tests compare with the model
            self.running[key] = Server(d, "--emulate-gpu", "h100", "--emulate-driver", driver, "--memory-cap", "1T",
                                       *extra)
        return self.running[key]

    def stop(self) -> None:
        for s in self.running.values():
            s.stop()


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory, shim: Path) -> Iterator[Servers]:
    s = Servers(tmp_path_factory.mktemp("compat-servers"))
    yield s
    s.stop()


def run_fixture(server: Any, libs: dict[str, Path], name: str, timeout: float = 120) -> subprocess.CompletedProcess:
    version = name.split("/")[0]
    return subprocess.run([str(FIXTURES / name)], env=server.env(LD_LIBRARY_PATH=str(libs[version])),
                          capture_output=True, text=True, timeout=timeout)
