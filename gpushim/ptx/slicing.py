"""Slices of a large PTX module: the text the engine needs for one kernel.

Libraries ship PTX modules of hundreds of kernels (CuPy's CUB module: 383 kernels, 21 MB) of which a program
launches a few; parsing and compiling all of them costs minutes. A slice keeps the module's header, variables
and declarations, and the definitions of one kernel and of the functions it refers to (transitively); every
other definition becomes as many empty lines, so line numbers in error messages stay those of the module.

Comments are blanked first. A module is sliced only when its kernels cannot share code through memory: no
variable initialiser and no `mov` takes a function's address (a pointer made in one slice would mean nothing in
another), and no variable has an address initialiser (each slice would write it again at its first launch).
Otherwise `PtxSlicer.of` answers None and the module is loaded whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SLICE_MIN_BYTES = 1 << 20  # below this the whole module loads in about a second

_HEADER = re.compile(r"^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.(entry|func)\b", re.M)
_NAME = re.compile(
    r"\.(?:entry|func)\s*(?:(?:\.noreturn|\.attribute\s*\([^)]*\))\s*)*(?:\([^)]*\)\s*)?"
    r"(?:(?:\.noreturn|\.attribute\s*\([^)]*\))\s*)*([A-Za-z_$%][\w$]*)"
)
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_BRACE = re.compile(r"[{}]")
_TAKE_ADDRESS = re.compile(r"\bmov\.[ub]64\s+%\w+\s*,\s*([A-Za-z_$][\w$]*)\s*;")
_COMMENT = re.compile(r"//|/\*")
_LINE_COMMENT = re.compile(r"//[^\n]*")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)


@dataclass(frozen=True)
class _Def:
    name: str
    kind: str  # "entry" | "func"
    start: int
    end: int


class PtxSlicer:
    def __init__(self, text: str, defs: dict[str, _Def]) -> None:
        self.text = text
        self.defs = defs
        self._refs: dict[str, set[str]] = {}

    @classmethod
    def of(cls, text: str, min_bytes: int = SLICE_MIN_BYTES) -> PtxSlicer | None:
        """A slicer for text, or None when the module is small or must be loaded whole (see the module doc)."""
        if len(text) < min_bytes:
            return None
        if _COMMENT.search(text):  # blanked (newlines kept): a brace in a comment must not count
            text = _BLOCK_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
            text = _LINE_COMMENT.sub(lambda m: " " * len(m.group(0)), text)
        defs: dict[str, _Def] = {}
        pos = 0
        for m in _HEADER.finditer(text):
            if m.start() < pos:  # inside the previous definition's body
                continue
            semi, brace = text.find(";", m.end()), text.find("{", m.end())
            if brace < 0 or (0 <= semi < brace):
                continue  # a declaration: it stays in every slice
            name = _NAME.match(text, m.start() + m.group(0).index("." + m.group(1)))
            if name is None:
                return None
            end = _body_end(text, brace)
            if end < 0 or name.group(1) in defs:
                return None
            defs[name.group(1)] = _Def(name.group(1), m.group(1), m.start(), end)
            pos = end
        if not defs:
            return None
        rest = _without(text, defs.values())
        if re.search(r"=[^;]*?\b[A-Za-z_$]", rest):
            return None  # an initialiser naming a symbol (an address): each slice would relocate it again
        if any(m.group(1) in defs for m in _TAKE_ADDRESS.finditer(text)):
            return None
        return cls(text, defs)

    def kernels(self) -> list[str]:
        return [n for n, d in self.defs.items() if d.kind == "entry"]

    def _references(self, name: str) -> set[str]:
        refs = self._refs.get(name)
        if refs is None:
            d = self.defs[name]
            body = self.text[d.start : d.end]
            refs = {w for w in set(_IDENT.findall(body)) if w in self.defs and w != name}
            self._refs[name] = refs
        return refs

    def closure(self, kernel: str | None) -> set[str]:
        """The definitions a slice for kernel (None: for the module's variables alone) keeps."""
        todo = [kernel] if kernel else []
        keep: set[str] = set()
        while todo:
            n = todo.pop()
            if n in keep:
                continue
            keep.add(n)
            todo.extend(r for r in self._references(n) if self.defs[r].kind == "func")
        return keep

    def slice(self, kernel: str | None) -> str:
        """The module's text with every definition outside closure(kernel) blanked (newlines kept)."""
        keep = self.closure(kernel)
        return _without(self.text, [d for n, d in self.defs.items() if n not in keep], keep_lines=True)


def _body_end(text: str, brace: int) -> int:
    depth = 0
    for m in _BRACE.finditer(text, brace):
        depth += 1 if m.group(0) == "{" else -1
        if depth == 0:
            return m.end()
    return -1


def _without(text: str, defs, keep_lines: bool = False) -> str:
    out, pos = [], 0
    for d in sorted(defs, key=lambda d: d.start):
        out.append(text[pos : d.start])
        if keep_lines:
            out.append("\n" * text.count("\n", d.start, d.end))
        pos = d.end
    out.append(text[pos:])
    return "".join(out)
