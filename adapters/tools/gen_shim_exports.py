#!/usr/bin/env python3
"""Generate adapters/cudart/nodes.json: which names the shim defines in which version node, and which are
ABI-identical across runtime versions.

For each node (libcudart.so.11.0 / libcudart.so.12 / libcudart.so.13) the union of the exports of the versions
of that major; for each name:

  nodes               the nodes that export it
  versions            the modelled versions that export it
  prototype_identical return and parameter types (as written after preprocessing) are equal in every version
                      that exports the name
  abi_identical       prototype_identical AND every struct/union reachable from the prototype (by value or
                      through pointers, transitively) has the same size, alignment and field
                      offsets/sizes/types in all those versions. Only these may be aliased into several nodes
                      by one implementation.
  variants            the distinct signatures and the versions that have each
  layout_differences  the struct types that make an otherwise identical prototype differ in ABI
  layout_sizes_identical  those structs keep their size (only fields added in reserved/union space)

Reads only adapters/cudart/<V>/*.json (run gen_adapters.py first).
Usage: python adapters/tools/gen_shim_exports.py [--data adapters/cudart]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

ADAPTERS = Path(__file__).resolve().parent.parent
C_WORDS = {"const", "volatile", "struct", "union", "enum", "unsigned", "signed", "int", "char", "short", "long",
           "void", "float", "double", "restrict", "_Bool"}


class VersionData:
    def __init__(self, d: Path) -> None:
        self.version = d.name
        self.info = json.loads((d / "version.json").read_text())
        self.exports = (d / "exports.txt").read_text().split()
        self.protos: dict[str, Any] = json.loads((d / "prototypes.json").read_text())["functions"]
        lay = json.loads((d / "layouts.json").read_text())
        self.structs: dict[str, Any] = lay["structs"]
        self.aliases: dict[str, str] = lay["aliases"]
        self.node: str = self.info["nodes"][0]
        self.major = int(self.version.split(".")[0])

    def struct_key(self, ident: str) -> str | None:
        key = self.aliases.get(ident, ident)
        return key if key in self.structs else None


def referenced_structs(types: list[str], vd: VersionData) -> set[str]:
    """Struct keys reachable from the given type strings, transitively through fields."""
    seen: set[str] = set()
    todo = list(types)
    while todo:
        t = todo.pop()
        for ident in re.findall(r"[A-Za-z_]\w*", t):
            if ident in C_WORDS:
                continue
            key = vd.struct_key(ident)
            if key and key not in seen:
                seen.add(key)
                todo.extend(f["type"] for f in vd.structs[key]["fields"])
    return seen


def layout_fingerprint(key: str, vd: VersionData) -> Any:
    s = vd.structs[key]
    return [s["size"], s["align"],
            [[f["name"], f.get("offset"), f.get("size"), f["type"], f.get("count", 0)] for f in s["fields"]]]


def signature(p: dict[str, Any]) -> str:
    args = ", ".join(x["type"] for x in p["params"]) or "void"
    if p.get("variadic"):
        args += ", ..."
    return f"{p['return']}({args})"


def build(data: Path) -> dict[str, Any]:
    dirs = [d for d in data.iterdir() if (d / "version.json").exists()]
    vds = [VersionData(d) for d in sorted(dirs, key=lambda p: [int(x) for x in p.name.split(".")])]
    nodes: dict[str, dict[str, Any]] = {}
    for vd in vds:
        n = nodes.setdefault(vd.node, {"major": vd.major, "versions": [], "names": set()})
        n["versions"].append(vd.version)
        n["names"].update(vd.exports)
    functions: dict[str, Any] = {}
    for name in sorted(set().union(*(set(vd.exports) for vd in vds))):
        have = [vd for vd in vds if name in vd.exports]
        sigs: dict[str, list[str]] = {}
        for vd in have:
            sigs.setdefault(signature(vd.protos[name]) if name in vd.protos else "?", []).append(vd.version)
        proto_same = len(sigs) == 1 and "?" not in sigs
        diffs: set[str] = set()
        if proto_same:
            p0 = have[0].protos[name]
            types = [p0["return"], *(x["type"] for x in p0["params"])]
            keys = set().union(*(referenced_structs(types, vd) for vd in have))
            for k in sorted(keys):
                fps = {json.dumps(layout_fingerprint(k, vd)) if k in vd.structs else "absent" for vd in have}
                if len(fps) > 1:
                    diffs.add(k)
        majors = sorted({vd.major for vd in have})
        within = sorted({vd.major for vd in have
                         if any(o.major == vd.major and signature(o.protos.get(name, {"return": "?", "params": []}))
                                != signature(vd.protos.get(name, {"return": "?", "params": []})) for o in have)})
        entry: dict[str, Any] = {
            "nodes": sorted({vd.node for vd in have}, key=lambda s: [int(x) for x in re.findall(r"\d+", s)]),
            "versions": [vd.version for vd in have],
            "majors": majors,
            "prototype_identical": proto_same,
            "abi_identical": proto_same and not diffs,
        }
        if not entry["abi_identical"]:
            entry["variants"] = [{"signature": s, "versions": v} for s, v in sigs.items()]
        if diffs:
            entry["layout_differences"] = sorted(diffs)
            # True when every differing struct keeps its size in all versions (fields added in reserved space
            # or inside a fixed-size union): an older caller's buffer is still fully valid, new fields aside.
            entry["layout_sizes_identical"] = all(
                len({vd.structs[k]["size"] if k in vd.structs else -1 for vd in have}) == 1 for k in diffs)
        if within:
            entry["differs_within_major"] = within
        functions[name] = entry
    all_nodes = set(nodes)
    summary = {
        "names_total": len(functions),
        "in_all_nodes": sum(1 for f in functions.values() if set(f["nodes"]) == all_nodes),
        "in_all_nodes_abi_identical": sum(1 for f in functions.values()
                                          if set(f["nodes"]) == all_nodes and f["abi_identical"]),
        "multi_node_abi_identical": sum(1 for f in functions.values() if len(f["nodes"]) > 1 and f["abi_identical"]),
        "multi_node_not_identical": sorted(n for n, f in functions.items()
                                           if len(f["nodes"]) > 1 and not f["abi_identical"]),
    }
    return {
        "generated_from": {vd.version: vd.info.get("runtime_package") for vd in vds},
        "nodes": {k: {"major": v["major"], "versions": v["versions"], "count": len(v["names"]),
                      "names": sorted(v["names"])} for k, v in nodes.items()},
        "summary": summary,
        "functions": functions,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ADAPTERS / "cudart")
    args = ap.parse_args(argv)
    out = build(args.data)
    parts = []
    for k, v in out.items():
        if k == "functions":
            inner = ",\n".join(f"  {json.dumps(n)}: {json.dumps(e)}" for n, e in v.items())
            parts.append(f' "functions": {{\n{inner}\n }}')
        elif k == "nodes":
            inner = ",\n".join(f"  {json.dumps(n)}: {json.dumps(e)}" for n, e in v.items())
            parts.append(f' "nodes": {{\n{inner}\n }}')
        else:
            parts.append(f" {json.dumps(k)}: {json.dumps(v)}")
    (args.data / "nodes.json").write_text("{\n" + ",\n".join(parts) + "\n}\n")
    s = out["summary"]
    print(json.dumps({k: (len(v) if isinstance(v, list) else v) for k, v in s.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
