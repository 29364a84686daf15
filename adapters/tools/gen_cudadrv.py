"""Generates adapters/cudadrv/<V>/entry_points.json from a CUDA toolkit's driver headers.

The driver API's versioned entry points: `cudaTypedefs.h` declares one `PFN_cuX_vNNNN` typedef per ABI
version of each entry point (with `_ptds` / `_ptsz` for the per-thread-default-stream variants) and
`cuda.h`, read with `-D__CUDA_API_VERSION_INTERNAL` as NVIDIA builds libcuda, declares every exported
function under its own name (`cuMemAlloc`, `cuMemAlloc_v2`, `cuMemcpyHtoD_v2_ptds`, ...). The k-th
version of `cuX` (oldest first) is exported as `cuX` for k = 1 and `cuX_v<k>` after; a per-thread variant
of version V belongs to the newest plain version <= V and adds its suffix. The generator checks that this
rule names an exported function for every typedef (it does for CUDA 13.0: 450 entry points, 637 exports,
the profiler's three included).

    python adapters/tools/gen_cudadrv.py [--cuda /usr/local/cuda]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PFN_RE = re.compile(r"PFN_(cu\w+?)_v(\d+)(_ptds|_ptsz)?\)")
DECL_RE = re.compile(r"\bCUresult\s+(cu\w+)\s*\(")


# libcuda also exports the profiler control functions of cudaProfiler.h (typedefs in cudaProfilerTypedefs.h)
HEADERS = (("cuda.h", "cudaTypedefs.h"), ("cudaProfiler.h", "cudaProfilerTypedefs.h"))


def exported_functions(include: Path) -> set[str]:
    out: set[str] = set()
    for header, _ in HEADERS:
        src = subprocess.run(["gcc", "-E", "-P", "-D__CUDA_API_VERSION_INTERNAL", "-I", str(include), "-x", "c",
                              str(include / header)], capture_output=True, text=True, check=True).stdout
        out |= set(DECL_RE.findall(src))
    return out


def cuda_version(include: Path) -> int:
    m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", (include / "cuda.h").read_text())
    if not m:
        raise SystemExit("cuda.h defines no CUDA_VERSION")
    return int(m.group(1))


ERROR_RE = re.compile(r"/\*\*(.*?)\*/\s*(CUDA_ERROR_\w+|CUDA_SUCCESS)\s*=\s*(\d+)", re.S)


def errors(include: Path) -> list[dict]:
    """CUresult codes of cuda.h: name, code and the first sentence of the header's description (the
    runtime's message for the same code where the runtime has it: the driver's strings are the same)."""
    text = (include / "cuda.h").read_text()
    enum = text[text.index("typedef enum cudaError_enum"):]
    enum = enum[: enum.index("} CUresult;")]
    runtime = {}
    rt = ROOT / "adapters" / "cudart" / "13.0" / "errors.json"
    if rt.exists():
        runtime = {e["code"]: e["message"] for e in json.loads(rt.read_text())["errors"]}
    out = []
    for doc, name, code in ERROR_RE.findall(enum):
        sentence = " ".join(re.sub(r"\\\w+", "", doc).replace("*", " ").split())
        sentence = sentence.split(". ")[0].rstrip(".")
        c = int(code)
        message = runtime.get(c) if (c <= 4 or c >= 100) and c in runtime else sentence
        out.append({"code": c, "name": name, "message": message})
    return out


def entry_points(include: Path) -> dict:
    exports = exported_functions(include)
    versions: dict[str, set[tuple[int, str]]] = {}
    for _, typedefs in HEADERS:
        for name, ver, suffix in PFN_RE.findall((include / typedefs).read_text()):
            versions.setdefault(name, set()).add((int(ver), suffix))
    table: dict[str, dict] = {}
    for name, vs in sorted(versions.items()):
        plain = sorted(v for v, s in vs if not s)
        names = [n for n in [name] + [f"{name}_v{k}" for k in range(2, 10)] if n in exports]
        if len(plain) != len(names):
            raise SystemExit(f"{name}: versions {plain} but exports {names}")
        entry: dict[str, list] = {"versions": [[v, n] for v, n in zip(plain, names, strict=True)]}
        per_thread = []
        for v, s in sorted(vs):
            if s:
                base = [n for b, n in zip(plain, names, strict=True) if b <= v][-1]
                if base + s not in exports:
                    raise SystemExit(f"{name}: {base + s} (for PFN version {v}{s}) is not exported")
                per_thread.append([v, base + s])
        if per_thread:
            entry["per_thread"] = per_thread
        table[name] = entry
    covered = {n for e in table.values() for _, n in e["versions"] + e.get("per_thread", [])}
    if covered != exports:
        raise SystemExit(f"exports without a PFN typedef: {sorted(exports - covered)[:10]}")
    return {"cuda_version": cuda_version(include), "source": " + ".join(h for pair in HEADERS for h in pair),
            "exports": sorted(exports), "entry_points": table, "errors": errors(include)}


def dump(data: dict) -> str:
    """JSON with one entry point or error per line (reviewable diffs)."""
    lines = ["{", f' "cuda_version": {data["cuda_version"]},', f' "source": {json.dumps(data["source"])},',
             ' "exports": [']
    ex = data["exports"]
    for i in range(0, len(ex), 6):
        lines.append("  " + ", ".join(json.dumps(x) for x in ex[i:i + 6]) + ("," if i + 6 < len(ex) else ""))
    lines.append(" ],")
    lines.append(' "entry_points": {')
    items = sorted(data["entry_points"].items())
    for i, (k, v) in enumerate(items):
        lines.append(f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" + ("," if i + 1 < len(items) else ""))
    lines.append(" },")
    lines.append(' "errors": [')
    errs = data["errors"]
    for i, e in enumerate(errs):
        lines.append(f"  {json.dumps(e)}" + ("," if i + 1 < len(errs) else ""))
    lines += [" ]", "}"]
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == data
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuda", default="/usr/local/cuda")
    args = ap.parse_args()
    include = Path(args.cuda) / "include"
    data = entry_points(include)
    v = data["cuda_version"]
    out = ROOT / "adapters" / "cudadrv" / f"{v // 1000}.{v % 1000 // 10}" / "entry_points.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dump(data))
    print(f"{out.relative_to(ROOT)}: {len(data['entry_points'])} entry points, {len(data['exports'])} exports")
    return 0


if __name__ == "__main__":
    sys.exit(main())
