"""Benchmark of the emulator's PTX engines: the interpreter, the compiling engine (gpushim/ptx/jit) and the same
work as a plain C loop compiled with -O2, in one run.

    python bench/ptx_bench.py [--repeat N] [--cases shuffle,matmul]

Cases: vectorAdd on 1M floats (tests/ptx/kernels/basic.cu), the 16x16-tiled matmul at 512^2 (linalg.cu), a
divergent Collatz kernel, a shared-memory ring smoothed in a loop with two barriers per iteration and a
block sum with warp shuffles (bench/ptx_bench_kernels.cu). The JIT's results (both tiers) must equal the
interpreter's bit for bit. Reported:
best-of-N CPU seconds of one launch per engine (inputs restored outside the timing): the interpreter, the JIT's
tier 1 (every access checked) and tier 2 (check pass, then unchecked code; barrier regions as thread loops);
their speedups over the interpreter; tier 2's time as a multiple of the C loop; tier 2 is timed twice: with the
check pass at every launch ("t2+chk") and as repeated identical launches reuse its verdict ("tier2"); the CPU
milliseconds each tier
took to compile (cached launches pay nothing); and the wall time of a <<<1,1>>> launch on each engine.
Issue 16's goals: >= 10x the interpreter on vectorAdd and matmul, >= 20x on Collatz and the barrier loop,
<= 2x the C loop, compile <= 100 ms.
"""

from __future__ import annotations

import argparse
import ctypes
import os
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
from gpushim.ptx.jit import kernel as jit_kernel  # noqa: E402

KERNELS = ROOT / "tests" / "ptx" / "kernels"
HERE = Path(__file__).parent


def compile_ptx(src: Path, tmp: Path) -> str:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    out = tmp / f"{src.stem}.ptx"
    subprocess.run([nvcc, "-ptx", "-arch=sm_75", str(src), "-o", str(out)], check=True)
    return out.read_text()


def c_reference(tmp: Path):
    cc = shutil.which("cc") or "gcc"
    so = tmp / "ref.so"
    subprocess.run([cc, "-O2", "-march=native", "-shared", "-fPIC", str(HERE / "ptx_bench_ref.c"), "-o", str(so),
                    "-lm"], check=True)  # fmt: skip
    return ctypes.CDLL(str(so))


def ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def best_of(repeat: int, f, setup=None) -> float:
    best = float("inf")
    for _ in range(repeat):  # CPU time of this process: the machine may be shared (wall time would count waits)
        if setup is not None:  # untimed: e.g. restoring the inputs
            setup()
        t0 = time.process_time()
        f()
        best = min(best, time.process_time() - t0)
    return best


class Case:
    def __init__(self, mem: DeviceMemory, mod, kernel: str, grid, block, args: list, outputs: list) -> None:
        self.mem, self.mod, self.kernel, self.grid, self.block = mem, mod, kernel, grid, block
        self.inputs = {}
        self.params = b""
        for a in args:  # numpy arrays become device buffers, ints 4-byte parameters
            if isinstance(a, np.ndarray):
                p = mem.alloc(a.nbytes)
                self.inputs[p] = a
                self.params += b"\0" * (-len(self.params) % 8) + p.to_bytes(8, "little")
            else:
                self.params += int(a).to_bytes(4, "little")
        self.outputs = outputs  # indices of args that are outputs
        self.ptrs = list(self.inputs)

    def reset(self) -> None:
        for p, a in self.inputs.items():
            self.mem.write(p, a.tobytes())

    def launch(self, engine: str) -> None:
        self.mod.engine = engine
        self.mod.launch(self.kernel, self.grid, self.block, 0, self.params, self.mem, {}, sys.stdout.buffer.write)

    def result(self) -> list[bytes]:
        return [bytes(self.mem.read(self.ptrs[i], self.inputs[self.ptrs[i]].nbytes)) for i in self.outputs]

    def run(self, engine: str, repeat: int) -> tuple[float, list[bytes]]:
        t = best_of(repeat, lambda: self.launch(engine), self.reset)
        return t, self.result()


def main() -> None:
    os.environ.setdefault("GPUSHIM_PTX_JIT_CACHE", "off")  # compile times, not disk loads
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default="", help="comma-separated words: only the cases whose name has one")
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    mem = DeviceMemory(1 << 30)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        basic = load_module(compile_ptx(KERNELS / "basic.cu", tmp))
        linalg = load_module(compile_ptx(KERNELS / "linalg.cu", tmp))
        bench = load_module(compile_ptx(HERE / "ptx_bench_kernels.cu", tmp))
        ref = c_reference(tmp)
    cases = []
    n = 1 << 20
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    c = np.zeros(n, np.float32)
    cases.append((
        "vectorAdd 1M", Case(mem, basic, "vectorAdd", (n // 256, 1, 1), (256, 1, 1), [a, b, c, n], [2]),
        lambda: ref.vadd(ptr(a), ptr(b), ptr(c), n),
    ))  # fmt: skip
    m = 512
    A = rng.standard_normal((m, m)).astype(np.float32)
    B = rng.standard_normal((m, m)).astype(np.float32)
    C = np.zeros((m, m), np.float32)
    cases.append((
        "matmul 512x512 (16x16 tiles)",
        Case(mem, linalg, "matmul", (m // 16, m // 16, 1), (16, 16, 1), [A, B, C, m], [2]),
        lambda: ref.matmul(ptr(A), ptr(B), ptr(C), m),
    ))  # fmt: skip
    nc = 1 << 16
    start = np.arange(1, nc + 1, dtype=np.uint32)
    steps = np.zeros(nc, np.uint32)
    cases.append((
        "collatz 64K (divergent)", Case(mem, bench, "collatz", (nc // 256, 1, 1), (256, 1, 1), [start, steps, nc], [1]),
        lambda: ref.collatz(ptr(start), ptr(steps), nc),
    ))  # fmt: skip
    blocks, iters = 64, 100
    data = rng.random(blocks * 256, dtype=np.float32)
    data_c = data.copy()
    cases.append((
        "smem barrier loop 64x256x100", Case(mem, bench, "smemLoop", (blocks, 1, 1), (256, 1, 1), [data, iters], [0]),
        lambda: ref.smem_loop(ptr(data_c), blocks, iters),
    ))  # fmt: skip
    ns = 1 << 20
    xs = rng.random(ns, dtype=np.float32)
    sums = np.zeros(ns // 256, np.float32)
    sums_c = sums.copy()
    cases.append((
        "warp shuffle sum 1M", Case(mem, bench, "shflSum", (ns // 256, 1, 1), (256, 1, 1), [xs, sums, ns], [1]),
        lambda: ref.shfl_sum(ptr(xs), ptr(sums_c), ns),
    ))  # fmt: skip
    if args.cases:
        cases = [c for c in cases if any(w in c[0] for w in args.cases.split(","))]
    os.environ["GPUSHIM_PTX_JIT_TIER2"] = "off"  # tier 2 compiled below, explicitly, to time it
    print(f"{'case':30s} {'interp s':>9s} {'tier1 s':>9s} {'t2+chk s':>9s} {'tier2 s':>9s} {'t1 x':>6s} {'t2c x':>6s} "
          f"{'t2 x':>6s} {'C -O2 s':>9s} {'t2c/C':>6s} {'t2/C':>6s} {'t1 ms':>6s} {'t2 ms':>6s}")  # fmt: skip
    for name, case, cref in cases:
        jit_kernel._cache.clear()
        t0 = time.process_time()
        jk = case.mod.jit_kernel(case.kernel)
        c1 = (time.process_time() - t0) * 1e3
        if jk is None:
            print(f"{name:30s} the JIT does not compile this kernel: it runs on the interpreter")
            continue
        ti, ri = case.run("interp", args.repeat)
        t1, r1 = case.run("jit", args.repeat)
        t0 = time.process_time()
        jk.tier2()
        c2 = (time.process_time() - t0) * 1e3
        t2, r2 = case.run("jit", args.repeat)  # repeated identical launches: the check pass's verdict is reused
        jk.reuse_checks = False
        t2c, r2c = case.run("jit", args.repeat)  # each launch runs the check pass
        if not (ri == r1 == r2 == r2c):
            raise SystemExit(f"{name}: the JIT's result differs from the interpreter's")
        if jk.tier2_runs == 0 or jk.tier2_declined:
            raise SystemExit(f"{name}: tier 2 did not run the launches")
        tc = best_of(args.repeat, cref, lambda: data_c.__setitem__(slice(None), data))
        print(f"{name:30s} {ti:9.4f} {t1:9.4f} {t2c:9.4f} {t2:9.4f} {ti / t1:5.1f}x {ti / t2c:5.1f}x {ti / t2:5.1f}x "
              f"{tc:9.5f} {t2c / tc:5.1f}x {t2 / tc:5.1f}x {c1:6.0f} {c2:6.0f}"
              + ("" if jk.unchecked is None else f"  (no check pass: {jk.unchecked})"))
    tiny = Case(mem, basic, "vectorAdd", (1, 1, 1), (1, 1, 1), [a[:1].copy(), b[:1].copy(), c[:1].copy(), 1], [2])
    print(f"\n{'<<<1,1>>> vectorAdd launch':30s} {'interp us':>9s} {'jit us':>9s}")
    us = {}
    for engine in ("interp", "jit"):
        tiny.launch(engine)
        batch = 500
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            for _ in range(batch):
                tiny.launch(engine)
            best = min(best, (time.perf_counter() - t0) / batch)
        us[engine] = best * 1e6
    print(f"{'':30s} {us['interp']:9.1f} {us['jit']:9.1f}")


if __name__ == "__main__":
    main()
