"""Compiled kernels on disk: the native object code MCJIT produced and what the launch driver needs, keyed by
the PTX, the kernel, the host CPU and the JIT's own source (a change to the code generator invalidates all).

$GPUSHIM_PTX_JIT_CACHE names the folder (default ~/.cache/gpushim/ptx-jit); `off` disables the disk cache.
Files are written atomically (temporary name, then rename); an unreadable or corrupt entry is ignored."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from gpushim.ptx.jit import log

_HERE = Path(__file__).parent
_version: str | None = None


def _dir() -> Path | None:
    d = os.environ.get("GPUSHIM_PTX_JIT_CACHE", "")
    if d.strip().lower() == "off":
        return None
    return Path(d) if d else Path.home() / ".cache" / "gpushim" / "ptx-jit"


def _jit_version() -> str:
    global _version
    if _version is None:
        import llvmlite
        from llvmlite import binding as llvm

        h = hashlib.sha256()
        for f in sorted(_HERE.glob("*.py")):
            h.update(f.read_bytes())
        for f in ("link.py", "nodes.py", "parser.py", "operands.py", "types.py", "../cuda_errors.py"):
            h.update((_HERE.parent / f).read_bytes())  # what shapes the code generator's input and constants
        h.update(f"{llvmlite.__version__}:{llvm.get_host_cpu_name()}:{llvm.get_host_cpu_features().flatten()}".encode())
        _version = h.hexdigest()
    return _version


def key(source_hash: str, kernel: str) -> str:
    if _dir() is None:
        return ""
    return hashlib.sha256(f"{_jit_version()}:{source_hash}:{kernel}".encode()).hexdigest()[:32]


def load(k: str) -> tuple[dict, bytes] | None:
    d = _dir()
    if d is None:
        return None
    try:
        meta = json.loads((d / f"{k}.json").read_text())
        obj = (d / f"{k}.o").read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("size") != len(obj):
        return None
    return meta, obj


def store(k: str, meta: dict, obj: bytes) -> None:
    d = _dir()
    if d is None:
        return
    try:
        d.mkdir(parents=True, exist_ok=True)
        for name, data in ((f"{k}.o", obj), (f"{k}.json", json.dumps({**meta, "size": len(obj)}).encode())):
            tmp = d / f".{name}.{os.getpid()}"
            tmp.write_bytes(data)
            tmp.replace(d / name)  # the object first: a metadata file always has its object
    except OSError as e:
        log.info("cannot write the PTX JIT's disk cache in %s: %s", d, e)
