"""Benchmark of the emulator's PTX engines: the interpreter, the compiling engine (gpushim/ptx/jit) and the same
work as a plain C loop compiled with -O2, in one run.

    python bench/ptx_bench.py [--repeat N] [--cases shuffle,matmul] [--first-launch]
    python bench/ptx_bench.py --compile-only [PTX files]   # tier 1's compile time per kernel (ptx_compile_bench.py)

Cases: vectorAdd on 1M floats (tests/ptx/kernels/basic.cu), the 16x16-tiled matmul at 512^2 (linalg.cu), a
divergent Collatz kernel, a shared-memory ring smoothed in a loop with two barriers per iteration and a
block sum with warp shuffles (bench/ptx_bench_kernels.cu). The JIT's results (both tiers) must equal the
interpreter's bit for bit. Reported:
best-of-N CPU seconds of one launch per engine (inputs restored outside the timing): the interpreter, the JIT's
tier 1 (every access checked) and tier 2 (check pass, then unchecked code; barrier regions as thread loops);
their speedups over the interpreter; tier 2's time as a multiple of the C loop; tier 2 is timed twice: with the
check pass at every launch ("t2+chk") and as repeated identical launches reuse its verdict ("tier2"); the CPU
milliseconds each tier
took to compile (cached launches pay nothing); the wall time of a kernel's first launch (nothing compiled, disk
cache off) on the interpreter, on the JIT compiling tier 1 first ("jit") and with the default engine ("auto": the
interpreter starts while tier 1 compiles in the background; tier 2 follows once the kernel ran 20 ms, and a
running launch moves on to the better code between blocks); and the wall time of a <<<1,1>>> launch on each
engine.
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
from gpushim.ptx.jit.pending import Pending  # noqa: E402

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


def first_launch(case: Case, engine: str) -> tuple[float, float]:
    """Wall seconds and CPU seconds of the launching thread (background compiles not counted: on a machine with a
    free core they cost the launch nothing) of a launch of a kernel nothing was compiled for (in memory; the disk
    cache is off); then the background compiles it started are awaited (they would slow the next one down)."""
    jit_kernel._cache.clear()
    case.mod._jit.clear()
    case.reset()
    t0, c0 = time.perf_counter(), time.thread_time()
    case.launch(engine)
    dt, dc = time.perf_counter() - t0, time.thread_time() - c0
    hit = jit_kernel._cache.get((case.mod.source_hash, case.kernel))
    if isinstance(hit, Pending):
        hit.wait()
        hit = hit.result  # (the cache takes the kernel just after the Pending is done)
    if isinstance(hit, jit_kernel.JitKernel) and hit.t2_state == "queued":
        hit.tier2()  # (waits for the background compile)
    return dt, dc


def first_launches(cases, repeat: int) -> None:
    os.environ["GPUSHIM_PTX_JIT_TIER2"] = "hot"  # the defaults
    os.environ["GPUSHIM_PTX_JIT_TIER1"] = "background"
    print(f"\n{'first launch (cold)':30s} {'interp s':>9s} {'jit s':>9s} {'auto s':>9s}   launching thread's CPU s:"
          f" {'interp':>7s} {'jit':>7s} {'auto':>7s}  (auto: how it ended)")  # fmt: skip
    for name, case, _ in cases:
        case.run("interp", 1)
        want = case.result()
        best: dict[str, float] = {}
        cpu: dict[str, float] = {}
        how = ""
        for _ in range(repeat):
            for engine in ("interp", "jit", "auto"):  # interleaved: the load changes from second to second
                t, tc = first_launch(case, engine)
                if case.result() != want:
                    raise SystemExit(f"{name}: the first launch on {engine} differs from the interpreter's result")
                best[engine] = min(best.get(engine, t), t)
                cpu[engine] = min(cpu.get(engine, tc), tc)
                jk = jit_kernel._cache.get((case.mod.source_hash, case.kernel))
                if engine == "auto" and isinstance(jk, jit_kernel.JitKernel):
                    how = f"handed over to the JIT: {jk.handoffs}, on to tier 2: {jk.tier2_switches}"
        print(f"{name:30s} {best['interp']:9.4f} {best['jit']:9.4f} {best['auto']:9.4f}   {'':26s}"
              f"{cpu['interp']:7.4f} {cpu['jit']:7.4f} {cpu['auto']:7.4f}  ({how}, last run)")  # fmt: skip
    os.environ["GPUSHIM_PTX_JIT_TIER2"] = "off"


def long_first_launch(case: Case, repeat: int) -> None:
    """A first launch long enough for tier 2 to be compiled while it runs: tier 1 alone (tier 2 off) against
    the default (tier 2 compiled in the background once the launch ran 20 ms; the blocks left run on it)."""
    print(f"{'':30s} {'wall s':>9s} {'thread s':>9s} {'process s':>9s}  moved on to tier 2")
    want = None
    rows = {}
    for _ in range(repeat):
        for policy in ("off", "hot"):
            os.environ["GPUSHIM_PTX_JIT_TIER2"] = policy
            jit_kernel._cache.clear()
            case.mod._jit.clear()
            case.reset()
            t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
            case.launch("jit")
            t = (time.perf_counter() - t0, time.thread_time() - c0, time.process_time() - p0)
            jk = case.mod._jit[case.kernel]
            switched = jk.tier2_switches
            if jk.t2_state == "queued":
                jk.tier2()  # (waits for the background compile)
            want = want or case.result()
            if case.result() != want:
                raise SystemExit("the long first launch's results differ between the tier-2 policies")
            old = rows.get(policy)
            if old is None or t[0] < old[0][0]:
                rows[policy] = (t, switched)
    for policy, label in (("off", "tier 1 alone"), ("hot", "tier 1, then tier 2")):
        (w, c, p), switched = rows[policy]
        print(f"  {label:28s} {w:9.2f} {c:9.2f} {p:9.2f}  {'yes' if switched else 'no'}")
    os.environ["GPUSHIM_PTX_JIT_TIER2"] = "off"


def main() -> None:
    os.environ.setdefault("GPUSHIM_PTX_JIT_CACHE", "off")  # compile times, not disk loads
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--first-launch", action="store_true", help="only the first-launch table")
    ap.add_argument("--cases", default="", help="comma-separated words: only the cases whose name has one")
    ap.add_argument("--compile-only", nargs="*", metavar="PTX", default=None,
                    help="only tier 1's compile time per kernel (of these PTX files; none: the test kernels)")
    args = ap.parse_args()
    if args.compile_only is not None:
        from ptx_compile_bench import compile_report

        compile_report([Path(p) for p in args.compile_only], args.repeat)
        return
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
    tiny = Case(mem, basic, "vectorAdd", (1, 1, 1), (1, 1, 1), [a[:1].copy(), b[:1].copy(), c[:1].copy(), 1], [2])
    big = 1024
    A2 = rng.standard_normal((big, big)).astype(np.float32)
    C2 = np.zeros((big, big), np.float32)
    long_case = Case(mem, linalg, "matmul", (big // 16, big // 16, 1), (16, 16, 1), [A2, A2, C2, big], [2])
    if args.first_launch:
        first_launches(cases + [("<<<1,1>>> vectorAdd", tiny, None)], args.repeat)
        print("\nlong first launch: matmul 1024x1024 (cold)")
        long_first_launch(long_case, 2)
        return
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
    first_launches(cases + [("<<<1,1>>> vectorAdd", tiny, None)], args.repeat)
    print("\nlong first launch: matmul 1024x1024 (cold)")
    long_first_launch(long_case, 2)
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
