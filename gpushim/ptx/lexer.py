"""Tokeniser for PTX text: identifiers (opcodes and directives keep their dots), numbers, strings, punctuation."""

from __future__ import annotations

import re
from typing import NamedTuple

from gpushim.ptx.errors import PtxError


class Tok(NamedTuple):
    kind: str  # id | num | str | p (punctuation)
    text: str
    line: int


_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\f\v]+) |
    (?P<nl>\n) |
    (?P<lc>//[^\n]*) |
    (?P<bc>/\*.*?\*/) |
    (?P<str>"(?:[^"\\\n]|\\.)*") |
    (?P<num>0[xX][0-9a-fA-F]+U?|0[bB][01]+U?|0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16}
        |\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+U?) |
    (?P<id>[A-Za-z_$%.](?:[A-Za-z0-9_$.%]|::)*) |
    (?P<p>[{}()\[\];,:|!@+\-<>=*/])
    """,
    re.VERBOSE | re.DOTALL,
)

# Directives that end at the end of their line, without a semicolon.
_LINE_DIRECTIVES = re.compile(r"^[ \t]*\.(loc|file)\b[^\n]*$", re.MULTILINE)


def tokenize(text: str) -> list[Tok]:
    text = _LINE_DIRECTIVES.sub("", text)
    out: list[Tok] = []
    line = 1
    pos = 0
    n = len(text)
    match = _TOKEN.match
    while pos < n:
        m = match(text, pos)
        if m is None:
            raise PtxError(f"line {line}: unexpected character {text[pos]!r}")
        kind = m.lastgroup
        s = m.group()
        pos = m.end()
        if kind == "nl":
            line += 1
        elif kind == "ws" or kind == "lc":
            pass
        elif kind == "bc":
            line += s.count("\n")
        else:
            out.append(Tok(kind, s, line))  # type: ignore[arg-type]
    return out
