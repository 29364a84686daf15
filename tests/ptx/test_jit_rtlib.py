"""The JIT's runtime library (gpushim/ptx/jit/rtlib.py): the helper functions kernels call (directed rounding, half
precision, find_alloc) are compiled once per process, kept in the disk cache, and only declared by the kernels'
modules. The tests that need a fresh process (the library is process-wide) run this file as a script."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from harness import ENGINE, Dev, compile_ptx

HERE = Path(__file__).parent
N = 256


def _launch_all(devs: dict | None = None) -> dict[str, str]:
    """jithalf's halfOps and jitround's directed32 on the JIT; {kernel: digest of its output}; each output is
    checked against the interpreter's."""
    rng = np.random.default_rng(7)
    devs = devs or {"halfOps": Dev(compile_ptx("jithalf", "sm_90")), "directed32": Dev(compile_ptx("jitround"))}
    h = rng.standard_normal(3 * N).astype(np.float16).view(np.uint16)
    f = rng.standard_normal(4 * N).astype(np.float32)
    x = rng.integers(0, 2**32, 3 * N, dtype=np.uint64).astype(np.uint32).view(np.float32)
    out = {}
    for k, dev in devs.items():
        got = {}
        for eng in ("interp", "jit"):
            ENGINE["name"] = eng
            if k == "halfOps":
                o1, o2 = dev.empty(80 * N), dev.empty(48 * N)
                dev.launch(k, N // 128, 128, dev.array(h), o1, o2, dev.array(f), N)
                got[eng] = dev.get(o1, np.uint8, 80 * N).tobytes() + dev.get(o2, np.uint8, 48 * N).tobytes()
            else:
                o = dev.empty(120 * N)
                dev.launch(k, N // 128, 128, dev.array(x), o, N)
                got[eng] = dev.get(o, np.uint8, 120 * N).tobytes()
        assert got["interp"] == got["jit"], k
        out[k] = hashlib.sha256(got["jit"]).hexdigest()
    ENGINE["name"] = "jit"
    return out


def _child(what: str) -> dict:
    """A fresh process's part (run as a script): launches, then the library's counters."""
    import logging

    from gpushim.ptx.jit import kernel, rtlib

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    res: dict = {}
    if what == "twice":  # the second compile of each kernel (and of another calling the same helpers) compiles none
        res["digest"] = _launch_all()
        first = rtlib.stats()["compiles"]
        kernel._cache.clear()
        assert _launch_all() == res["digest"]
        res["compiles_again"] = rtlib.stats()["compiles"] - first
    elif what == "fork":  # loaded in the parent, used by a forked child; the child compiles new helpers too
        digest = _launch_all({"halfOps": Dev(compile_ptx("jithalf", "sm_90"))})
        before = rtlib.stats()["compiles"]
        pid = os.fork()
        if pid == 0:
            ok = False
            try:
                # the JIT's fork handler starts no thread (a child running other code, a worker or a test's peer
                # that is SIGKILLed, must stay one thread); the child's first launch starts its watchdog
                ok = len(os.listdir("/proc/self/task")) == 1
                kernel._cache.clear()
                ok = ok and _launch_all({"halfOps": Dev(compile_ptx("jithalf", "sm_90"))}) == digest
                ok = ok and any(t.name == "ptx-jit-watchdog" for t in threading.enumerate())
                ok = ok and rtlib.stats()["compiles"] == before  # (the parent's library, not compiled again)
                _launch_all({"directed32": Dev(compile_ptx("jitround"))})
                ok = ok and rtlib.stats()["compiles"] > before
            finally:
                os._exit(0 if ok else 1)
        res["child_status"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    elif what == "threads":  # kernels needing the same new helpers compile at once in several threads
        devs = [Dev(compile_ptx("jithalf", "sm_90")) for _ in range(3)]
        mods = [d.mod for d in devs]
        for i, m in enumerate(mods):
            m.source_hash += str(i)  # three kernels for the compile cache
        ts = [threading.Thread(target=m.jit_kernel, args=("halfOps",)) for m in mods]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        res["digests"] = [_launch_all({"halfOps": d})["halfOps"] for d in devs]
    else:
        res["digest"] = _launch_all()
        jk = kernel._cache[next(k for k in kernel._cache if k[1].endswith("halfOps"))]
        res["from_disk"] = jk.from_disk
    res["stats"] = rtlib.stats()
    return res


def _run(what: str, cache: Path | str) -> tuple[dict, str]:
    env = {**os.environ, "GPUSHIM_PTX_JIT_CACHE": str(cache), "GPUSHIM_PTX_JIT_T1": "cheap",
           "GPUSHIM_PTX_JIT_TIER2": "off", "GPUSHIM_PTX_JIT_RTLIB": "on", "GPUSHIM_PTX_JIT_TIER1": "sync",
           "PYTHONPATH": str(HERE.parents[1])}  # fmt: skip
    r = subprocess.run([sys.executable, __file__, what], capture_output=True, text=True, cwd=HERE, env=env,
                       timeout=240)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.splitlines()[-1]), r.stderr


@pytest.mark.parametrize("engine", ["jit"], indirect=True)  # (no launches: engine-independent)
def test_a_cheap_kernel_declares_the_helpers_and_defines_none(engine, monkeypatch):
    from gpushim.ptx.jit import rtlib
    from gpushim.ptx.jit.codegen import generate

    monkeypatch.setenv("GPUSHIM_PTX_JIT_RTLIB", "on")
    dev = Dev(compile_ptx("jithalf", "sm_90"))
    g = generate(dev.mod._mod, dev.mod._compiled["halfOps"].prog, "halfOps", 1)
    g.outline()  # (the cheap code generator's form)
    text = str(g.m)
    declared = set(re.findall(r'declare [^@]*@"(gsrt\.[\w.]+)"', text))
    assert len(declared) > 5 and declared == set(g.rt_used)
    assert {rtlib.name(("find_alloc",)), rtlib.name(("mem_miss",)), rtlib.name(("h2f",))} <= declared
    assert not re.search(r'define [^@]*@"?(gsrt\.|pure\.|find_alloc|mem_miss)', text)  # only the kernel's own
    calls = len(re.findall(rf'call float @"{re.escape(rtlib.name(("h2f",)))}"\(', text))
    assert calls >= 10
    # the generator is chosen on the size the calls stand for (as with the helpers inlined: pure.py)
    assert g.ir_size(inlined=False) < 0.6 * g.ir_size()


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_the_library_is_compiled_once_per_process_and_loaded_from_disk_by_the_next(engine, tmp_path):
    first, _ = _run("twice", tmp_path)
    assert first["stats"]["compiles"] >= 1 and first["compiles_again"] == 0
    kernels = [p for p in tmp_path.iterdir() if not p.name.startswith("rtlib-")]
    for p in kernels:  # a new process compiling the kernels again, with the library on disk
        p.unlink()
    second, _ = _run("once", tmp_path)
    assert second["digest"] == first["digest"] and not second["from_disk"]
    assert second["stats"]["compiles"] == 0 and second["stats"]["disk_loads"] >= 1
    third, _ = _run("once", tmp_path)  # kernels and library from disk (the kernel's entry names its chunks)
    assert third["digest"] == first["digest"] and third["from_disk"]
    assert third["stats"]["compiles"] == 0 and third["stats"]["disk_loads"] >= 1


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_a_corrupt_or_missing_library_entry_is_rebuilt(engine, tmp_path):
    first, _ = _run("once", tmp_path)
    chunks = sorted(tmp_path.glob("rtlib-*.o"))
    assert chunks
    for p in chunks:  # the same size, other bytes
        data = bytearray(p.read_bytes())
        data[len(data) // 2 :] = bytes(len(data) - len(data) // 2)
        p.write_bytes(bytes(data))
    second, err = _run("once", tmp_path)
    assert "corrupt: compiling it again" in err
    assert second["digest"] == first["digest"] and second["stats"]["compiles"] >= 1
    for p in tmp_path.glob("rtlib-*"):  # gone: the kernels' entries that call them are compiled again
        p.unlink()
    third, _ = _run("once", tmp_path)
    assert third["digest"] == first["digest"] and not third["from_disk"] and third["stats"]["compiles"] >= 1


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_a_forked_child_uses_the_parents_library(engine):
    res, _ = _run("fork", "off")
    assert res["child_status"] == 0


@pytest.mark.parametrize("engine", ["jit"], indirect=True)
def test_threads_compiling_kernels_that_need_the_same_new_helpers(engine):
    res, _ = _run("threads", "off")
    assert len(set(res["digests"])) == 1


@pytest.mark.parametrize("t1", ["full", "cheap"])
@pytest.mark.parametrize("engine", ["jit"], indirect=True)  # compares the two engines itself
def test_library_calls_give_the_interpreters_results(engine, monkeypatch, t1):
    from gpushim.ptx.jit import kernel

    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", "off")  # tier 1 runs every launch below
    monkeypatch.setenv("GPUSHIM_PTX_JIT_T1", t1)
    monkeypatch.setenv("GPUSHIM_PTX_JIT_RTLIB", "on")
    kernel._cache.clear()
    try:
        devs = {"halfOps": Dev(compile_ptx("jithalf", "sm_90")), "directed32": Dev(compile_ptx("jitround"))}
        _launch_all(devs)  # (each output equal to the interpreter's)
        for k, dev in devs.items():
            t1code = dev.mod.jit_kernel(k).t1
            assert t1code.codegen == t1 and any(n.startswith("gsrt.") for n in t1code.meta["rtlib"])
    finally:
        kernel._cache.clear()


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1])))
