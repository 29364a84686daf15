"""Exceptions of the PTX engine."""

from __future__ import annotations


class PtxError(Exception):
    """The PTX text is malformed (a syntax error, an undefined name, an inconsistent declaration)."""


class PtxUnsupported(PtxError):
    """The PTX is valid but uses something the engine cannot execute (textures, tensor cores, recursion...).

    Raised when the module loads, never at run time; the message names the instruction, the kernel and the line.
    """

    def __init__(self, what: str, kernel: str = "", line: int = 0) -> None:
        where = f" in kernel {kernel}" if kernel else ""
        at = f" (line {line})" if line else ""
        super().__init__(f"unsupported PTX: {what}{where}{at}")
        self.what = what
        self.kernel = kernel
        self.line = line
