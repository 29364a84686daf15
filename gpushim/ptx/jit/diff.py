"""GPUSHIM_PTX_ENGINE=diff: every launch of a kernel the JIT compiles runs on both engines, from the same
memory, and the device memory (every allocation), the outcome (error code) and, for launches that succeed, the
printf output (as a multiset of the calls' texts: the engines order threads differently) must be identical
afterwards; a difference fails the launch with LAUNCH_FAILURE naming the first differing byte or text. The
interpreter's result and output are what the program sees. For differential tests, not for production (it
copies all device memory twice)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx.jit import log

stats = {"compared": 0, "differ": 0}


def _snapshot(memory) -> dict[int, bytes]:
    return {a.addr: bytes(memory.read(a.addr, a.size)) for a in memory.allocations()}


def _restore(memory, snap: dict[int, bytes]) -> None:
    for addr, data in snap.items():
        memory.write(addr, data)


def launch_both(jk, run_interp, run_jit, kernel: str, memory, output: Callable[[bytes], None]) -> int:
    """run_interp(out) / run_jit(out): the launch on each engine (thread-instructions), printing to out;
    returns the interpreter's."""
    before = _snapshot(memory)
    err_i = err_j = None
    count = 0
    out_i: list[bytes] = []
    out_j: list[bytes] = []
    try:
        count = run_interp(lambda text: (out_i.append(text), output(text)))
    except CudaError as e:
        err_i = e
    after_i = _snapshot(memory)
    _restore(memory, before)
    try:
        run_jit(out_j.append)
    except CudaError as e:
        err_j = e
    after_j = _snapshot(memory)
    _restore(memory, after_i)
    stats["compared"] += 1
    problem = None
    ci = err_i.code if err_i else 0
    cj = err_j.code if err_j else 0
    if ci != cj:
        problem = f"interpreter error {ci} ({err_i}), JIT error {cj} ({err_j})"
    elif not err_i:
        for addr, data in after_i.items():
            other = after_j.get(addr)
            if other != data:
                k = next(i for i, (x, y) in enumerate(zip(data, other or b"", strict=False)) if x != y)
                problem = f"memory differs at {addr + k:#x}: interpreter {data[k]:#04x}, JIT {other[k]:#04x}"
                break
        if problem is None and Counter(out_i) != Counter(out_j):
            only = (Counter(out_i) - Counter(out_j)) or (Counter(out_j) - Counter(out_i))
            problem = f"printf output differs: {next(iter(only))!r} printed by one engine only (or more often)"
    if problem:
        stats["differ"] += 1
        log.error("PTX engines differ on kernel %s: %s", kernel, problem)
        raise CudaError(Err.LAUNCH_FAILURE, f"PTX engines differ on kernel {kernel}: {problem}")
    log.info("PTX engines agree on kernel %s", kernel)
    if err_i:
        raise err_i
    return count
