"""In-process cost of one posted empty <<<1,1>>> launch (and of a one-store kernel's, which takes the scheduler's
token and runs on the PTX engine) through `Session.dispatch` (validation, the session's op, the emulator backend's
bookkeeping, the scheduler's gate with a real DeviceArbiter, the PTX engine), and of its layers on their own. CPU
time of this process (`time.process_time`), best of --repeat runs of --n calls.

    python3 bench/launch_bench.py [--n 20000] [--repeat 5] [--sched fair|off|none]
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])  # not bench/: its profile.py would shadow the stdlib's

from gpushim.backends.emulator.backend import EmulatorBackend  # noqa: E402
from gpushim.protocol import OPS_BY_NAME, POST  # noqa: E402
from gpushim.server.modules import ModuleStore  # noqa: E402
from gpushim.server.scheduler import DeviceArbiter, SchedConfig  # noqa: E402
from gpushim.server.session import Session, SessionInfo  # noqa: E402

EMPTY_PTX = b""".version 7.0
.target sm_70
.address_size 64
.visible .entry empty()
{
    ret;
}
.visible .entry store(.param .u64 p)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, 7;
    st.global.u32 [%rd1], %r1;
    ret;
}
"""


def best(fn, n: int, repeat: int) -> float:  # noqa: ANN001
    """CPU µs per call, best of repeat runs."""
    out = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn(n)
        out.append((time.process_time() - t0) / n * 1e6)
    return min(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sched", default="fair", help="the scheduler's policy (fair, priority, off) or 'none' "
                    "(no arbiter attached)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    store = ModuleStore(Path(tempfile.mkdtemp(prefix="gpushim-lb-")))
    sent: list = []
    s = Session(EmulatorBackend(memory_limit=1 << 30), SessionInfo(1, 1, "lb", 13000, 0, [0]), sent.append,
                logging.getLogger("lb"), store)
    if args.sched != "none":
        arb = DeviceArbiter(1, 4, SchedConfig(policy=args.sched))
        slot = arb.open_slot(1, 1, 0)
        s.bs.attach_scheduler(arb, slot)
    digest = hashlib.sha256(EMPTY_PTX).digest()
    s.dispatch([POST, 1, OPS_BY_NAME["MODULE_LOAD"].id, [digest, EMPTY_PTX]])
    launch = [POST, 2, OPS_BY_NAME["LAUNCH"].id, [0, digest, "empty", [1, 1, 1], [1, 1, 1], 0, 0, b""]]
    ptr = s.bs.malloc(0, 4)
    store = [POST, 3, OPS_BY_NAME["LAUNCH"].id, [0, digest, "store", [1, 1, 1], [1, 1, 1], 0, 0,
                                                ptr.to_bytes(8, "little")]]
    bs = s.bs
    stream = s._stream(0, 0)
    mod = bs._module(digest)
    eng = mod.engine("empty")
    mem = bs._mem(0)
    syms = mod.place_symbols(0, mem)

    def dispatch(n: int) -> None:
        d = s.dispatch
        for _ in range(n):
            d(launch)

    def stored(n: int) -> None:
        d = s.dispatch
        for _ in range(n):
            d(store)

    def op(n: int) -> None:
        for _ in range(n):
            s.op_launch(0, digest, "empty", [1, 1, 1], [1, 1, 1], 0, 0, b"")

    def backend(n: int) -> None:
        for _ in range(n):
            bs.launch(0, digest, "empty", [1, 1, 1], [1, 1, 1], 0, stream, b"")

    def gate(n: int) -> None:
        for _ in range(n):
            with bs.gate(0):
                pass

    def engine(n: int) -> None:
        for _ in range(n):
            eng.launch("empty", (1, 1, 1), (1, 1, 1), 0, b"", mem, syms, print)

    pstore = ptr.to_bytes(8, "little")

    def engine_store(n: int) -> None:
        for _ in range(n):
            eng.launch("store", (1, 1, 1), (1, 1, 1), 0, pstore, mem, syms, print)

    def gate_store(n: int) -> None:  # what a kernel that is not empty pays around the engine
        for _ in range(n):
            with bs.gate(0) as charge:
                charge["work"] = 1

    dispatch(1000)
    stored(1000)
    assert not sent and s.sticky is None and s.deferred is None, (sent, s.sticky, s.deferred)
    print(f"one posted empty <<<1,1>>> launch, CPU µs per call (best of {args.repeat} x {args.n}), "
          f"scheduler {args.sched}, PTX engine {eng.engine}")
    for name, fn in (("Session.dispatch (all of it)", dispatch), ("Session.op_launch", op),
                     ("EmulatorBackend session .launch", backend), ("the scheduler's gate alone", gate),
                     ("PtxModule.launch alone", engine),
                     ("Session.dispatch, store<<<1,1>>> (one st.global)", stored),
                     ("  the scheduler's gate, charging work", gate_store),
                     ("  PtxModule.launch alone, store", engine_store)):
        print(f"  {name:50s} {best(fn, args.n, args.repeat):7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
