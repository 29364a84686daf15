"""Benchmark of the emulator's PTX engine: thread-instructions per second on wide launches.

    python bench/ptx_bench.py [--repeat N]

Compiles tests/ptx/kernels/{basic,linalg}.cu with nvcc -ptx (sm_75) and runs vectorAdd on 1M elements and the
16x16 tiled matmul at 256^2 and 512^2, checking results against numpy. Goal: >= 2e8 thread-instructions/s.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpushim.backends.emulator.memory import DeviceMemory  # noqa: E402
from gpushim.ptx import load_module  # noqa: E402

KERNELS = ROOT / "tests" / "ptx" / "kernels"


def compile_ptx(name: str, tmp: Path) -> str:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    out = tmp / f"{name}.ptx"
    subprocess.run([nvcc, "-ptx", "-arch=sm_75", str(KERNELS / f"{name}.cu"), "-o", str(out)], check=True)
    return out.read_text()


def put(mem: DeviceMemory, a: np.ndarray) -> int:
    p = mem.alloc(a.nbytes)
    mem.write(p, a.tobytes())
    return p


def get(mem: DeviceMemory, p: int, dtype, n: int) -> np.ndarray:
    return np.frombuffer(bytes(mem.read(p, np.dtype(dtype).itemsize * n)), dtype)


def run(mod, mem, kernel, grid, block, params, repeat):
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        st = mod.launch(kernel, grid, block, 0, params, mem, {}, sys.stdout.buffer.write)
        dt = time.perf_counter() - t0
        if best is None or dt < best[1]:
            best = (st, dt)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    mem = DeviceMemory(1 << 30)
    results = []
    with tempfile.TemporaryDirectory() as d:
        basic = load_module(compile_ptx("basic", Path(d)))
        linalg = load_module(compile_ptx("linalg", Path(d)))
    n = 1 << 20
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    pa, pb, pc = put(mem, a), put(mem, b), mem.alloc(4 * n)
    params = pa.to_bytes(8, "little") + pb.to_bytes(8, "little") + pc.to_bytes(8, "little") + n.to_bytes(4, "little")
    st, dt = run(basic, mem, "vectorAdd", (n // 256, 1, 1), (256, 1, 1), params, args.repeat)
    assert np.array_equal(get(mem, pc, np.float32, n), a + b)
    results.append(("vectorAdd 1M", st.thread_instructions, dt))
    for m in (256, 512):
        A = rng.standard_normal((m, m)).astype(np.float32)
        B = rng.standard_normal((m, m)).astype(np.float32)
        pA, pB, pC = put(mem, A), put(mem, B), mem.alloc(4 * m * m)
        params = b"".join(p.to_bytes(8, "little") for p in (pA, pB, pC)) + m.to_bytes(4, "little")
        st, dt = run(linalg, mem, "matmul", (m // 16, m // 16, 1), (16, 16, 1), params, args.repeat)
        C = get(mem, pC, np.float32, m * m).reshape(m, m)
        assert np.allclose(C, A.astype(np.float64) @ B, rtol=1e-3, atol=1e-3)
        results.append((f"matmul {m}x{m} (16x16 tiles)", st.thread_instructions, dt))
    print(f"{'launch':32s} {'thread-instr':>14s} {'seconds':>9s} {'thread-instr/s':>15s}")
    for name, ti, dt in results:
        print(f"{name:32s} {ti:14d} {dt:9.3f} {ti / dt:15.3e}")
    worst = min(ti / dt for _, ti, dt in results)
    print(
        f"goal >= 2.0e+08 thread-instr/s on the wide launches: {'met' if worst >= 2e8 else 'NOT met'} "
        f"(lowest {worst:.3e})"
    )


if __name__ == "__main__":
    main()
