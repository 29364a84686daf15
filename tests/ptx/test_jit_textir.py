"""The JIT's IR emitter (gpushim/ptx/jit/textir.py) against llvmlite.ir: for every kernel of the test PTX, both
tiers, the IR the code generator builds with textir must be the IR it builds with llvmlite.ir — both parsed and
verified by LLVM and printed back, identical up to the names of local values and blocks.

The reference is built in a subprocess (this file run as a script) where `gpushim.ptx.jit.textir` is llvmlite.ir
itself: the same code generator, only the IR library differs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# kernels/<name>.cu and the arch the tests build it for (default sm_75)
_ARCH = {"async80": "sm_80", "elect90": "sm_90", "gridsync": "sm_80", "half": "sm_80", "halfatomics": "sm_90",
         "jithalf": "sm_90", "jitwarp": "sm_90", "mbarrier90": "sm_90", "mma_sync": "sm_90", "mma_wmma": "sm_80",
         "partition80": "sm_80", "redux80": "sm_80", "simd16": "sm_90"}  # fmt: skip
_EXTRA = {"devrt": ("-rdc=true",)}
NAMES = sorted(p.stem for p in (ROOT / "tests/ptx/kernels").glob("*.cu") if p.stem != "devrt_unsupported")  # no load


def module_irs(ptx: str) -> dict[str, str]:
    """'kernel/tier' -> the module's IR text, or 'unsupported: ...' where the JIT declines the kernel."""
    from gpushim.ptx import load_module
    from gpushim.ptx.jit.codegen import JitUnsupported, generate

    m = load_module(ptx)
    out = {}
    for kname, ck in m._compiled.items():
        for tier in (1, 2):
            try:
                out[f"{kname}/{tier}"] = str(generate(m._mod, ck.prog, kname, tier).m)
            except JitUnsupported as e:
                out[f"{kname}/{tier}"] = f"unsupported: {e}"
    return out


_LOCAL = re.compile(r'%(?:"(?:[^"\\]|\\.)*"|[-a-zA-Z$._0-9]+)')
_LABEL = re.compile(r'^("(?:[^"\\]|\\.)*"|[-a-zA-Z$._0-9]+):')


def canonical(ir_text: str) -> str:
    """LLVM's own printing of the parsed, verified module with local names numbered in order of appearance."""
    import llvmlite.binding as llvm

    mod = llvm.parse_assembly(ir_text, context=llvm.create_context())
    mod.verify()
    lines = [ln.split(";", 1)[0].rstrip() for ln in str(mod).splitlines()
             if not ln.startswith(("; ModuleID", "source_filename"))]  # fmt: skip
    out: list[str] = []
    names: dict[str, str] = {}

    def number(m: re.Match) -> str:
        return names.setdefault(m.group(0), f"%v{len(names)}")

    for ln in filter(None, lines):
        if ln.startswith("define "):
            names.clear()  # local names are per function
        out.append(_LOCAL.sub(number, _LABEL.sub(r"%\1:", ln)))
    return "\n".join(out)


def reference_irs(ptx_path: Path) -> dict[str, str]:
    r = subprocess.run([sys.executable, __file__, str(ptx_path)], capture_output=True, text=True, cwd=ROOT,
                       check=True)  # fmt: skip
    return json.loads(r.stdout)


@pytest.mark.parametrize("name", NAMES)
def test_textir_matches_llvmlite(name, engine):
    if engine != "interp":  # (no launches here: once is enough)
        pytest.skip("engine-independent")
    from harness import BUILD, compile_ptx

    arch = _ARCH.get(name, "sm_75")
    ptx = compile_ptx(name, arch, _EXTRA.get(name, ()))
    path = next(p for p in BUILD.glob(f"{name}.{arch}.*.ptx") if p.read_text() == ptx)
    ours, ref = module_irs(ptx), reference_irs(path)
    assert ours.keys() == ref.keys()
    compiled = 0
    for key, text in ours.items():
        if text.startswith("unsupported: ") or ref[key].startswith("unsupported: "):
            assert text == ref[key], key
            continue
        assert canonical(text) == canonical(ref[key]), key
        compiled += 1
    if name in ("linalg", "mathlib", "jittiers", "jitwarp"):
        assert compiled > 0


def test_canonical_catches_a_wrong_instruction():
    """The comparison can fail: one changed predicate in otherwise identical IR."""
    from harness import compile_ptx

    irs = module_irs(compile_ptx("linalg"))
    key, text = next((k, t) for k, t in irs.items() if "icmp ult" in t)
    assert canonical(text) == canonical(text.replace("%.", "%renamed."))
    assert canonical(text) != canonical(text.replace("icmp ult", "icmp ule", 1)), key


if __name__ == "__main__":  # the reference: the same code generator on llvmlite.ir
    import llvmlite.ir

    sys.path.insert(0, str(ROOT))
    import gpushim.ptx.jit as jit

    sys.modules["gpushim.ptx.jit.textir"] = jit.textir = llvmlite.ir
    print(json.dumps(module_irs(Path(sys.argv[1]).read_text())))
