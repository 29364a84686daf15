"""The compiling PTX engine: PTX -> LLVM IR (llvmlite) -> native code, for kernels within a supported subset.

`engine()` reads $GPUSHIM_PTX_ENGINE: `interp` (the interpreter only), `jit` or `auto` (the default; both mean:
compile kernels the JIT supports, interpret the rest, logging each fallback once) or `diff` (run compiled
kernels on both engines and compare memory afterwards, jit/diff.py). The interpreter is the reference; see
README.md in this folder for what the JIT covers and how it differs.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("gpushim.ptx.jit")


def engine() -> str:
    e = os.environ.get("GPUSHIM_PTX_ENGINE", "auto").strip().lower() or "auto"
    if e not in ("auto", "jit", "interp", "diff"):
        log.warning("GPUSHIM_PTX_ENGINE=%s is not auto, jit, interp or diff: using auto", e)
        e = "auto"
    if e != "interp":
        try:
            import llvmlite  # noqa: F401
        except ImportError:  # pragma: no cover - llvmlite is an install requirement
            log.warning("llvmlite is not installed: PTX kernels run on the interpreter")
            return "interp"
    return e
