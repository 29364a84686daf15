"""What the driver face releases before the session ends: module images on cuModuleUnload
(tests/programs/drv_unload.c) and the memory of a context made with cuCtxCreate on cuCtxDestroy
(tests/programs/drv_ctx_memory.c)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.e2e.conftest import BIN, Server


def test_module_unload_releases_the_image(tmp_path: Path, built: Path) -> None:
    """Read from the server's log: the vector-add image is loaded by two modules and a library (released
    twice: after the second module, after the library), the globals image once."""
    s = Server(tmp_path)
    try:
        p = s.run("drv_unload", str(BIN / "drv_kernels"), timeout=120)
        log = s.log.read_text()
    finally:
        s.stop()
    assert p.returncode == 0 and "unload ok" in p.stdout, f"{p.stdout}\n{p.stderr}"
    released = re.findall(r"module ([0-9a-f]{12}) unloaded", log)
    assert len(released) == 3 and len(set(released)) == 2, released
    counts = sorted(released.count(h) for h in set(released))
    assert counts == [1, 2], released  # globals once; vecadd not while a second handle held it


def test_context_destroy_frees_its_memory_streams_events_and_modules(tmp_path: Path, built: Path) -> None:
    """cuCtxDestroy (CUDA Driver API reference): "all resources allocated in the context" go. The program checks
    the handles' errors; here the server's STATUS shows its streams and events gone and its log the module's
    image released, while the primary context's stream and event stay."""
    s = Server(tmp_path)
    p = subprocess.Popen([str(BIN / "drv_ctx_memory"), str(BIN / "drv_kernels"), "pause"], env=s.env(),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdin is not None and p.stdout is not None
        assert p.stdout.readline().strip() == "phase=created", p.stderr.read() if p.stderr else ""
        created = s.session_of(p.pid)
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "phase=destroyed", p.stderr.read() if p.stderr else ""
        destroyed = s.session_of(p.pid)
        p.stdin.write("\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
        s.stop()
    assert p.returncode == 0 and "context memory ok" in out, f"{out}\n{err}"
    # created: the primary context's stream + 2 of the context's (the third was destroyed by the program)
    assert created["streams"] - destroyed["streams"] == 2, (created, destroyed)
    assert created["events"] - destroyed["events"] == 2, (created, destroyed)
    assert destroyed["streams"] >= 1 and destroyed["events"] >= 1  # the primary context's are still there
    assert len(re.findall(r"module ([0-9a-f]{12}) unloaded", s.log.read_text())) == 1  # the context's module
