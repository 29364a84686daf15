"""Moving a running tier-1 launch to tier 2 between blocks.

A tier-1 launch of a kernel without tier-2 code registers here while it runs. One thread queues the kernel's
tier-2 compile once the launch has run long enough (kernel.HOT_S, counting the kernel's earlier tier-1 time),
and when the compile is done `ready()` sets the YIELD flag of the kernel's running launches: their block loop
stops after the current block and the launch goes on in tier 2 from the next one (kernel.JitKernel). Blocks
of a launch are independent (the JIT runs no cooperative launch, printf or warp-level code across blocks), so
the split changes no result.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from typing import TYPE_CHECKING

from gpushim.ptx.jit import layout as L

if TYPE_CHECKING:
    import numpy as np

    from gpushim.ptx.jit.kernel import JitKernel


class TierUp:
    def __init__(self) -> None:
        self._cv = threading.Condition(threading.Lock())
        self._wake_at = math.inf  # when the thread looks next (it is woken only for an earlier deadline)
        self._running: dict[int, tuple[float, JitKernel, np.ndarray]] = {}  # token -> (hot at, kernel, ctx)
        self._tokens = itertools.count(1)
        self._thread: threading.Thread | None = None

    def watch(self, jk: JitKernel, ctx: np.ndarray, hot_in: float | None) -> int:
        """Register a tier-1 launch about to run; hot_in: seconds after which its kernel's tier 2 is queued
        (None: not by this launch). The launch's YIELD flag is clear when this returns, unless tier 2 is
        already there."""
        with self._cv:
            token = next(self._tokens)
            ctx[L.YIELD] = 0
            self._running[token] = (math.inf if hot_in is None else time.monotonic() + hot_in, jk, ctx)
            if jk.t2 is not None:  # ready since the launch looked
                ctx[L.YIELD] = 1
            elif hot_in is not None and self._running[token][0] < self._wake_at:
                self._wake_at = self._running[token][0]
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name="ptx-jit-tierup", daemon=True)
                    self._thread.start()
                self._cv.notify()
        return token

    def done(self, token: int) -> None:
        """The launch's tier-1 code returned: from now on nothing sets its YIELD flag."""
        with self._cv:
            self._running.pop(token, None)

    def ready(self, jk: JitKernel) -> None:
        """jk's tier 2 is ready: its running tier-1 launches stop after their current block."""
        with self._cv:
            for _, k, ctx in self._running.values():
                if k is jk:
                    ctx[L.YIELD] = 1

    def _loop(self) -> None:
        with self._cv:
            while True:
                now = time.monotonic()
                wait = math.inf
                for at, jk, _ in list(self._running.values()):
                    if jk.t2_state != "none":
                        continue
                    if at <= now:
                        jk.queue_tier2()
                    else:
                        wait = min(wait, at - now)
                self._wake_at = now + wait
                self._cv.wait(None if wait == math.inf else wait)


tierup = TierUp()
