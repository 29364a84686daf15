"""A broad slice of CuPy's API under `gpushim run` on the emulator, every result checked against numpy by
tests/programs/python/cupy_api.py: indexing and scatter, sorting, reductions over axes and dtypes (float16,
complex64, int8, bool), ReductionKernel, ElementwiseKernel with raw arguments, @cupy.fuse, streams held by a
host function, pinned memory, events, memory pools, CUDA graphs, two devices with peer access, DLPack, numba,
and cuBLAS / cuSOLVER / cuFFT where their libraries are installed (what their cubin-only kernels leave out is
asserted as the error CuPy raises)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import ROOT, Server, emulator_only, kv

pytest.importorskip("cupy", reason="cupy-cuda13x is not installed (pip install cupy-cuda13x)")

SCRIPT = ROOT / "tests" / "programs" / "python" / "cupy_api.py"
LIBS = ("libcublasLt.so.13", "libcusolver.so.12", "libcufft.so.12", "libnvJitLink.so.13")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, built: Path) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("cupy_api"), "--emulate-devices", "2")
    yield s
    s.stop()


def run_api(server: Server, *parts: str, lib_dir: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, GPUSHIM_SERVER=server.url)
    for key in ("CUPY_COMPILE_WITH_PTX", "CUPY_ACCELERATORS", "LD_PRELOAD"):
        env.pop(key, None)
    pre = ["env", f"LD_LIBRARY_PATH={lib_dir}"] if lib_dir else []
    return subprocess.run([sys.executable, "-m", "gpushim", "run", "--", *pre, sys.executable, str(SCRIPT), *parts],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def passed(r: subprocess.CompletedProcess, *names: str) -> dict[str, str]:
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout
    assert r.stdout.strip().endswith("OK"), r.stdout
    v = kv(r.stdout)
    for name in names:
        assert v.get(name) == "True", (name, v.get(name), r.stderr[-2000:])
    return v


@emulator_only
def test_cupy_arrays_match_numpy(server):
    r = run_api(server, "arrays")
    names = ["slice", "fancy_get", "bool_mask", "fancy_set", "scatter_add", "scatter_add_f16", "where", "nonzero",
             "unique_counts", "argsort", "searchsorted", "mean_var_std", "cumprod", "histogram", "median",
             "reduction_kernel", "fuse", "elementwise_raw", "complex_exp", "int_floordiv_mod", "float16_math"]
    for dt in ("float16", "complex64", "int8", "bool"):
        names += [f"sum_{dt}_axis0", f"sum_{dt}_keepdims"]
        names += [f"max_{dt}", f"argmin_{dt}"] if dt != "complex64" else []
    passed(r, *names)


@emulator_only
def test_cupy_streams_events_pools_graphs(server):
    r = run_api(server, "runtime")
    v = passed(r, "event_elapsed", "memory_pool", "memory_async_pool", "cuda_graph")
    # a stream held by a host function: cudaStreamQuery and cudaEventQuery say not ready (CUDA Runtime API,
    # Stream Management and Event Management) while the pinned copies and the kernel wait behind it; once it
    # returns all are done and the copy back holds numpy's answer
    assert v["held_stream_pinned"] == "((False, False), True, True)", v["held_stream_pinned"]
    assert v["attributes"] == "(1024, 32, '90', True, True)"  # the H100 model: sm_90, 1024 threads a block


@emulator_only
def test_cupy_two_devices_with_peer_access(server):
    """CuPy's static runtime enables peer access with cuCtxEnablePeerAccess, which gpushim refused before:
    arrays on each device, a kernel on device 1 reading device 0's array, and the second enable / disable
    answering cudaErrorPeerAccessAlreadyEnabled / NotEnabled (cudaDeviceEnablePeerAccess,
    cudaDeviceDisablePeerAccess in the CUDA Runtime API's Peer Device Memory Access)."""
    r = run_api(server, "multi")
    v = passed(r, "peer_copy")
    assert v["two_devices"] == ("(2, 1, 0, True, 'cudaErrorPeerAccessAlreadyEnabled', "
                                "'cudaErrorPeerAccessNotEnabled')"), v["two_devices"]
    assert "cuCtxEnablePeerAccess" not in r.stderr


@emulator_only
def test_cupy_ipc_between_processes(server):
    """cudaIpcGetMemHandle / cudaIpcOpenMemHandle / cudaIpcGetEventHandle / cudaIpcOpenEventHandle from CuPy's
    static runtime arrive as cuIpc* driver calls, which gpushim refused before: a second process opens the
    array, reads it, doubles it in place, and the first sees the result."""
    r = run_api(server, "ipc")
    passed(r, "ipc")
    assert "cuIpc" not in r.stderr


@emulator_only
def test_cupy_dlpack_and_numba(server):
    r = run_api(server, "dlpack")
    names = ["dlpack"] + (["numba_cai"] if importlib.util.find_spec("numba") else [])
    passed(r, *names)


def cuda_lib_dir() -> Path | None:
    """A directory holding CUDA 13's cuBLAS, cuSOLVER, cuFFT and nvJitLink (the nvidia-cu13 wheel torch brings,
    or $GPUSHIM_CUDA_LIBS), or None."""
    dirs = [os.environ.get("GPUSHIM_CUDA_LIBS", "")]
    for py in filter(None, (os.environ.get("GPUSHIM_TORCH_PYTHON", ""), sys.executable)):
        try:
            out = subprocess.run([py, "-c", "import nvidia, sys; print('\\n'.join(nvidia.__path__))"],
                                 capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        dirs += [str(Path(base) / "cu13" / "lib") for base in out.split()]
    for d in filter(None, dirs):
        if all((Path(d) / name).exists() for name in LIBS):
            return Path(d)
    return None


@emulator_only
def test_cupy_cublas_cusolver_cufft(server):
    lib_dir = cuda_lib_dir()
    if not lib_dir:
        pytest.skip(f"no directory with {', '.join(LIBS)} (set GPUSHIM_CUDA_LIBS or GPUSHIM_TORCH_PYTHON to a "
                    "Python with the nvidia-cu13 wheels)")
    r = run_api(server, "libs", lib_dir=lib_dir)
    v = passed(r, "matmul_f32", "matmul_int", "dot", "einsum", "det", "svd", "cholesky")
    # cuBLAS's double-precision gemm and trsm kernels (cutlass_80_tensorop_d884*) are sm_90 cubins only: the
    # shim names them and cuBLAS fails; cuSOLVER's getrf (solve) needs them too
    assert v["matmul_f64"] == "ERROR CUBLASError CUBLAS_STATUS_INTERNAL_ERROR", v["matmul_f64"]
    assert "cutlass_80_tensorop_d884gemm" in r.stderr and "only cubins for sm_90" in r.stderr
    assert v["solve"].startswith("ERROR CUSOLVERError"), v["solve"]
    # cuFFT asks for a private driver table gpushim does not offer, and its plan fails
    assert v["fft"] == "ERROR CuFFTError CUFFT_INTERNAL_ERROR", v["fft"]
    assert "cuGetExportTable(6e163fbeb958444d835ce182aff1991e): gpushim offers no such table" in r.stderr
