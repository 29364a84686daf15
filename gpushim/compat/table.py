"""The compatibility table (adapters/compat.json) as Python objects, and its Markdown rendering.

The table answers, per API or feature x client runtime range x server driver range, which strategy gpushim
uses: native, translate, emulate or reject (CUDA error + reason).  ``gpushim.compat.policy`` evaluates it for
one session; ``python -m gpushim.compat.table --markdown > docs/compatibility.md`` renders it for people.

Versions are CUDA API versions encoded like ``cudaRuntimeGetVersion`` does: 12040 for 12.4 (a driver is named
by the CUDA version it implements, as ``cudaDriverGetVersion`` reports it).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from gpushim.abi import adapters

__all__ = [
    "ApiRule", "Architecture", "CompatTable", "DriverRow", "Family", "Feature", "SessionRule", "VersionRange",
    "encode", "fmt", "load_table", "parse_version", "render_markdown", "table_path",
]


def encode(major: int, minor: int) -> int:
    return major * 1000 + minor * 10


def parse_version(text: str | int) -> int:
    """'12.4' -> 12040, '9.0' -> 9000, 12040 -> 12040."""
    if isinstance(text, int):
        return text
    s = str(text).strip()
    if "." in s:
        major, minor = s.split(".", 1)
        return encode(int(major), int(minor.split(".")[0]))
    return int(s)


def fmt(version: int) -> str:
    """12040 -> '12.4'."""
    return f"{version // 1000}.{version % 1000 // 10}"


def _tuple(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


@dataclass(frozen=True)
class VersionRange:
    """'*', '>=X.Y', '<X.Y', 'X.Y-Z.W' (inclusive), '11.x' (one major), 'X.Y' (that minor)."""

    text: str
    low: int | None  # inclusive
    high: int | None  # exclusive

    @classmethod
    def parse(cls, text: str) -> VersionRange:
        s = text.strip()
        if s in ("*", ""):
            return cls("*", None, None)
        if s.startswith(">="):
            return cls(s, parse_version(s[2:]), None)
        if s.startswith("<"):
            return cls(s, None, parse_version(s[1:]))
        if s.endswith(".x"):
            major = int(s[:-2])
            return cls(s, encode(major, 0), encode(major + 1, 0))
        if "-" in s:
            a, b = s.split("-", 1)
            return cls(s, parse_version(a), parse_version(b) + 10)
        v = parse_version(s)
        return cls(s, v, v + 10)

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        v = version // 10 * 10  # ignore patch digits (12041 -> 12040)
        return (self.low is None or v >= self.low) and (self.high is None or v < self.high)

    def describe(self) -> str:
        return "any" if self.text == "*" else self.text


@dataclass(frozen=True)
class Family:
    major: int
    toolkits: str
    min_driver: int
    min_linux_driver: str
    ptx_isa_max: tuple[int, int]
    cubin_abi: tuple[int, int]


@dataclass(frozen=True)
class DriverRow:
    cuda: int
    linux: str
    ptx_isa: tuple[int, int]
    cubin_abi_max: tuple[int, int]


@dataclass(frozen=True)
class Architecture:
    name: str  # "9.0" or "arch_specific"
    min_driver: int
    min_isa: tuple[int, int]
    last_major: int | None = None  # last driver major supporting it (None: still supported)


@dataclass(frozen=True)
class Feature:
    name: str
    min_driver: int | None  # None: '*' (no driver minimum; the strategy depends on the image)
    below: str  # strategy when the driver is older
    how: str
    error: int = 0
    apis: tuple[str, ...] = ()
    clients: VersionRange = VersionRange("*", None, None)  # client runtimes the feature matters to


@dataclass(frozen=True)
class SessionRule:
    client: VersionRange
    driver: VersionRange
    strategy: str
    reason: str
    error: int = 0
    when: str | None = None


@dataclass(frozen=True)
class ApiRule:
    apis: tuple[str, ...]
    client: VersionRange
    driver: VersionRange
    strategy: str
    reason: str
    error: int = 0
    kind: str | None = None  # translate: "struct" | "enum" | "signature"
    feature: str | None = None
    when: str | None = None


@dataclass
class CompatTable:
    raw: dict[str, Any]
    families: dict[int, Family]
    drivers: list[DriverRow]  # oldest first
    architectures: dict[str, Architecture]
    features: dict[str, Feature]
    session: list[SessionRule]
    structs: dict[str, str]  # api -> struct name
    apis: list[ApiRule]
    error_default: int
    error_map: dict[int, tuple[int, str]]
    strategies: dict[str, str] = field(default_factory=dict)

    def driver_row(self, driver: int) -> DriverRow:
        """The row of the newest listed driver not newer than ``driver`` (12.7 -> 12.6; 13.1 -> 13.0)."""
        fitting = [d for d in self.drivers if d.cuda <= driver // 10 * 10]
        return fitting[-1] if fitting else self.drivers[0]

    def family(self, version: int) -> Family | None:
        return self.families.get(version // 1000)

    def arch(self, cc: tuple[int, int]) -> Architecture | None:
        return self.architectures.get(f"{cc[0]}.{cc[1]}")

    def rules_for(self, api: str) -> list[ApiRule]:
        return [r for r in self.apis if api in r.apis]


def table_path() -> Path:
    return Path(adapters.__file__).resolve().parent / "compat.json"


def _feature(d: dict[str, Any]) -> Feature:
    md = d["min_driver"]
    return Feature(d["feature"], None if md == "*" else parse_version(md), d["below"], d["how"], int(d.get("error", 0)),
                   tuple(d.get("apis", ())), VersionRange.parse(d.get("clients", "*")))


@cache
def load_table(path: str | None = None) -> CompatTable:
    raw = json.loads(Path(path or table_path()).read_text(encoding="utf-8"))
    families = {f["major"]: Family(f["major"], f["toolkits"], parse_version(f["min_driver"]), f["min_linux_driver"],
                                   _tuple(f["ptx_isa_max"]), _tuple(f["cubin_abi"])) for f in raw["families"]}
    drivers = sorted((DriverRow(parse_version(d["cuda"]), d["linux"], _tuple(d["ptx_isa"]), _tuple(d["cubin_abi_max"]))
                      for d in raw["drivers"]), key=lambda d: d.cuda)
    archs = {k: Architecture(k, parse_version(v["min_driver"]), _tuple(v["min_isa"]), v.get("last_major"))
             for k, v in raw["architectures"].items() if k != "about"}
    features = {f["feature"]: _feature(f) for f in raw["features"]}
    session = [SessionRule(VersionRange.parse(r["client"]), VersionRange.parse(r["driver"]), r["strategy"], r["reason"],
                           int(r.get("error", 0)), r.get("when")) for r in raw["session"]]
    structs = {api: s["struct"] for s in raw["structs"] for api in s["api"]}
    apis: list[ApiRule] = []
    for r in raw["apis"]:
        feat = r.get("feature")
        reason = r.get("reason") or (features[feat].how if feat else "")
        error = int(r.get("error", features[feat].error if feat and r["strategy"] == "reject" else 0))
        apis.append(ApiRule(tuple(r["api"]), VersionRange.parse(r["client"]), VersionRange.parse(r["driver"]),
                            r["strategy"], reason, error, r.get("kind"), feat, r.get("when")))
    emap = {int(k): (int(v["to"]), v["why"]) for k, v in raw["errors"]["map"].items()}
    table = CompatTable(raw, families, drivers, archs, features, session, structs, apis, int(raw["errors"]["default"]),
                        emap, dict(raw.get("strategies", {})))
    _validate(table)
    return table


STRATEGIES = ("native", "translate", "emulate", "reject")


def _validate(t: CompatTable) -> None:
    problems = []
    for r in [*t.session, *t.apis]:
        if r.strategy not in STRATEGIES:
            problems.append(f"unknown strategy {r.strategy!r}")
        if r.strategy == "reject" and not r.error:
            problems.append(f"reject without an error: {r}")
        if not r.reason:
            problems.append(f"rule without a reason: {r}")
    for r in t.apis:
        if r.feature and r.feature not in t.features:
            problems.append(f"unknown feature {r.feature!r}")
    for f in t.features.values():
        if f.below not in STRATEGIES:
            problems.append(f"feature {f.name}: unknown strategy {f.below!r}")
    if problems:
        raise ValueError("adapters/compat.json: " + "; ".join(problems))


# -- Markdown ----------------------------------------------------------------------------------------------------

def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _strategy_cell(strategy: str, error: int = 0, kind: str | None = None) -> str:
    if strategy == "reject":
        return f"**reject** ({_error_label(error)})"
    if strategy == "translate" and kind:
        return f"translate ({kind})"
    return strategy


@cache
def _error_names() -> dict[int, str]:
    abi = adapters.abi(adapters.versions()[-1])
    return {code: info.name for code, info in abi.errors.items()}


def _error_label(code: int) -> str:
    name = _error_names().get(code)
    return f"{code} `{name}`" if name else str(code)


def render_markdown(table: CompatTable | None = None) -> str:
    t = table or load_table()
    out: list[str] = []
    w = out.append
    w("# Compatibility table")
    w("")
    w("<!-- Generated from adapters/compat.json by `python -m gpushim.compat.table --markdown`; do not edit. -->")
    w("")
    w("gpushim runs an application built against one CUDA runtime on a server whose driver implements another CUDA")
    w("version. For every session the server builds an adaptation policy from the client's runtime version, the")
    w("driver's version and the GPUs it found (`gpushim.compat.policy.build_policy`), and every call goes through it.")
    w("`gpushim compat-check BINARY --gpu NAME --driver X.Y` applies the same table to a binary without running it.")
    w("")
    w("Strategies:")
    w("")
    for k in STRATEGIES:
        w(f"- **{k}**: {t.strategies.get(k, '')}")
    w("")
    w("Versions are CUDA versions (a driver is named by the CUDA version it implements: 12.4 is r550). Ranges are")
    w("inclusive at the low end; `11.x` means any 11 release.")
    w("")

    w("## Runtime families and their minimum drivers")
    w("")
    w("| client runtime | toolkits | a real libcudart needs driver | Linux driver | PTX ISA emitted (up to) "
      "| cubin ELF ABI |")
    w("|---|---|---|---|---|---|")
    for f in sorted(t.families.values(), key=lambda f: f.major):
        w(f"| {f.major}.x | {f.toolkits} | ≥ {fmt(f.min_driver)} | ≥ {f.min_linux_driver} | "
          f"{f.ptx_isa_max[0]}.{f.ptx_isa_max[1]} | {f.cubin_abi[0]}.{f.cubin_abi[1]} |")
    w("")
    w("### Whole sessions")
    w("")
    w("The first matching row decides.")
    w("")
    w("| client runtime | server driver | strategy | reason |")
    w("|---|---|---|---|")
    for r in t.session:
        cond = {"client_le_driver": " (client ≤ driver)"}.get(r.when or "", "")
        reason = r.reason.replace("{client}", "X").replace("{driver}", "Y").replace("{linux}", "its Linux release")
        w(f"| {r.client.describe()} | {r.driver.describe()}{cond} | {_strategy_cell(r.strategy, r.error)} | "
          f"{_md_escape(reason)} |")
    w("")

    w("## Drivers: PTX ISA and cubin ABI")
    w("")
    w("A driver JIT-compiles PTX up to its own ISA and loads cubins up to its ELF ABI. Newer PTX is re-labelled to")
    w("the driver's ISA when a feature scan of the module finds nothing newer (instruction families and the")
    w("`.target`); otherwise loading fails with 222 `cudaErrorUnsupportedPtxVersion` and the reason.")
    w("")
    w("| driver (CUDA) | Linux driver | PTX ISA | cubin ELF ABI |")
    w("|---|---|---|---|")
    for d in t.drivers:
        abi = f"{d.cubin_abi_max[0]}.{d.cubin_abi_max[1]}"
        w(f"| {fmt(d.cuda)} | {d.linux} | {d.ptx_isa[0]}.{d.ptx_isa[1]} | ≤ {abi} |")
    w("")
    w("### Architectures")
    w("")
    w("| compute capability | first driver | PTX ISA its `.target` needs | last driver major |")
    w("|---|---|---|---|")
    for a in t.architectures.values():
        name = "arch-specific (`sm_90a`, …)" if a.name == "arch_specific" else a.name
        w(f"| {name} | {fmt(a.min_driver)} | {a.min_isa[0]}.{a.min_isa[1]} | {a.last_major or '—'} |")
    w("")
    w("Image choice per device: a cubin of the device's major with the highest minor not above the device's (exact")
    w("match only for arch-specific cubins) whose ELF ABI and architecture the driver supports; else the PTX of the")
    w("highest architecture not above the device's, JIT-compiled (re-labelled when needed); else 209")
    w("`cudaErrorNoKernelImageForDevice`.")
    w("")

    w("## Driver features")
    w("")
    w("| feature | matters to clients | needs driver | below that | how |")
    w("|---|---|---|---|---|")
    for f in t.features.values():
        need = "—" if f.min_driver is None else f"≥ {fmt(f.min_driver)}"
        cell = _strategy_cell(f.below, f.error)
        w(f"| `{f.name}` | {f.clients.describe()} | {need} | {cell} | {_md_escape(f.how)} |")
    w("")

    w("## APIs")
    w("")
    w("Calls not listed run natively. The first matching row per API decides.")
    w("")
    w("| API | client runtime | server driver | strategy | reason |")
    w("|---|---|---|---|---|")
    for r in t.apis:
        names = ", ".join(f"`{a}`" for a in r.apis)
        cond = {"client_newer_major": " (older major than the client)"}.get(r.when or "", "")
        reason = r.reason.replace("{api}", "the call").replace("{driver}", "Y").replace("{client}", "X")
        w(f"| {names} | {r.client.describe()} | {r.driver.describe()}{cond} | "
          f"{_strategy_cell(r.strategy, r.error, r.kind)} | {_md_escape(reason)} |")
    w("")
    w("### Structs whose layout depends on the client's runtime")
    w("")
    w("Filled field by field at the offsets of the client's layout, never more bytes than the client's `sizeof`")
    w("(translate (struct) whenever the client's layout differs from the one of the driver's CUDA major).")
    w("")
    versions = adapters.versions()
    w("| struct | APIs | " + " | ".join(f"{v}" for v in versions) + " |")
    w("|---|---|" + "---|" * len(versions))
    by_struct: dict[str, list[str]] = {}
    for api, s in t.structs.items():
        by_struct.setdefault(s, []).append(api)
    for s, apis in by_struct.items():
        sizes = []
        for v in versions:
            lay = adapters.abi(v).layouts.get(s)
            sizes.append(str(lay["size"]) if lay else "—")
        w(f"| `{s}` | {', '.join(f'`{a}`' for a in apis)} | " + " | ".join(sizes) + " |")
    w("")

    w("## Error codes")
    w("")
    w(_md_escape(t.raw["errors"]["about"]))
    w("")
    known = {v: set(adapters.abi(v).errors) for v in versions}
    w("| code | name | known to | returned to older clients as |")
    w("|---|---|---|---|")
    for code, (to, why) in sorted(t.error_map.items()):
        name = _error_names().get(code, "?")
        first = next((v for v in versions if code in known[v]), "?")
        w(f"| {code} | `{name}` | ≥ {first} | {_error_label(to)} ({_md_escape(why.split('->')[0].strip())}) |")
    w(f"| other | | | {_error_label(t.error_default)} |")
    w("")
    w("## Sources")
    w("")
    for k, v in t.raw.get("sources", {}).items():
        w(f"- {k}: {_md_escape(v)}")
    w("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--markdown"]:
        sys.stdout.write(render_markdown())
        return 0
    if args == ["--check"]:
        load_table()
        print(f"{table_path()}: ok")
        return 0
    print("usage: python -m gpushim.compat.table --markdown | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
