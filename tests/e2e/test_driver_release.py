"""What the driver face releases before the session ends: module images on cuModuleUnload
(tests/programs/drv_unload.c) and the memory of a context made with cuCtxCreate on cuCtxDestroy
(tests/programs/drv_ctx_memory.c)."""

from __future__ import annotations

import re
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


def test_context_destroy_frees_its_memory(tmp_path: Path, built: Path) -> None:
    s = Server(tmp_path)
    try:
        p = s.run("drv_ctx_memory", timeout=120)
    finally:
        s.stop()
    assert p.returncode == 0 and "context memory ok" in p.stdout, f"{p.stdout}\n{p.stderr}"
