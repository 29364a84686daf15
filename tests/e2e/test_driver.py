"""gpushim as the CUDA driver (libcuda.so.1): driver-API programs written for the tests, a program that
mixes the runtime and driver APIs on one stream, and frameworks that reach the driver themselves
(NVRTC with cuda-python, numba-cuda, cuda.core), each run under the shim against a real server and
checked on its output."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import BACKEND, BIN, CUDA_HOME, ROOT, SHIM, Server, emulator_only

KERNELS = str(BIN / "drv_kernels")
DRIVER_DIR = SHIM.parent / "driver"
PYTHON_PROGRAMS = ROOT / "tests" / "programs" / "python"
PIP_NAMES = {"numba": "numba-cuda", "numba.cuda": "numba-cuda", "cuda.core": "cuda-core"}


@pytest.fixture(scope="module")
def drv(tmp_path_factory: pytest.TempPathFactory, built: Path) -> Iterator[Server]:
    """One server for this module's programs (each program is its own session)."""
    s = Server(tmp_path_factory.mktemp("driver"))
    yield s
    s.stop()


def run(server: Server, program: str, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    p = server.run(program, *args, timeout=timeout, **env)
    assert p.returncode == 0, f"{program} {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return p


@pytest.mark.parametrize("mode", ["ptx", "fatbin", "file"])
def test_vector_add(drv: Server, mode: str) -> None:
    p = run(drv, "drv_vecadd", KERNELS, mode)
    assert f"vecadd {mode} ok: 50000 elements" in p.stdout


def test_cubin_module(drv: Server) -> None:
    p = drv.run("drv_vecadd", KERNELS, "cubin")
    if BACKEND == "emulator":
        # The emulator runs PTX: a cubin-only module loads, and its kernels are refused with the reason.
        assert p.returncode == 1
        assert "CUDA_ERROR_NO_BINARY_FOR_GPU" in p.stderr and "carries no PTX" in p.stderr
    else:
        assert p.returncode == 0 and "vecadd cubin ok" in p.stdout, p.stderr


def test_matmul_shared_memory(drv: Server) -> None:
    p = run(drv, "drv_matmul", KERNELS)
    assert "matmul ok: 64x64, 2048 bytes of shared memory per block" in p.stdout


def test_module_and_library_globals(drv: Server) -> None:
    p = run(drv, "drv_globals", KERNELS)
    assert "globals ok: counter 17" in p.stdout


def test_runtime_library_management(drv: Server) -> None:
    # cudaLibraryLoadData/LoadFromFile, GetKernel, GetGlobal, KernelSetAttributeForDevice and a cudaLaunchKernel
    # on the cudaKernel_t (runtime API reference, "Library Management"): the runtime face on the driver's.
    p = run(drv, "library", KERNELS)
    assert "library data vecadd ok: 1000 elements" in p.stdout
    assert "library file globals ok: initialised 42, poly 43" in p.stdout


def test_jit_link_two_ptx_files(drv: Server) -> None:
    p = run(drv, "drv_link", KERNELS)
    assert "link ok: 2 PTX inputs" in p.stdout


def test_driver_api_around_kernels(drv: Server) -> None:
    p = run(drv, "drv_misc", KERNELS)
    assert "misc ok" in p.stdout
    # the stub cuGetProcAddress handed out names itself once when called
    assert "cuMipmappedArrayCreate is not supported by gpushim yet" in p.stderr


@emulator_only
def test_conditional_while_node(drv: Server) -> None:
    """cuGraphConditionalHandleCreate and cuGraphAddNode with a WHILE node whose body kernel counts down
    (tests/programs/drv_graph_cond.c); the cuda backend refuses conditional nodes (docs/graphs.md)."""
    p = run(drv, "drv_graph_cond", KERNELS)
    assert "while=5,7,0" in p.stdout
    assert "ext_sem=801" in p.stdout and "node type 8 is not supported" in p.stderr
    assert "done=1" in p.stdout


def test_arrays_textures_and_surfaces(drv: Server) -> None:
    """cuArrayCreate/cuArray3DCreate, cuMemcpy2D/3D to and from arrays, cuTexObjectCreate on arrays and linear
    memory, cuSurfObjectCreate (tests/programs/drv_texture.c; results computed by the program). Runs on the
    cuda backend too (make gpu-check)."""
    p = run(drv, "drv_texture", KERNELS)
    v = dict(kv.split("=", 1) for line in p.stdout.splitlines() for kv in line.split() if "=" in kv)
    assert v["descriptor"] == "8,4,0x20,1"
    for key in ("box_errors", "point_errors", "clamp_errors", "linear_errors", "wrap_errors", "normalized_errors",
                "surface_errors"):
        assert v[key] == "0", p.stdout
    assert v["resource_query"] == v["linear_memory"] == v["volume"] == "1"
    assert v["descriptor3d"] == "4,3,2"
    assert v["box_too_wide"] == "1"  # CUDA_ERROR_INVALID_VALUE: the box leaves the array
    assert v["three_channels"] == "1" and v["null_desc"] == "1"
    assert v["nv12"] == "801" and "CUarray_format 0xb0 is not supported" in p.stderr  # named, NOT_SUPPORTED
    assert v["surface_without_ldst"] == "1"  # CUDA_ARRAY3D_SURFACE_LDST is required
    assert v["descriptor_of_3d"] == "1"  # a 3D array's descriptor is cuArray3DGetDescriptor's
    assert v["query_destroyed"] == "1" and v["destroy_twice"] == "1"
    assert v["done"] == "1"


@emulator_only
def test_device_model_through_the_driver(drv: Server) -> None:
    p = run(drv, "drv_misc", KERNELS)
    assert "device NVIDIA H100 80GB HBM3 cc 9.0, 132 SMs" in p.stdout and "uuid set" in p.stdout


def test_stream_capture_and_graphs(drv: Server) -> None:
    p = run(drv, "drv_graph", KERNELS)
    assert "graph ok: captured memset and launch, replayed twice" in p.stdout


def test_graphs_built_node_by_node(drv: Server) -> None:
    p = run(drv, "drv_graph_nodes", KERNELS)
    assert "graph nodes ok: memset, kernel, host nodes; exec kernel params updated" in p.stdout


def test_runtime_and_driver_on_one_stream(drv: Server) -> None:
    p = run(drv, "mixed_drv")
    assert "mixed ok" in p.stdout


def test_one_session_for_both_faces(drv: Server) -> None:
    """A program using both APIs is one client: one session, announced with its runtime's version."""
    p = run(drv, "mixed_drv")
    pid_lines = [ln for ln in drv.log.read_text().splitlines() if "session started" in ln and "mixed_drv" in ln]
    assert pid_lines, drv.log.read_text()[-2000:]
    pids = [ln.split("pid ")[1].split(",")[0] for ln in pid_lines]
    assert len(pids) == len(set(pids))  # never two sessions for one process
    assert "CUDA runtime 13000" in pid_lines[-1], p.stderr


def test_driver_only_client_announces_its_version(drv: Server) -> None:
    """A process without libcudart tells its CUDA version through its cuGetProcAddress look-ups."""
    run(drv, "drv_misc", KERNELS)
    line = [ln for ln in drv.log.read_text().splitlines() if "session started" in ln and "drv_misc" in ln][-1]
    assert "CUDA runtime 13000" in line, line


def test_driver_only_process_without_preload(drv: Server) -> None:
    """A driver-API program finds gpushim's libcuda.so.1 through LD_LIBRARY_PATH alone (no LD_PRELOAD)."""
    env = dict(os.environ, GPUSHIM_SERVER=drv.url, LD_LIBRARY_PATH=str(DRIVER_DIR))
    env.pop("LD_PRELOAD", None)
    p = subprocess.run([str(BIN / "drv_vecadd"), KERNELS, "ptx"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and "vecadd ptx ok" in p.stdout, p.stderr


def test_gpushim_run_provides_the_driver(drv: Server) -> None:
    """`gpushim run` preloads the shim and puts the driver directory on LD_LIBRARY_PATH."""
    env = dict(os.environ, GPUSHIM_SERVER=drv.url, PYTHONPATH=str(ROOT))
    env.pop("LD_PRELOAD", None)
    env.pop("LD_LIBRARY_PATH", None)
    p = subprocess.run([sys.executable, "-m", "gpushim", "run", "--", str(BIN / "drv_link"), KERNELS], env=env,
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0 and "link ok" in p.stdout, p.stderr


def test_dlopen_libcuda_is_the_shim(tmp_path: Path, built: Path) -> None:
    """With the shim preloaded, dlopen("libcuda.so.1") returns the shim itself (its soname is libcuda.so.1),
    ahead of any driver on the search path; with LD_LIBRARY_PATH alone, the driver directory's link opens
    the same file."""
    src = tmp_path / "dl.c"
    src.write_text('#include <dlfcn.h>\n#include <stdio.h>\n'
                   'int main(int c, char **v) { void *a = dlopen("libcuda.so.1", RTLD_NOW);\n'
                   '  void *b = dlopen(v[1], RTLD_NOW | RTLD_NOLOAD);\n'
                   '  printf("%d %d\\n", a != NULL, a == b && dlsym(a, "cuGetProcAddress_v2") != NULL); return 0; }\n')
    exe = tmp_path / "dl"
    subprocess.run(["cc", "-o", str(exe), str(src), "-ldl"], check=True)
    fake = tmp_path / "fake"
    fake.mkdir()  # a "real driver" earlier on the search path must not win over the preloaded shim
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(fake / "libcuda.so.1"), str(src)],
                   check=True)
    env = dict(os.environ, LD_PRELOAD=str(SHIM), LD_LIBRARY_PATH=str(fake))
    p = subprocess.run([str(exe), str(SHIM)], env=env, capture_output=True, text=True, timeout=30)
    assert p.stdout.split() == ["1", "1"], p.stderr
    env = dict(os.environ, LD_LIBRARY_PATH=str(DRIVER_DIR))
    env.pop("LD_PRELOAD", None)
    p = subprocess.run([str(exe), str(SHIM)], env=env, capture_output=True, text=True, timeout=30)
    assert p.stdout.split() == ["1", "1"], p.stderr


def test_compat_check_reads_driver_api_binaries(built: Path) -> None:
    from gpushim.compat.check import check_binary

    rep = check_binary(str(BIN / "drv_misc"), 13000, [{"name": "H100", "cc": "9.0"}])
    assert rep.client_runtime and rep.client_runtime >= 12050  # cuCtxCreate_v4 is CUDA 12.5's
    rows = {r.what: r for r in rep.apis}
    assert rows["cuModuleGetFunction"].strategy == "native" and rows["cuGetProcAddress_v2"].strategy == "native"
    assert not rep.problems


# ---- frameworks (Python): each skips with the reason when it is not installed ----


def _python(drv: Server, script: str, *modules: str, timeout: float = 600,
            args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    for m in modules:
        if importlib.util.find_spec(m) is None:
            pytest.skip(f"{m} is not installed (pip install {PIP_NAMES.get(m, m)})")
    env = drv.env(LD_LIBRARY_PATH=str(DRIVER_DIR), CUDA_HOME=str(CUDA_HOME), PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, str(PYTHON_PROGRAMS / script), *args], env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, f"{script} failed ({p.returncode}):\n{p.stdout}\n{p.stderr[-3000:]}"
    return p


def _nvrtc_available() -> None:
    try:
        from cuda.bindings import nvrtc

        nvrtc.nvrtcVersion()
    except Exception as e:  # the bindings load libnvrtc lazily: the wheel may be missing
        pytest.skip(f"NVRTC is not available (pip install nvidia-cuda-nvrtc): {e}")


def test_nvrtc_program(drv: Server) -> None:
    _nvrtc_available()
    p = _python(drv, "drv_nvrtc.py", "cuda.bindings")
    assert "match True" in p.stdout


def test_cuda_core_program(drv: Server) -> None:
    _nvrtc_available()
    p = _python(drv, "drv_cuda_core.py", "cuda.core")
    assert "match True" in p.stdout


def test_numba_cuda_kernels(drv: Server) -> None:
    p = _python(drv, "drv_numba.py", "numba", "numba.cuda")
    assert "numba ok" in p.stdout


# ---- the server's side, without a client ----


def test_link_ptx_resolves_externs_for_the_engine_and_ptxas(built: Path, tmp_path: Path) -> None:
    from gpushim.ptx import load_module
    from gpushim.server.ops_driver import link_ptx

    main = (BIN / "drv_kernels" / "link_main.ptx").read_text()
    lib = (BIN / "drv_kernels" / "link_lib.ptx").read_text()
    linked = link_ptx([main, lib])
    assert ".extern .func" not in linked and linked.count(".version") == 1
    assert "saxpy" in load_module(linked, "sm_75", strict=False).kernels
    ptxas = CUDA_HOME / "bin" / "ptxas"
    if ptxas.exists():  # what the cuda backend's driver would JIT
        (tmp_path / "l.ptx").write_text(linked)
        p = subprocess.run([str(ptxas), "-arch=sm_90", str(tmp_path / "l.ptx"), "-o", str(tmp_path / "l.cubin")],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
    # alone, the call stays unresolved
    assert ".extern .func" in link_ptx([main])


def test_module_images_are_wrapped_as_fat_binaries(built: Path) -> None:
    from gpushim.cuda_errors import CudaError
    from gpushim.fatbin import parse_fatbin
    from gpushim.server.ops_driver import as_fatbin

    ptx = (BIN / "drv_kernels" / "vecadd.ptx").read_bytes()
    (img,) = parse_fatbin(as_fatbin(ptx))
    assert (img.kind, img.arch) == ("ptx", 75) and "vecadd" in img.ptx_text
    (img,) = parse_fatbin(as_fatbin((BIN / "drv_kernels" / "vecadd.cubin").read_bytes()))
    assert (img.kind, img.arch) == ("cubin", 90)
    fatbin = (BIN / "drv_kernels" / "vecadd.fatbin").read_bytes()
    assert as_fatbin(fatbin) is fatbin
    for bad in (b"", b"\x7fELF garbage", b"hello", b".version 8.0\n"):
        with pytest.raises(CudaError):
            as_fatbin(bad)


def test_server_never_uses_gpushims_own_driver(tmp_path: Path, built: Path) -> None:
    """A server started where gpushim is preloaded and its libcuda.so.1 is on the path (the manual client
    environment, exported by hand) starts itself again without them: it must reach the real driver."""
    env = dict(os.environ, LD_PRELOAD=str(SHIM), LD_LIBRARY_PATH=f"{DRIVER_DIR}:/opt/elsewhere",
               PYTHONPATH=str(ROOT))
    url = f"unix://{tmp_path}/s.sock"
    proc = subprocess.Popen([sys.executable, "-m", "gpushim", "serve", "--listen", url, "--backend", "emulator",
                             "--module-cache", str(tmp_path / "m")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "s.sock").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        raw = Path(f"/proc/{proc.pid}/environ").read_text().split("\0")
        environ = dict(kv.split("=", 1) for kv in raw if "=" in kv)
        assert "LD_PRELOAD" not in environ
        assert environ["LD_LIBRARY_PATH"] == "/opt/elsewhere"
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        assert "libgpushim.so" not in maps
    finally:
        proc.terminate()
        proc.wait(15)


def test_compat_check_reads_python_driver_bindings() -> None:
    """A Python extension that reaches the driver by name (cuda-bindings' cydriver) is recognised as such."""
    spec = importlib.util.find_spec("cuda.bindings.cydriver")
    if spec is None or not spec.origin or not spec.origin.endswith(".so"):
        pytest.skip("cuda-bindings' cydriver extension is not installed")
    from gpushim.compat.check import check_binary

    rep = check_binary(spec.origin, 13000, [{"name": "H100", "cc": "9.0"}])
    assert not rep.problems and any("cuGetProcAddress" in n for n in rep.notes), rep.notes


@emulator_only
def test_register_count_and_limit(drv: Server) -> None:
    """CU_FUNC_ATTRIBUTE_NUM_REGS of a PTX kernel is the engine's estimate (gpushim/ptx/regcount.py: registers live
    at once; vecadd needs 10), and CU_JIT_MAX_REGISTERS caps it whichever way the PTX is loaded
    (tests/programs/drv_maxnreg.c)."""
    p = run(drv, "drv_maxnreg", KERNELS)
    v = dict(t.split("=", 1) for t in p.stdout.split())
    assert v == {"plain": "10", "load_ex": "4", "image_has_maxnreg": "1", "linked": "4", "library": "4",
                 "done": "1"}, p.stdout
