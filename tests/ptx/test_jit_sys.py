"""printf, assert, malloc and free in compiled kernels (gpushim/ptx/jit/ops_sys.py, hostcall.py), kernels in
kernels/jitsys.cu. Each test runs the kernel on the interpreter and on the JIT itself and compares them; with
the fixture's engine "diff" it also runs once more through diff.py (memory, outcome and the printf output as a
multiset compared there)."""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np
import pytest
from harness import ENGINE, Dev, compile_ptx

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx import heap
from gpushim.ptx.jit import diff


@pytest.fixture(scope="module")
def dev():
    return Dev(compile_ptx("jitsys"))


def _run(dev: Dev, eng: str, *launch) -> tuple[list[bytes], CudaError | None]:
    """The launch on engine eng: its printf output (one item per call) and its error."""
    ENGINE["name"] = eng
    dev.out.clear()
    err = None
    try:
        dev.launch(*launch)
    except CudaError as e:
        err = e
    return list(dev.out), err


def _both(dev: Dev, engine: str, kernel: str, *launch):
    """(interpreter's, JIT's) (output, error); the kernel must be compiled; under "diff" also a diff launch."""
    ENGINE["name"] = "jit"
    assert dev.mod.jit_kernel(kernel) is not None, "the JIT compiles it"
    ri = _run(dev, "interp", kernel, *launch)
    rj = _run(dev, "jit", kernel, *launch)
    if engine == "diff":
        before = diff.stats["differ"]
        rd = _run(dev, "diff", kernel, *launch)
        assert diff.stats["differ"] == before, rd[1]
        assert rd[0] == ri[0]  # the program sees the interpreter's output
    return ri, rj


def _per_thread(out: list[bytes]) -> dict[tuple[int, int], list[str]]:
    lines: dict[tuple[int, int], list[str]] = defaultdict(list)
    for chunk in out:
        for line in chunk.decode().splitlines():
            m = re.match(r"b(\d+) t(\d+) ", line)
            assert m, line
            lines[int(m[1]), int(m[2])].append(line)
    return lines


def test_printf_every_conversion_per_thread_in_program_order(dev, engine, rng):
    n = 150  # 3 blocks of 64, the last one partial
    x = rng.uniform(-20, 20, n).astype(np.float32)
    x[:3] = [0.0, np.inf, np.nan]
    px = dev.array(x)
    (oi, ei), (oj, ej) = _both(dev, engine, "printAll", 3, 64, px, n)
    assert ei is None and ej is None
    assert sorted(oi) == sorted(oj)  # the same texts, one call each (CUDA orders threads as it likes)
    pi, pj = _per_thread(oi), _per_thread(oj)
    assert pi == pj  # per thread: the same lines in program order
    assert len(pi) == n
    # and what C's printf prints (thread 5 of block 1: i = 69)
    lines = pj[1, 5]
    i, v = 69, float(x[69])
    assert lines[0] == (
        f"b1 t5 d={i - 5} i={-i} u={i * 7919} o={i * 8:o} x={i * 48879:x} X={i * 48879:X} c={chr(97 + 5)} "
        f"s=const local5 shb%"
    )
    assert lines[1].startswith(f"b1 t5 f={v:f} F={v * 3.0:F} e={v * 1e-7:e}")
    assert lines[3].startswith(f"b1 t5 [{i:5d}] [{i:<5d}] [{i:05d}] [{i:+d}] [{i: d}] [{v:.3f}]")
    assert lines[4] == f"b1 t5 n= s=ab zu={i * 5} null=(null) p=(nil)"
    assert lines[5:] == ["b1 t5 odd"] + ([f"b1 t5 big {v:.1f}"] if v > 10 else [])  # (t % 5 == 0: no loop)
    assert len(pj[0, 4]) == 6 + 4 + (x[4] > 10)  # even line, 4 loop iterations
    # the JIT's order (hostcall.py / README): threads one after the other between barriers, blocks in order
    keys = [tuple(int(g) for g in re.match(r"b(\d+) t(\d+) ", c.decode()).groups()) for c in oj]
    assert keys == sorted(keys)


def test_assert_in_a_later_block(dev, engine):
    n = 40 * 1024  # 40 blocks of 1024 threads; the interpreter runs 32 blocks per batch
    out = dev.empty(4 * n)
    bad = 36 * 1024 + 700
    (oi, ei), (oj, ej) = _both(dev, engine, "assertAt", 40, 1024, out, bad, n)
    assert ei is not None and ej is not None
    assert ej.code == ei.code == Err.ASSERT
    assert str(ej) == str(ei)  # "device-side assert triggered: <file>:<line>: <function>: block ... failed."
    assert "block: [36,0,0], thread: [700,0,0] Assertion `i != bad || k < 2` failed." in str(ej)
    assert oj == oi and len(oj) == 1  # CUDA's message, printed once
    # The blocks before the failing one ran to completion on both engines up to the interpreter's batch (CUDA
    # leaves the memory of a launch that failed undefined; the context is unusable after a device assert)
    got = dev.get(out, np.int32, n)
    assert np.array_equal(got[: 32 * 1024], np.arange(1, 32 * 1024 + 1))


def test_assert_that_holds_runs_compiled(dev, engine):
    n = 3000
    inp = dev.array(np.arange(n, dtype=np.int32) % 17)
    out = dev.empty(4 * n)
    (_, ei), (_, ej) = _both(dev, engine, "assertLoop", 12, 256, inp, out, n)
    assert ei is None and ej is None
    v = np.arange(n) % 17
    ref = sum(np.roll(v, -k) * (k + 1) for k in range(8))
    assert np.array_equal(dev.get(out, np.int32, n), ref)


def test_malloc_and_free_per_thread(dev, engine):
    n, m = 256, 37
    out = dev.empty(4 * n)
    allocs = len(dev.mem.allocations())
    (_, ei), (_, ej) = _both(dev, engine, "heapRw", 4, 64, out, m)
    assert ei is None and ej is None
    assert np.array_equal(dev.get(out, np.int32, n), np.arange(n) * (m * (m - 1) // 2))
    assert len(dev.mem.allocations()) == allocs and heap.heap_used(dev.mem) == 0  # all freed


def test_heap_limit_returns_null_and_free_null(dev, engine):
    # CUDA C Programming Guide, "Dynamic Global Memory Allocation and Operations": malloc returns NULL when the
    # heap (cudaLimitMallocHeapSize, 8 MiB by default) cannot hold the request; free(NULL) does nothing
    out = dev.empty(8 * 16)
    (_, ei), (_, ej) = _both(dev, engine, "heapLimit", 1, 16, out, 1 << 20)
    assert ei is None and ej is None
    assert dev.get(out, np.uint64, 16).tolist() == [1] * 8 + [2] * 8  # 8 blocks of 1 MiB fit, then NULL
    assert heap.heap_used(dev.mem) == 0


def test_use_after_free_faults_as_on_the_interpreter(dev, engine):
    out = dev.empty(4 * 8)
    (_, ei), (_, ej) = _both(dev, engine, "useAfterFree", 1, 8, out, 2)
    assert ei is not None and ej is not None and ej.code == ei.code == Err.ILLEGAL_ADDRESS
    assert str(ej) == str(ei)
    assert heap.heap_used(dev.mem) == 0
    (_, ei), (_, ej) = _both(dev, engine, "useAfterFree", 1, 8, out, 1)  # no store after the free
    assert ei is None and ej is None


def test_bad_format_address_is_the_interpreters_error(dev, engine):
    (oi, ei), (oj, ej) = _both(dev, engine, "badFormat", 1, 2, 0x10)
    assert ei is not None and ej is not None and ej.code == ei.code == Err.ILLEGAL_ADDRESS
    assert str(ej) == str(ei) and oi == oj == []
    (_, ei), (oj, ej) = _both(dev, engine, "badFormat", 1, 2, 0)  # NULL: printf prints "(null)"
    assert ei is None and ej is None and oj == [b"(null)"] * 2


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_concurrent_launches_each_use_their_own_callback(engine):
    """Launches of one compiled kernel in several threads at once (the GIL released around each, taken back by
    each host call): every launch prints its own lines to its own output and frees its own heap blocks."""
    import threading

    ptx = compile_ptx("jitsys")
    devs = [Dev(ptx) for _ in range(3)]
    assert devs[0].mod.jit_kernel("printAll") is devs[1].mod.jit_kernel("printAll")  # one compiled kernel
    results: dict[int, object] = {}

    def work(k: int) -> None:
        d = devs[k]
        try:
            px = d.array(np.full(100, k, np.float32))
            out = d.empty(4 * 128)
            for _ in range(4):
                d.mod.engine = "jit"
                d.out.clear()
                d.mod.launch("printAll", (2, 1, 1), (64, 1, 1), 0, d.pack("printAll", px, 100), d.mem, d.symbols,
                             d.out.append)  # fmt: skip
                d.mod.launch("heapRw", (2, 1, 1), (64, 1, 1), 0, d.pack("heapRw", out, 5), d.mem, d.symbols,
                             d.out.append)  # fmt: skip
            results[k] = (_per_thread(d.out), d.get(out, np.int32, 128).tolist())
        except Exception as e:  # reported below
            results[k] = e

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    for k in range(3):
        assert not isinstance(results.get(k), Exception | None), results.get(k)
        lines, sums = results[k]
        assert len(lines) == 100 and all(f"f={k:f}" in ls[1] for ls in lines.values()), k
        assert sums == [i * 10 for i in range(128)] and heap.heap_used(devs[k].mem) == 0
