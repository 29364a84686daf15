"""A kernel whose tier 1 compiles in the background (no llvmlite import here: PtxModule.launch checks for it).

With the default engine ("auto") and GPUSHIM_PTX_JIT_TIER1=background (the default), a kernel's first launch
does not wait for its code: the interpreter starts the launch while tier 1 compiles in a thread, and between two
of the interpreter's batches of blocks the launch hands the blocks not yet run to the compiled code
(PtxModule._interpret_until_compiled). `sync` compiles at the first launch, as the "jit" and "diff" engines
always do.
"""

from __future__ import annotations

import os
import threading


def background() -> bool:
    return os.environ.get("GPUSHIM_PTX_JIT_TIER1", "background").strip().lower() != "sync"


class Pending:
    def __init__(self) -> None:
        self._done = threading.Event()
        self.ok = False  # the compile produced a kernel (not: unsupported, or a JIT bug)
        self.result: object = None  # what the compile answered (kernel.get_kernel: a JitKernel or why not)

    def finish(self, ok: bool, result: object = None) -> None:
        """Called before the compile cache swaps this Pending for the result: whoever sees the compiled kernel
        in the cache also sees this Pending ready (a test or a launch waiting for either must not race)."""
        self.ok, self.result = ok, result
        self._done.set()

    def ready(self) -> bool:
        """The compiled kernel is there to take over."""
        return self._done.is_set() and self.ok

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)


class Handoff(Exception):  # noqa: N818 (not an error: the interpreter stops for the compiled code)
    """Raised by the interpreter's batch loop between batches when the compiled code is ready: `count`
    thread-instructions ran, blocks from `block` on remain."""

    def __init__(self, count: int, block: int) -> None:
        super().__init__(count, block)
        self.count = count
        self.block = block
