"""Fat binaries uploaded by clients, kept by content hash (SHA-256) so a module crosses the wire once per
server, not once per run (DESIGN decision 6). The store is a directory shared by all sessions' workers:
a worker writes a verified upload to a temporary name and renames it into place."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from gpushim.cuda_errors import CudaError, Err

MAX_MODULE_BYTES = 1 << 30


def default_module_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpushim" / "modules"


class ModuleStore:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)

    def _path(self, digest: bytes) -> Path:
        if len(digest) != 32:
            raise CudaError(Err.INVALID_VALUE, "a module hash is 32 bytes (SHA-256)")
        return self.dir / f"{digest.hex()}.fatbin"

    def has(self, digest: bytes) -> bool:
        return self._path(digest).exists()

    def put(self, digest: bytes, data: bytes) -> None:
        if len(data) > MAX_MODULE_BYTES:
            raise CudaError(Err.INVALID_KERNEL_IMAGE, f"a {len(data)}-byte fat binary exceeds the 1 GiB limit")
        if hashlib.sha256(data).digest() != digest:
            raise CudaError(Err.INVALID_KERNEL_IMAGE, "the uploaded fat binary does not match its SHA-256")
        path = self._path(digest)
        if path.exists():
            return
        fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".part")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)

    def get(self, digest: bytes) -> bytes:
        path = self._path(digest)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise CudaError(Err.INVALID_KERNEL_IMAGE, f"module {digest.hex()[:16]} was never uploaded") from None
