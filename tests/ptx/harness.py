"""Test helpers: compile kernels with nvcc -ptx (cached), place module globals, pack parameters, launch."""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np

from gpushim.backends.emulator.memory import DeviceMemory
from gpushim.ptx import load_module

HERE = Path(__file__).parent
KERNELS = HERE / "kernels"
BUILD = HERE / "build"
NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
# the PTX engine of Dev.launch ("interp" or "jit"), set per test by conftest.py's engine fixture
ENGINE = {"name": "auto"}
# per engine, kernels launched through Dev and whether the JIT ran them: {(kernel, "jit"|"fallback")}
LAUNCHED: set[tuple[str, str]] = set()


def compile_ptx(name: str, arch: str = "sm_75", extra: tuple[str, ...] = ()) -> str:
    """PTX of tests/ptx/kernels/<name>.cu; $PTX_TEST_NVCC_FLAGS (e.g. "-G") adds flags to every build."""
    extra = tuple(extra) + tuple(os.environ.get("PTX_TEST_NVCC_FLAGS", "").split())
    src = KERNELS / f"{name}.cu"
    text = src.read_bytes()
    key = hashlib.sha256(text + arch.encode() + " ".join(extra).encode()).hexdigest()[:16]
    out = BUILD / f"{name}.{arch}.{key}.ptx"
    if not out.exists():
        BUILD.mkdir(exist_ok=True)
        tmp = out.with_suffix(".tmp")
        subprocess.run(
            [NVCC, "-ptx", f"-arch={arch}", *extra, str(src), "-o", str(tmp)], check=True, capture_output=True
        )
        tmp.replace(out)
    return out.read_text()


class Dev:
    """A device memory with a loaded module: allocate arrays, launch kernels, collect printf output."""

    def __init__(self, ptx: str, capacity: int = 1 << 30) -> None:
        self.mem = DeviceMemory(capacity)
        self.mod = load_module(ptx)
        self.out: list[bytes] = []
        self.symbols: dict[str, int] = {}
        for g in self.mod.globals.values():
            a = self.mem.alloc(g.size, kind="symbol")
            self.mem.write(a, g.init)
            self.symbols[g.name] = a

    def array(self, a: np.ndarray) -> int:
        a = np.ascontiguousarray(a)
        p = self.mem.alloc(a.nbytes)
        self.mem.write(p, a.tobytes())
        return p

    def empty(self, nbytes: int) -> int:
        p = self.mem.alloc(nbytes)
        self.mem.fill(p, 0, nbytes)
        return p

    def get(self, p: int, dtype, count: int) -> np.ndarray:
        dt = np.dtype(dtype)
        return np.frombuffer(bytes(self.mem.read(p, dt.itemsize * count)), dt).copy()

    def pack(self, kernel: str, *args) -> bytes:
        info = self.mod.kernels[kernel]
        buf = bytearray(info.param_bytes)
        for p, a in zip(info.params, args, strict=True):
            if isinstance(a, bytes):
                b = a
            elif isinstance(a, float) or isinstance(a, np.floating):
                b = struct.pack("<d" if p.size == 8 else "<f", float(a))
            elif isinstance(a, np.generic):
                b = a.tobytes()
            else:
                b = int(a).to_bytes(p.size, "little", signed=int(a) < 0)
            assert len(b) == p.size, (kernel, p, a)
            buf[p.offset : p.offset + p.size] = b
        return bytes(buf)

    def launch(self, kernel: str, grid, block, *args, shared: int = 0):
        grid = tuple(grid) + (1,) * (3 - len(grid)) if isinstance(grid, tuple) else (grid, 1, 1)
        block = tuple(block) + (1,) * (3 - len(block)) if isinstance(block, tuple) else (block, 1, 1)
        self.mod.engine = ENGINE["name"]
        if self.mod.engine != "interp" and kernel in self.mod._compiled:
            LAUNCHED.add((kernel, "jit" if self.mod.jit_kernel(kernel) is not None else "fallback"))
        return self.mod.launch(
            kernel, grid, block, shared, self.pack(kernel, *args), self.mem, self.symbols, self.out.append
        )

    def launch_raw(self, kernel: str, grid, block, shared: int, params: bytes, mem=None, symbols=None, out=None):
        """PtxModule.launch as it is (dimensions, parameter bytes, memory and symbols passed through unchecked),
        on this test's engine: the module keeps the engine of its last launch, which may be another test's."""
        self.mod.engine = ENGINE["name"]
        return self.mod.launch(
            kernel, grid, block, shared, params,
            self.mem if mem is None else mem, self.symbols if symbols is None else symbols,
            self.out.append if out is None else out,
        )

    def text(self) -> str:
        return b"".join(self.out).decode()


def assert_compiled_as_configured(dev: Dev, kernel: str) -> None:
    """The kernel ran on the JIT (no fallback), by the code generator and tier dev.config = (GPUSHIM_PTX_JIT_T1,
    GPUSHIM_PTX_JIT_TIER2) asked for: tier 2 ran it when the second is "now"."""
    from gpushim.ptx.jit import kernel as jit_kernel

    assert jit_kernel.fallback_reason(dev.mod.source_hash, kernel) is None
    jk = dev.mod.jit_kernel(kernel)
    assert jk is not None
    t1, tier2 = dev.config
    assert (jk.tier2_runs > 0) == (tier2 == "now")
    if t1 != "auto":
        assert jk.t1.codegen == t1
