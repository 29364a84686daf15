"""A light, non-executing parse of PTX text: header directives, kernel entries with their parameter
sizes/alignments, and the instruction families used that later PTX ISA versions introduced.

The family table gives the PTX ISA version that introduced each family, from the release notes of NVIDIA's
PTX ISA document (approximate where a family grew over several releases; the earliest form is listed).  It is
meant for deciding whether the ``.version`` of a PTX module may be lowered for an older driver (CUDA-FACTS §6):
a module whose families all predate the target ISA is a candidate; the final check is the older ptxas/driver.
Families that matter to the emulator but not to the ISA (textures, surfaces, printf) are listed with (1, 0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import FatbinError

#: family -> PTX ISA version that introduced it
FEATURE_MIN_ISA: dict[str, tuple[int, int]] = {
    "shfl.sync": (6, 0), "vote.sync": (6, 0), "match.sync": (6, 0), "bar.warp.sync": (6, 0), "wmma": (6, 0),
    "activemask": (6, 2), "nanosleep": (6, 3), "mma": (6, 4), "ldmatrix": (6, 5),
    "cp.async": (7, 0), "mbarrier": (7, 0), "redux.sync": (7, 0), "bf16": (7, 0), "tf32": (7, 0),
    "alloca": (7, 3), "createpolicy": (7, 4), "applypriority": (7, 4), "discard": (7, 4), "fence.proxy": (7, 5),
    "griddepcontrol": (7, 8), "barrier.cluster": (7, 8), "mapa": (7, 8), "getctarank": (7, 8), "cluster": (7, 8),
    "stmatrix": (7, 8), "movmatrix": (7, 8), "fp8": (7, 8),
    "elect.sync": (8, 0), "wgmma": (8, 0), "setmaxnreg": (8, 0), "cp.async.bulk": (8, 0),
    "cp.async.bulk.tensor": (8, 0), "cp.reduce.async.bulk": (8, 0),
    "multimem": (8, 1), "red.async": (8, 1), "st.async": (8, 1),
    "tensormap": (8, 3), "b128": (8, 3),
    "tcgen05": (8, 6), "st.bulk": (8, 6), "clusterlaunchcontrol": (8, 6),
    "tex": (1, 0), "tld4": (1, 0), "txq": (1, 0), "suld": (1, 0), "sust": (1, 0), "sured": (1, 0), "suq": (1, 0),
    "printf": (1, 0),
}

# opcode prefix -> family; the longest matching prefix wins
_OPCODE_FAMILIES: dict[str, str] = {
    "shfl.sync": "shfl.sync", "vote.sync": "vote.sync", "match": "match.sync", "bar.warp.sync": "bar.warp.sync",
    "wmma": "wmma", "activemask": "activemask", "nanosleep": "nanosleep", "mma": "mma", "ldmatrix": "ldmatrix",
    "cp.async": "cp.async", "cp.async.bulk": "cp.async.bulk", "cp.async.bulk.tensor": "cp.async.bulk.tensor",
    "cp.async.bulk.prefetch": "cp.async.bulk", "cp.reduce.async.bulk": "cp.reduce.async.bulk",
    "mbarrier": "mbarrier", "redux.sync": "redux.sync", "alloca": "alloca", "stacksave": "alloca",
    "stackrestore": "alloca", "createpolicy": "createpolicy", "applypriority": "applypriority",
    "discard": "discard", "fence.proxy": "fence.proxy", "griddepcontrol": "griddepcontrol",
    "barrier.cluster": "barrier.cluster", "mapa": "mapa", "getctarank": "getctarank", "stmatrix": "stmatrix",
    "movmatrix": "movmatrix", "elect.sync": "elect.sync", "wgmma": "wgmma", "setmaxnreg": "setmaxnreg",
    "multimem": "multimem", "red.async": "red.async", "st.async": "st.async", "tensormap": "tensormap",
    "tcgen05": "tcgen05", "st.bulk": "st.bulk", "clusterlaunchcontrol": "clusterlaunchcontrol",
    "tex": "tex", "tld4": "tld4", "txq": "txq", "suld": "suld", "sust": "sust", "sured": "sured", "suq": "suq",
}
_MODIFIER_FAMILIES = {
    ".bf16": "bf16", ".bf16x2": "bf16", ".tf32": "tf32", ".e4m3": "fp8", ".e5m2": "fp8", ".e4m3x2": "fp8",
    ".e5m2x2": "fp8", ".b128": "b128",
}
_CLUSTER_SREG = re.compile(r"%(?:cluster_\w+|clusterid|nclusterid|is_explicit_cluster)\b")
_PRINTF = re.compile(r"\bcall(?:\.uni)?\b[^;]*\bvprintf\b")

_SCALAR_SIZES = {
    "b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
    "b32": 4, "u32": 4, "s32": 4, "f32": 4, "f16x2": 4, "bf16x2": 4,
    "b64": 8, "u64": 8, "s64": 8, "f64": 8, "b128": 16,
    "texref": 8, "samplerref": 8, "surfref": 8,
}

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$%][\w$]*)\s*(\(([^)]*)\))?")
_HEADER = re.compile(r"^\s*\.(version|target|address_size)\s+([^\n]+)", re.M)
_LABEL = re.compile(r"^[A-Za-z_$%][\w$]*:\s*")
_PRED = re.compile(r"^@!?%?\w+\s+")
_DIRECTIVE_START = re.compile(r"^\.")


@dataclass(frozen=True, slots=True)
class PtxInfo:
    version: tuple[int, int]
    target: str  # first target, e.g. "sm_75"
    address_size: int
    entries: dict[str, list[tuple[int, int]]]  # kernel -> [(size, align)] of its parameters
    features: set[str] = field(default_factory=set)
    targets: tuple[str, ...] = ()  # every .target token ("sm_75", "texmode_independent", ...)

    def param_layout(self, entry: str) -> list[tuple[int, int]]:
        """(offset, size) of each parameter of ``entry``, laid out by size and alignment like the cubin's."""
        out, pos = [], 0
        for size, align in self.entries[entry]:
            pos = (pos + align - 1) // align * align
            out.append((pos, size))
            pos += size
        return out

    def param_bytes(self, entry: str) -> int:
        layout = self.param_layout(entry)
        return layout[-1][0] + layout[-1][1] if layout else 0

    @property
    def min_isa(self) -> tuple[int, int]:
        """The oldest PTX ISA that has every instruction family this module uses (a lower bound)."""
        return max((FEATURE_MIN_ISA.get(f, (1, 0)) for f in self.features), default=(1, 0))


def _param(decl: str) -> tuple[int, int]:
    tokens = decl.replace("\n", " ").split()
    if not tokens or tokens[0] != ".param":
        raise FatbinError(f"unexpected kernel parameter declaration {decl.strip()!r}")
    size = align = None
    count = 1
    after_ptr = False
    i = 1
    while i < len(tokens):
        t = tokens[i]
        if t.startswith(".ptr"):
            after_ptr = True  # .ptr .space .align N describe the pointee, not the parameter
            for part in t.split(".")[2:]:
                if part == "align":
                    i += 1
        elif t == ".align":
            i += 1
            if not after_ptr:
                try:
                    align = int(tokens[i], 0)
                except (IndexError, ValueError):
                    raise FatbinError(f"bad .align in {decl.strip()!r}") from None
        elif t.startswith(".") and t[1:] in _SCALAR_SIZES and size is None:
            size = _SCALAR_SIZES[t[1:]]
        elif not t.startswith("."):
            for dim in re.findall(r"\[\s*(\d*)\s*\]", t):
                count *= int(dim) if dim else 0
        i += 1
    if size is None:
        raise FatbinError(f"no type in kernel parameter {decl.strip()!r}")
    return size * count, align or size


def _features(body: str) -> set[str]:
    found: set[str] = set()
    prefixes = sorted(_OPCODE_FAMILIES, key=len, reverse=True)
    for stmt in re.split(r"[;{}]", body):
        s = stmt.strip()
        while m := _LABEL.match(s):
            s = s[m.end():]
        s = _PRED.sub("", s)
        if not s or _DIRECTIVE_START.match(s):
            continue
        opcode = s.split(None, 1)[0]
        for p in prefixes:
            if opcode == p or opcode.startswith(p + "."):
                found.add(_OPCODE_FAMILIES[p])
                break
        for mod, fam in _MODIFIER_FAMILIES.items():
            if mod + "." in opcode + ".":
                found.add(fam)
        if _CLUSTER_SREG.search(s):
            found.add("cluster")
        if opcode.startswith("call") and _PRINTF.search(s):
            found.add("printf")
    return found


def ptx_info(ptx_text: str) -> PtxInfo:
    """Parse the header, kernel entries and instruction families of a PTX module."""
    text = _COMMENTS.sub("", ptx_text.replace("\0", ""))
    header = {}
    for m in _HEADER.finditer(text):
        header.setdefault(m.group(1), m.group(2).strip().rstrip(";").strip())
    if "version" not in header:
        raise FatbinError("PTX has no .version directive")
    try:
        major, minor = (int(x) for x in header["version"].split(".")[:2])
    except ValueError:
        raise FatbinError(f"bad PTX .version {header['version']!r}") from None
    targets = tuple(t.strip() for t in header.get("target", "").split(",") if t.strip())
    try:
        address_size = int(header.get("address_size", "32"))
    except ValueError:
        raise FatbinError(f"bad .address_size {header['address_size']!r}") from None
    entries: dict[str, list[tuple[int, int]]] = {}
    for m in _ENTRY.finditer(text):
        params = m.group(3) or ""
        entries[m.group(1)] = [_param(p) for p in params.split(",") if p.strip()]
    return PtxInfo((major, minor), targets[0] if targets else "", address_size, entries, _features(text), targets)
