"""In-process cost of a synchronous cudaMemGetInfo (MEM_INFO through `Session.dispatch`) with --peers other
processes holding slots of the emulator's host-RAM ledger (gpushim/backends/accounting.py), and of the ledger's
total alone. CPU time of this process (`time.process_time`), best of --repeat runs of --n calls.

    python3 bench/meminfo_bench.py [--peers 4] [--n 5000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])  # not bench/: its profile.py would shadow the stdlib's

from gpushim.backends.accounting import MemoryAccount  # noqa: E402
from gpushim.backends.emulator.backend import EmulatorBackend  # noqa: E402
from gpushim.protocol import CALL, OPS_BY_NAME  # noqa: E402
from gpushim.server.modules import ModuleStore  # noqa: E402
from gpushim.server.session import Session, SessionInfo  # noqa: E402


def best(fn: Callable[[], object], n: int, repeat: int) -> float:
    """CPU µs per call, best of repeat runs."""
    out = []
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        out.append((time.process_time() - t0) / n * 1e6)
    return min(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", type=int, default=4, help="other processes holding 1 MiB in the ledger")
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    be = EmulatorBackend(memory_limit=1 << 30, memory_cap=8 << 30)
    assert be.ledger is not None
    peers = []
    try:
        for _ in range(args.peers):  # sessions' workers: each joins the ledger, allocates and waits
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                try:
                    MemoryAccount(None, be.ledger).charge(1 << 20)
                    os.write(w, b"x")
                    time.sleep(600)
                finally:
                    os._exit(0)
            peers.append(pid)
            os.read(r, 1)
            os.close(r)
            os.close(w)
        sent: list = []
        s = Session(be, SessionInfo(1, 1, "mb", 13000, 0, [0]), sent.append, logging.getLogger("mb"),
                    ModuleStore(Path(tempfile.mkdtemp(prefix="gpushim-mb-"))))
        frame = [CALL, 1, OPS_BY_NAME["MEM_INFO"].id, [0]]
        s.dispatch(frame)
        want = (1 << 30) if be.ledger.used() + (1 << 30) <= be.ledger.cap else None
        assert sent and sent[-1][2] == 0 and (want is None or sent[-1][3][0] == want), sent[-1]
        print(f"cudaMemGetInfo, CPU µs per call (best of {args.repeat} x {args.n}), {args.peers} other processes "
              f"in the ledger")
        ledger = be.ledger
        for name, fn in (("Session.dispatch of MEM_INFO (all of it)", lambda: s.dispatch(frame)),
                         ("HostLedger.used alone", ledger.used)):
            print(f"  {name:45s} {best(fn, args.n, args.repeat):8.2f}")
            sent.clear()
    finally:
        for pid in peers:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
