"""Where a cudaMalloc + cudaFree of the emulator goes, in process (CPU time, `time.process_time`): the session's
account against the host-RAM ledger (a cross-process lock and the slots' total), the device-memory allocator
with and without it, and the whole server side of the two calls through `Session.dispatch` (validation, routing,
the implicit synchronisation of the free, the replies packed). Other sessions' slots are held in the ledger, as
on a shared server.

    python3 bench/malloc_bench.py [--n 10000] [--repeat 7] [--size 1048576] [--peers 4]

Medians (and minimums) of `repeat` runs of `n` pairs, each case interleaved with the others. To compare two
trees, run each tree's copy in turn a few times (the machine's load moves every number).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])  # not bench/: its profile.py would shadow the stdlib's

from gpushim.backends.accounting import HostLedger, MemoryAccount  # noqa: E402
from gpushim.backends.emulator.backend import EmulatorBackend  # noqa: E402
from gpushim.backends.emulator.memory import DeviceMemory  # noqa: E402
from gpushim.protocol import CALL, OPS_BY_NAME  # noqa: E402
from gpushim.server.modules import ModuleStore  # noqa: E402
from gpushim.server.session import Session, SessionInfo  # noqa: E402
from gpushim.wire import pack  # noqa: E402


def cases(size: int, peers: int) -> dict[str, Callable[[int], None]]:
    be = EmulatorBackend(memory_limit=1 << 30)
    ledger = be.ledger or HostLedger(1 << 40)
    held = [MemoryAccount(None, ledger) for _ in range(peers)]  # other sessions' slots (this process holds them)
    for a in held:
        a.charge(1 << 20)
    acct = MemoryAccount(None, ledger)
    bare = DeviceMemory(1 << 30)
    charged = DeviceMemory(1 << 30, account=MemoryAccount(None, ledger))
    last: list = [None]

    def send(msg: list) -> None:
        last[0] = msg
        pack(msg)

    s = Session(be, SessionInfo(1, os.getpid(), "malloc-bench", 13000, 0, [0]), send,
                logging.getLogger("malloc-bench"), ModuleStore(Path(tempfile.mkdtemp(prefix="gpushim-mb-"))))
    malloc, free = OPS_BY_NAME["MALLOC"].id, OPS_BY_NAME["FREE"].id

    def account(n: int) -> None:
        for _ in range(n):
            acct.charge(size)
            acct.release(size)

    def memory(mem: DeviceMemory) -> Callable[[int], None]:
        def run(n: int) -> None:
            for _ in range(n):
                mem.free(mem.alloc(size))
        return run

    def dispatch(n: int) -> None:
        for i in range(n):
            s.dispatch([CALL, 2 * i, malloc, [0, size]])
            s.dispatch([CALL, 2 * i + 1, free, [last[0][3][0]]])
        assert last[0][2] == 0, last[0]

    return {"MemoryAccount charge + release (host ledger)": account,
            "DeviceMemory alloc + free, no ledger": memory(bare),
            "DeviceMemory alloc + free, charged to the ledger": memory(charged),
            "Session.dispatch MALLOC + FREE (the server side)": dispatch}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--peers", type=int, default=4, help="other sessions' slots held in the host ledger")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    runs = cases(args.size, args.peers)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for fn in runs.values():
        fn(min(1000, args.n))  # warm-up
    for _ in range(args.repeat):
        for name, fn in runs.items():
            t = time.process_time()
            fn(args.n)
            times[name].append((time.process_time() - t) / args.n * 1e6)
    print(f"CPU time per pair of {args.size} bytes, median (min) of {args.repeat} x {args.n}, "
          f"load {os.getloadavg()[0]:.1f}")
    for name, v in times.items():
        print(f"  {name:52s} {statistics.median(v):7.2f} µs ({min(v):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
