"""Kernels end to end: nvcc 13 builds with every compression mode and several targets run through gpushim
with the right results; faults surface at the next synchronising call and are sticky; a binary without
PTX fails with a message naming the kernel."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from .conftest import BACKEND, CUDA_LIB, NVCC, ROOT, emulator_only, kv

SRC = ROOT / "tests" / "programs" / "kernels"
NVCC_FLAGS = {
    "default": [],
    "no_compress": ["-compress-mode=none"],
    "compress_all": ["-Xfatbin", "-compress-all"],
    "lz": ["-compress-mode=speed"],
    "multi_gencode": ["-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_90,code=[sm_90,compute_90]",
                      "-gencode", "arch=compute_80,code=compute_80"],
}


def nvcc(out, *args: str) -> None:
    cmd = [str(NVCC), "-cudart", "shared", "-o", str(out), *args, "-Xlinker", f"-rpath,{CUDA_LIB}"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)


def check_kernel_program(r: subprocess.CompletedProcess) -> None:
    """tests/programs/kernels/main.cu reported every check right."""
    assert r.returncode == 0, r.stderr + r.stdout
    v = kv(r.stdout)
    for check in ("template_float", "template_double", "struct_by_value", "streams_events_dynshared",
                  "after_printf"):
        assert v[check] == "ok", check
    assert v["constant_memory"] == "ok counter=10000"
    assert v["symbol_address"] == "ok size=1024"
    assert v["func_attrs maxThreads"] == "1024 ptx=1"
    assert v["occupancy_positive"] == "1"


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    d = tmp_path_factory.mktemp("kernels")
    jobs = {name: [*flags, str(SRC / "main.cu"), str(SRC / "tu2.cu")] for name, flags in NVCC_FLAGS.items()}
    jobs["fault"] = [str(SRC / "fault.cu")]
    jobs["no_ptx"] = ["-gencode", "arch=compute_90,code=sm_90", str(SRC / "fault.cu")]
    # seven independent nvcc runs (about 20 s of CPU): side by side on the machine's cores
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        for f in [pool.submit(nvcc, d / name, *args) for name, args in jobs.items()]:
            f.result()
    return {name: d / name for name in jobs}


@pytest.mark.parametrize("variant", list(NVCC_FLAGS))
def test_kernel_program(server, builds, variant):
    r = subprocess.run([str(builds[variant])], env=server.env(), capture_output=True, text=True, timeout=300)
    check_kernel_program(r)
    lines = r.stdout.splitlines()
    hello = [ln for ln in lines if ln.startswith("hello from")]
    assert sorted(hello) == sorted(f"hello from block {b} thread {t} tag 7" for b in (0, 1) for t in (0, 1))
    # printf output arrives before what the program prints after the synchronising call
    assert lines.index(hello[-1]) < lines.index("after_printf=ok")
    if BACKEND == "emulator":  # launch statistics in the server's log
        assert "launch _Z10double_allPii grid (256, 1, 1) block (256, 1, 1): 256 blocks" in server.log.read_text()
    assert lines[-1] == "OK"


@pytest.fixture(scope="module")
def old_runtime_libs() -> dict[str, str]:
    """The libcudart each old-toolkit fixture needs (fetched once from PyPI into the user's cache)."""
    import sys

    sys.path.insert(0, str(ROOT / "adapters" / "tools"))
    try:
        import fetch_runtimes
    finally:
        sys.path.remove(str(ROOT / "adapters" / "tools"))
    try:
        return {v: str(fetch_runtimes.runtime_dir(v) / "lib") for v in ("11.8", "12.4")}
    except (SystemExit, subprocess.CalledProcessError, OSError) as e:
        pytest.skip(f"cannot fetch the 11.8/12.4 runtimes: {e}")


@pytest.mark.parametrize("version", ["11.8", "12.4"])
def test_old_toolkit_builds_run(server, old_runtime_libs, version):
    """The same program built by nvcc 11.8 and 12.4 (tests/fixtures/build_fixtures.py): the cudaLaunchKernel
    ABI, LZ-compressed PTX of compute_52, the 11.x/12.x struct layouts."""
    exe = ROOT / "tests" / "fixtures" / "bin" / version / "e2e_kernels"
    r = subprocess.run([str(exe)], env=server.env(LD_LIBRARY_PATH=old_runtime_libs[version]), capture_output=True,
                       text=True, timeout=300)
    check_kernel_program(r)
    assert sum(ln.startswith("hello from") for ln in r.stdout.splitlines()) == 4
    assert r.stdout.splitlines()[-1] == "OK"


def test_module_is_uploaded_once_per_server(server, builds):
    runs = [subprocess.run([str(builds["default"])], env=server.env(GPUSHIM_LOG="2"), capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs)
    assert runs[0].stderr.count("uploaded a") == 2  # main.cu's and tu2.cu's fat binaries
    assert "uploaded a" not in runs[1].stderr  # the server holds them by hash
    assert len(list((server.path.parent / "modules").glob("*.fatbin"))) == 2


@pytest.mark.parametrize("mode,error,message", [
    ("oob", "cudaErrorIllegalAddress", "out of bounds"),
    ("trap", "cudaErrorLaunchFailure", "trap"),
    ("assert", "cudaErrorAssert", "Assertion `v == 42` failed"),
])
def test_kernel_faults_are_sticky(server, builds, mode, error, message):
    r = subprocess.run([str(builds["fault"]), mode], env=server.env(), capture_output=True, text=True, timeout=120)
    v = kv(r.stdout)
    assert v["launch"] == "0"  # the launch itself succeeds, as on a GPU
    assert v["sync"] == error
    assert v["sticky"] == error and v["last"] == error and v["still"] == error
    if BACKEND == "emulator":  # the wording of the reason is the emulator's
        assert message in r.stderr + r.stdout


@emulator_only
def test_binary_without_ptx_names_the_kernel(server, builds):
    r = subprocess.run([str(builds["no_ptx"]), "oob"], env=server.env(), capture_output=True, text=True,
                       timeout=120)
    v = kv(r.stdout)
    assert v["launch"] == str(209)  # cudaErrorNoKernelImageForDevice
    assert "_Z3oobPii" in r.stderr and "no PTX" in r.stderr


def test_fp8_conversions_match_cuda_fp8_host_code(server) -> None:
    """cvt to and from .e4m3x2/.e5m2x2 (tests/programs/fp8.cu, built for sm_90 so cuda_fp8.hpp's device functions
    use the cvt instructions) against the same functions on the host, where cuda_fp8.hpp computes them in
    software: every f16 pattern, and f32 values next to each. numba-cuda's test_fp8_bindings found them missing."""
    r = server.run("fp8")
    assert r.returncode == 0, r.stdout + r.stderr
    v = dict(t.split("=", 1) for t in r.stdout.split() if "=" in t)
    assert (v.get("f32_mismatches"), v.get("f16_mismatches"), v.get("back_mismatches"), v.get("done")) == \
        ("0", "0", "0", "1"), r.stdout
