"""The module store checks an upload (size, SHA-256, format) before anything reaches the disk, writes it so
that no partial file can survive, keeps itself under its size cap by evicting the least recently used
modules, and counts each session's uploads."""

from __future__ import annotations

import hashlib
import os
import random
import time
from pathlib import Path

import pytest

from gpushim.cuda_errors import CudaError, Err
from gpushim.fatbin import fatbins_in_elf
from gpushim.server.modules import ModuleLimits, ModuleStore, check_format

ROOT = Path(__file__).resolve().parents[2]


def sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def ptx_module(i: int, size: int = 1000) -> bytes:
    text = f"// module {i}\n.version 8.0\n.target sm_90\n.address_size 64\n".encode()
    return text + b"//" + b"x" * (size - len(text) - 3) + b"\n"


def files(d: Path) -> list[str]:
    return sorted(os.listdir(d))


def test_rejected_uploads_leave_nothing_on_disk(tmp_path: Path) -> None:
    store = ModuleStore(tmp_path / "m")
    rng = random.Random(11)
    for i in range(20):
        garbage = rng.randbytes(256 << 10)
        if i % 4 == 0:  # a fat binary's magic with a payload it does not have
            garbage = (0xBA55ED50).to_bytes(4, "little") + (1).to_bytes(2, "little") + (16).to_bytes(2, "little") \
                + (1 << 40).to_bytes(8, "little") + garbage
        with pytest.raises(CudaError) as e:
            store.put(sha(garbage), garbage)
        assert e.value.code == Err.INVALID_KERNEL_IMAGE
    with pytest.raises(CudaError):
        store.put(sha(b"other"), ptx_module(1))  # a hash that does not match
    assert files(tmp_path / "m") == []


def test_size_limit_and_formats(tmp_path: Path) -> None:
    store = ModuleStore(tmp_path / "m", ModuleLimits(max_module=4096))
    big = ptx_module(1, 5000)
    with pytest.raises(CudaError, match="max-module-size"):
        store.put(sha(big), big)
    assert check_format(ptx_module(2)) == "ptx"
    assert check_format(b"\x7fELF" + b"\0" * 60) == "elf"
    binary = ROOT / "tests" / "programs" / "bin" / "quota"
    if binary.exists():
        fatbin = fatbins_in_elf(binary)[-1]
        assert check_format(fatbin) == "fatbin"
    assert files(tmp_path / "m") == []


def test_cap_evicts_the_least_recently_used(tmp_path: Path) -> None:
    store = ModuleStore(tmp_path / "m", ModuleLimits(cache_bytes=2500))
    a, b, c = (ptx_module(i) for i in range(3))
    store.put(sha(a), a)
    time.sleep(0.02)
    store.put(sha(b), b)
    time.sleep(0.02)
    assert store.get(sha(a)) == a  # a is used again: b is now the least recently used
    time.sleep(0.02)
    store.put(sha(c), c)
    assert store.has(sha(a)) and store.has(sha(c)) and not store.has(sha(b))
    assert sum(p.stat().st_size for p in (tmp_path / "m").iterdir()) <= 2500
    with pytest.raises(CudaError, match="evicted"):
        store.get(sha(b))
    assert store.find(sha(b)) is None


def test_per_session_upload_limits(tmp_path: Path) -> None:
    store = ModuleStore(tmp_path / "m", ModuleLimits(session_bytes=2500, session_uploads=3))
    one = store.allowance()
    one.charge(1000)
    one.charge(1000)
    with pytest.raises(CudaError) as e:
        one.charge(1000)  # 3000 bytes > 2500
    assert e.value.code == Err.MEMORY_ALLOCATION
    one.charge(100)
    with pytest.raises(CudaError, match="session-uploads"):
        one.charge(1)  # a fourth module
    store.allowance().charge(1000)  # another session has its own allowance
