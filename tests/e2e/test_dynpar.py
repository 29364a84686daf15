"""Relocatable device code linked from several translation units, and dynamic parallelism (kernels launching
kernels), end to end: real nvcc programs built with -rdc=true (tests/programs/rdc/, tests/programs/dynpar.cu),
run under the shim, results checked on the host. The assertions are CUDA's documented behaviour, so they run
on the cuda backend too (make gpu-check), except where they check the emulator's own messages."""

from __future__ import annotations

import pytest

from .conftest import emulator_only, kv


@pytest.mark.parametrize("program", ["rdc_whole", "rdc_separate", "static/rdc_whole"])
def test_rdc_device_code_across_units(server, program):
    """nvcc -rdc=true a.cu b.cu, and -dc + -dlink + a host link, and nvcc's default build (the runtime linked
    statically, reaching gpushim through its libcuda): device functions, a __device__ variable and a
    __constant__ array defined in the other unit (set and read by the host), each unit's own printf strings
    and static helper, a kernel of the other unit."""
    r = server.run(program)
    assert r.returncode == 0, r.stdout + r.stderr
    v = kv(r.stdout)
    assert v["main_kernel_bad"] == "0"
    assert v["main_kernel_7"] == str((2 * 7 + 1000 + 4) * 5 + 7 + 1)
    assert v["lib_kernel_0"] == "5"  # g_scale as the host set it
    assert v["lib_counter"] == "36"  # 32 increments from main_kernel, 4 from lib_kernel
    assert "main unit says 2" in r.stdout and "lib unit says 1" in r.stdout


@emulator_only
def test_rdc_without_ptx_is_refused_naming_why(server):
    """Built for sm_75 cubins only: the emulator (which runs PTX) refuses the module, saying what is missing."""
    r = server.run("rdc_noptx")
    assert r.returncode == 1
    assert "cudaErrorNoKernelImageForDevice" in r.stderr
    assert "carry no PTX" in r.stderr


@pytest.mark.parametrize("program", ["dynpar", "static/dynpar"])
def test_dynamic_parallelism(server, program):
    r = server.run(program)
    assert r.returncode == 0, r.stdout + r.stderr
    v = kv(r.stdout)
    # children write results; each sees its parent's global writes made before the launch
    # (Programming Guide, "CUDA Dynamic Parallelism" > "Memory Coherence and Consistency")
    assert v["children_bad"] == "0"
    assert v["children_77"] == str(3000 + 77)
    # recursion to depth 3: 1, 2, 4, 8 grids, and the sum is complete when the host's sync returns (a parent
    # grid completes only after all its children)
    assert v["tree_sum"] == v["tree_expect"]
    assert v["grids_per_depth"] == "1,2,4,8"
    order = [int(x) for x in v["order"].split(",")]
    assert sorted(order) == [10, 11, 20, 21, 30, 40, 50]
    assert order[0] == 10  # the parent records before it launches anything
    assert order.index(20) < order.index(21)  # one block's NULL-stream launches run in launch order
    assert v["a2_saw_a1"] == "1"  # ... and the second sees what the first wrote
    # the tail launch runs after its parent grid and the work it launched into other streams, although it
    # was made first ("Tail Launch" stream)
    assert order.index(30) > max(order.index(x) for x in (11, 20, 21, 50))
    # a launch with an invalid configuration returns cudaErrorInvalidConfiguration to the launching thread;
    # cudaGetLastError reads it and resets it
    assert v["bad_config_err"] == "9,0"
    # nesting depth: 24 levels; the grid at depth 23 cannot launch (cudaErrorLaunchMaxDepthExceeded = 65)
    assert v["depth_err"] == "65"
    assert v["depth_failed_at"] == "23" and v["max_depth"] == "23"
    # cudaLimitDevRuntimePendingLaunchCount: launches beyond it fail (cudaErrorLaunchPendingCountExceeded)
    assert v["pending_limit"] == "4"
    assert (v["pending_ok"], v["pending_failed"], v["pending_err"]) == ("4", "4", "69")
    assert v["host_last_error"] == "0"
    dev, count, e1, e2 = (int(x) for x in v["device_ordinal"].split(","))
    assert (dev, e1, e2) == (0, 0, 0) and count >= 1  # cudaGetDevice/GetDeviceCount in device code


def test_child_fault_fails_the_parent_launch_only(server):
    """A child's illegal address is the error the host sees for its parent's launch; another client of the
    same server is unharmed."""
    r = server.run("dynpar", "fault")
    assert r.returncode == 0, r.stdout + r.stderr
    assert kv(r.stdout)["fault_sync"] == "700"  # cudaErrorIllegalAddress
    ok = server.run("rdc_whole")
    assert ok.returncode == 0 and kv(ok.stdout)["main_kernel_bad"] == "0", ok.stdout + ok.stderr


def test_recursive_quicksort(server):
    """cdpSimpleQuicksort's pattern: each partition launches two kernels into streams it creates and destroys."""
    r = server.run("dynpar", "quicksort")
    assert r.returncode == 0, r.stdout + r.stderr
    v = kv(r.stdout)
    assert v["quicksort_unsorted"] == "0" and v["quicksort_same_values"] == "1"
    assert int(v["quicksort_depth"]) >= 3


def test_compat_check_counts_the_units_ptx(built):
    """gpushim compat-check: an -rdc binary whose device-link image has only sm_75 cubins runs on sm_90 through
    its units' PTX; without PTX in the units it will not run (exit status 0 and 2)."""
    import subprocess
    import sys

    from .conftest import BIN, ROOT

    def check(program: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gpushim", "compat-check", str(BIN / program), "--gpu", "H100",
                               "--driver", "13.0"], cwd=ROOT, capture_output=True, text=True, timeout=120)

    ok = check("rdc_whole")
    assert ok.returncode == 0 and "relocatable units" in ok.stdout, ok.stdout + ok.stderr
    bad = check("rdc_noptx")
    assert bad.returncode == 2 and "will not run" in bad.stdout, bad.stdout + bad.stderr
