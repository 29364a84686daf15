"""Tier 1's compile time per kernel against issue 16's goal: <= 100 ms CPU for a kernel of <= 1000 PTX lines.

    python bench/ptx_bench.py [--repeat N] --compile-only [PTX files]

Without files: the test kernels' PTX as the tests built it (tests/ptx/build: the newest build of each source and
architecture), or, when there is none, a representative set compiled here with nvcc. Per kernel the JIT compiles:
its PTX lines (its .entry through the closing brace, plus the bodies of the .func it inlines), its instructions
after linking, the best-of-N CPU ms of tier 1's compile (no caches) and of that the Python half (IR construction
and its text: what the text emitter replaces) and LLVM's (parse, verify, optimise, generate code), the code
generator tier 1 chose (kernel.t1_codegen: "full" or "cheap"), and whether it meets the goal. CPU time of the
compiling thread: on a shared machine wall time would count waits. The runtime library's functions the kernels
call (gpushim/ptx/jit/rtlib.py) are made first, and their cost reported on a line of its own: its one-time build
and its load by a new process from the disk cache; the kernels' times are with it loaded.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "ptx"))

from gpushim.ptx import load_module  # noqa: E402
from gpushim.ptx.jit import kernel as jit_kernel  # noqa: E402
from gpushim.ptx.jit.codegen import JitUnsupported  # noqa: E402

GOAL_MS, GOAL_LINES = 100.0, 1000
BUILD = ROOT / "tests" / "ptx" / "build"
REPRESENTATIVE = [("mathlib", "sm_75"), ("linalg", "sm_75"), ("basic", "sm_75"), ("jittiers", "sm_75"),
                  ("jitwarp", "sm_90"), ("jithalf", "sm_90")]  # fmt: skip
_HEADER = re.compile(r"^\s*(?:\.\w+\s+)*\.(entry|func)\b")


def function_spans(text: str) -> list[tuple[int, int]]:
    """(first, last) 1-based source lines of each .entry/.func definition (declarations have no body)."""
    lines = text.splitlines()
    spans = []
    i = 0
    while i < len(lines):
        if not _HEADER.match(lines[i]):
            i += 1
            continue
        start, depth, opened = i, 0, False
        while i < len(lines):
            code = lines[i].split("//", 1)[0]
            if not opened and ";" in code and "{" not in code and code.rstrip().endswith(";"):
                break  # a declaration (prototype): no body
            for ch in code:
                if ch == "{":
                    depth, opened = depth + 1, True
                elif ch == "}":
                    depth -= 1
            if opened and depth == 0:
                spans.append((start + 1, i + 1))
                break
            i += 1
        i += 1
    return spans


def kernel_lines(spans: list[tuple[int, int]], prog) -> int:
    """PTX lines of the functions whose instructions the linked kernel holds (the entry and what it inlines)."""
    used = {ins.line for ins in prog.code}
    return sum(b - a + 1 for a, b in spans if any(a <= ln <= b for ln in used))


def default_files() -> list[Path]:
    newest: dict[str, Path] = {}
    for p in sorted(BUILD.glob("*.ptx")) if BUILD.is_dir() else []:
        key = ".".join(p.name.split(".")[:2])  # source and architecture
        if key not in newest or p.stat().st_mtime > newest[key].stat().st_mtime:
            newest[key] = p
    if newest:
        return sorted(newest.values())
    from harness import compile_ptx  # (tests/ptx/harness.py: nvcc, caching in tests/ptx/build)

    for name, arch in REPRESENTATIVE:
        compile_ptx(name, arch)
    return default_files()


def library_pass(files: list[Path]) -> dict:
    """The runtime library's functions every kernel calls (gpushim/ptx/jit/rtlib.py), made as their first compiles
    make them: built in chunks or loaded from the disk cache. Returns rtlib.stats()."""
    from gpushim.ptx.jit import rtlib
    from gpushim.ptx.jit.codegen import generate

    for path in files:
        mod = load_module(path.read_text(), strict=False)
        for name, kern in mod._compiled.items():
            try:
                rtlib.load(generate(mod._mod, kern.prog, name, 1).rt_chunk)
            except JitUnsupported:
                continue
    return rtlib.stats()


def library_report(files: list[Path]) -> None:
    """The runtime library's one-time build (per machine: then the disk cache has it) and its load in a new
    process (from the disk cache), each a line of its own: the kernels' times below are with it loaded."""
    import json
    import os
    import subprocess
    import tempfile

    from gpushim.ptx.jit import rtlib

    if not rtlib.enabled():
        print("runtime library: off (GPUSHIM_PTX_JIT_RTLIB=off): each module defines its helpers\n")
        return
    with tempfile.TemporaryDirectory() as d:
        saved = os.environ.get("GPUSHIM_PTX_JIT_CACHE")
        os.environ["GPUSHIM_PTX_JIT_CACHE"] = d  # (the kernels below still compile without the disk cache)
        try:
            built = library_pass(files)
        finally:
            os.environ.pop("GPUSHIM_PTX_JIT_CACHE")
            if saved is not None:
                os.environ["GPUSHIM_PTX_JIT_CACHE"] = saved
        out = subprocess.run([sys.executable, __file__, "--library-pass", *map(str, files)], cwd=ROOT,
                             env={**os.environ, "GPUSHIM_PTX_JIT_CACHE": d}, capture_output=True, text=True,
                             check=True).stdout  # fmt: skip
        loaded = json.loads(out.splitlines()[-1])
    print(f"runtime library: {built['functions']} functions in {built['compiles']} chunks; built (once per machine): "
          f"{built['compile_cpu_s'] * 1e3:.0f} ms CPU; loaded by a new process from the disk cache "
          f"({loaded['disk_loads']} chunks, {loaded['compiles']} compiled): {loaded['load_cpu_s'] * 1e3:.0f} ms CPU "
          f"(both: the IR of the chunks and LLVM's part)\n")  # fmt: skip


def compile_report(files: list[Path], repeat: int) -> None:
    files = files or default_files()
    library_report(files)
    print(f"{'kernel':42s} {'lines':>6s} {'instrs':>6s} {'tier1 ms':>9s} {'python':>7s} {'llvm':>7s} {'codegen':>8s}  "
          f"goal (<= {GOAL_MS:.0f} ms for <= {GOAL_LINES} lines)")  # fmt: skip
    met = within = 0
    worst = (0.0, "")
    for path in files:
        text = path.read_text()
        mod = load_module(text, strict=False)
        spans = function_spans(text)
        for name, kern in mod._compiled.items():
            prog = kern.prog
            best = None
            try:
                for _ in range(repeat):
                    code = jit_kernel._Code(mod._mod, prog, f"{mod.name}:{name}", 1, "")
                    run = (code.compile_cpu_s, code.ir_cpu_s, code.codegen)
                    best = run if best is None or run[0] < best[0] else best
                    del code
            except JitUnsupported:
                continue  # runs on the interpreter
            assert best is not None
            total, py, how = best[0] * 1e3, best[1] * 1e3, best[2]
            n = kernel_lines(spans, prog)
            verdict = ""
            if n <= GOAL_LINES:
                within += 1
                met += total <= GOAL_MS
                verdict = "ok" if total <= GOAL_MS else "over"
            if total > worst[0]:
                worst = (total, name)
            label = f"{path.name.split('.')[0]}:{name}"[:42]
            print(f"{label:42s} {n:6d} {len(prog.code):6d} {total:9.1f} {py:7.1f} {total - py:7.1f} {how:>8s}  "
                  f"{verdict}")
    print(f"\n{met} of {within} kernels of <= {GOAL_LINES} PTX lines compile in <= {GOAL_MS:.0f} ms CPU; the slowest "
          f"compile: {worst[1]} {worst[0]:.0f} ms")  # fmt: skip


if __name__ == "__main__" and sys.argv[1:2] == ["--library-pass"]:  # (library_report's new process)
    import json

    print(json.dumps(library_pass([Path(p) for p in sys.argv[2:]])))
