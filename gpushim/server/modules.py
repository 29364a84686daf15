"""Fat binaries uploaded by clients, kept by content hash (SHA-256) so a module crosses the wire once per
server, not once per run (DESIGN decision 6). The store is a directory shared by all sessions' workers.

An upload is checked before anything touches the disk: its size, its SHA-256 and its format (a fat binary,
an ELF cubin or PTX text). It is then written to an unnamed file (O_TMPFILE) that gets its name only once
complete, so a worker killed mid-write leaves nothing behind. The directory is bounded: beyond its size cap
the least recently used modules (by modification time, refreshed on every use) are evicted. Each session's
uploads are counted against a per-session byte and count limit (`UploadAllowance`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpushim.cuda_errors import CudaError, Err
from gpushim.fatbin.container import FATBIN_MAGIC, parse_fatbin
from gpushim.fatbin.errors import FatbinError

log = logging.getLogger("gpushim.modules")
SUFFIX = ".fatbin"
ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True)
class ModuleLimits:
    cache_bytes: int = 2 << 30  # the store's size cap (LRU eviction beyond it)
    max_module: int = 256 << 20  # the largest single upload
    session_bytes: int = 1 << 30  # what one session may upload in all
    session_uploads: int = 4096  # how many modules one session may upload (JIT compilers load thousands)


def default_module_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpushim" / "modules"


def check_format(data: bytes | memoryview) -> str:
    """The kind of a module image ('fatbin', 'elf', 'ptx'); CudaError(INVALID_KERNEL_IMAGE) when it is none."""
    head = bytes(data[:16])
    if len(head) >= 4 and int.from_bytes(head[:4], "little") == FATBIN_MAGIC:
        try:
            parse_fatbin(data, decompress=False)  # entry headers only: cheap, and bounds-checked
        except FatbinError as e:
            raise CudaError(Err.INVALID_KERNEL_IMAGE, f"the uploaded fat binary is malformed: {e}") from None
        return "fatbin"
    if head.startswith(ELF_MAGIC):
        return "elf"
    text = bytes(data[:4096])
    if b".version" in text and b".target" in text and b"\0" not in text.rstrip(b"\0"):
        return "ptx"
    raise CudaError(Err.INVALID_KERNEL_IMAGE, "the upload is not a fat binary, an ELF cubin or PTX text")


class UploadAllowance:
    """What one session may still upload. The limits bound what a session writes into the store shared by all
    sessions (files and bytes on disk), not what it holds loaded: a module it unloads stays stored, so it still
    counts. A refusal is CUDA's out-of-memory error with the reason, which the client prints (noted)."""

    def __init__(self, limits: ModuleLimits) -> None:
        self.limits = limits
        self.count = 0
        self.bytes = 0

    def charge(self, n: int) -> None:
        why = None
        if self.count + 1 > self.limits.session_uploads:
            why = (f"this session has uploaded {self.count} modules, the server's limit (--session-uploads "
                   f"{self.limits.session_uploads}; unloaded modules count too: they stay in the module store)")
        elif self.bytes + n > self.limits.session_bytes:
            why = (f"a {n}-byte upload exceeds this session's module upload limit of {self.limits.session_bytes} "
                   f"bytes ({self.bytes} uploaded; --session-upload-bytes)")
        if why:
            log.warning("module upload refused: %s", why)
            raise CudaError(Err.MEMORY_ALLOCATION, f"module upload refused: {why}", noted=True)
        self.count += 1
        self.bytes += n


class ModuleStore:
    def __init__(self, directory: Path, limits: ModuleLimits | None = None) -> None:
        self.dir = directory
        self.limits = limits or ModuleLimits()
        self.dir.mkdir(parents=True, exist_ok=True)

    def allowance(self) -> UploadAllowance:
        return UploadAllowance(self.limits)

    def _path(self, digest: bytes) -> Path:
        if len(digest) != 32:
            raise CudaError(Err.INVALID_VALUE, "a module hash is 32 bytes (SHA-256)")
        return self.dir / f"{digest.hex()}{SUFFIX}"

    def has(self, digest: bytes) -> bool:
        return self._path(digest).exists()

    def check(self, digest: bytes, data: bytes | memoryview) -> None:
        """Everything an upload must be, checked in memory (nothing is written for a rejected upload)."""
        self._path(digest)
        if len(data) > self.limits.max_module:
            raise CudaError(Err.INVALID_KERNEL_IMAGE, f"a {len(data)}-byte module exceeds this server's "
                                                      f"limit of {self.limits.max_module} bytes (--max-module-size)")
        if hashlib.sha256(data).digest() != digest:
            raise CudaError(Err.INVALID_KERNEL_IMAGE, "the uploaded fat binary does not match its SHA-256")
        check_format(data)

    def put(self, digest: bytes, data: bytes | memoryview, checked: bool = False) -> None:
        if not checked:
            self.check(digest, data)
        path = self._path(digest)
        if path.exists():
            _touch(path)
            return
        if len(data) > self.limits.cache_bytes:
            return  # larger than the whole cache: the session keeps it in memory, nothing is stored
        self._write(path, data)
        self.evict(keep=path)

    def _write(self, path: Path, data: bytes | memoryview) -> None:
        try:  # an unnamed file, linked in once complete: no partial file survives a killed worker
            fd = os.open(self.dir, os.O_TMPFILE | os.O_WRONLY, 0o600)
        except (AttributeError, OSError):
            fd = -1
        if fd >= 0:
            try:
                _write_all(fd, data)
                dfd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY)
                try:  # linkat(AT_SYMLINK_FOLLOW) (a dir fd makes Python use linkat, not link)
                    os.link(f"/proc/self/fd/{fd}", path.name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=True)
                except FileExistsError:
                    pass  # another session stored the same module meanwhile
                finally:
                    os.close(dfd)
            finally:
                os.close(fd)
            return
        fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".part")
        try:
            _write_all(fd, data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        finally:
            os.close(fd)

    def evict(self, keep: Path | None = None) -> None:
        """Deletes the least recently used modules until the store fits its cap."""
        entries = []
        total = 0
        for entry in os.scandir(self.dir):
            if not entry.name.endswith(SUFFIX):
                continue
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue  # evicted by another worker meanwhile
            entries.append((st.st_mtime_ns, entry.path, st.st_size))
            total += st.st_size
        entries.sort()
        for _, p, size in entries:
            if total <= self.limits.cache_bytes:
                break
            if keep is not None and p == str(keep):
                continue
            try:
                os.unlink(p)
                log.info("module cache over %d bytes: evicted %s (%d bytes)", self.limits.cache_bytes,
                         os.path.basename(p)[:16], size)
            except FileNotFoundError:
                pass
            total -= size

    def get(self, digest: bytes) -> bytes:
        path = self._path(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise CudaError(Err.INVALID_KERNEL_IMAGE, f"module {digest.hex()[:16]} was never uploaded "
                                                      "(or was evicted from the module cache)") from None
        _touch(path)
        return data

    def find(self, digest: bytes) -> bytes | None:
        """The module's bytes when the store holds it (and marks it used), else None."""
        try:
            return self.get(digest)
        except CudaError:
            if len(digest) != 32:
                raise
            return None


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view)
        view = view[n:]
