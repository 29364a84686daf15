"""The Makefile's shim rules: the library is rebuilt when the list of shim sources changes (a file removed leaves
every other one older than the library), and it is replaced by a rename, so a client that has the old one
mapped runs on. The library is built into tmp_path (at -O0, to keep this fast, and -Werror: the build must be
clean at -O0 too), with its own stamps, so the checkout's build is left alone."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.e2e.conftest import ROOT, Server
from tests.e2e.test_isolation import wait_line


def test_shim_rebuild_on_source_list_change_keeps_running_clients(server: Server, tmp_path: Path) -> None:
    lib = tmp_path / "libgpushim.so"
    sources = tmp_path / "sources"
    make = ["make", "-s", f"SHIM_LIB={lib}", f"SHIM_LIST={sources}", f"SHIM_STAMP={tmp_path / 'stamp'}",
            "CFLAGS=-O0", str(lib)]  # -O0 warns about more than -O2 does
    subprocess.run(make, cwd=ROOT, check=True, timeout=600)
    stop = tmp_path / "stop"
    client = server.start("hold", "1", "5", "300", str(stop), LD_PRELOAD=str(lib))
    try:
        wait_line(client, "ready", timeout=120)
        built = lib.stat().st_ino
        subprocess.run(make, cwd=ROOT, check=True, timeout=600)
        assert lib.stat().st_ino == built, "rebuilt with nothing changed"
        listed = sources.read_text()
        sources.write_text(listed.strip() + " shim/removed_since.c\n")  # as if that file had been deleted
        subprocess.run(make, cwd=ROOT, check=True, timeout=600)
        assert sources.read_text() == listed
        assert lib.stat().st_ino != built, "not rebuilt (or written over in place) when the source list changed"
    finally:
        stop.touch()
    out, err = client.communicate(timeout=120)
    assert client.returncode == 0 and "intact 5" in out, f"{client.returncode}\n{out}\n{err}"
