"""gpushim.compat.elfscan on nvcc builds with static and shared cudart, a shared library, and small gcc-built
stand-ins for driver-API and dlopen-style applications."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpushim.compat.elfscan import scan_elf
from gpushim.fatbin import FatbinError, fatbins_in_elf

REGISTRATION = {"__cudaRegisterFatBinary", "__cudaRegisterFatBinaryEnd", "__cudaUnregisterFatBinary",
                "__cudaRegisterFunction", "__cudaPushCallConfiguration", "__cudaPopCallConfiguration",
                "__cudaInitModule"}


def test_static_cudart_executable(built):
    scan = scan_elf(built["default"])
    assert scan.elf_type in ("pie", "executable") and not scan.is_shared_library
    assert scan.cudart_soname is None and scan.cuda_imports == []
    assert scan.static_cudart
    assert "fatbins:2" in scan.static_cudart_evidence
    assert "string:cudaErrorCudartUnloading" in scan.static_cudart_evidence
    assert scan.cuda_api_version == 130 and scan.ptx_versions == {(9, 0)}
    assert scan.fatbins == fatbins_in_elf(built["default"])
    assert not scan.dlopens_cudart and scan.errors == []


def test_static_cudart_detected_after_strip(built, tmp_path):
    strip = shutil.which("strip")
    if strip is None:
        pytest.skip("no strip")
    out = tmp_path / "stripped"
    subprocess.run([strip, "-o", str(out), str(built["default"])], check=True)
    scan = scan_elf(out)
    assert scan.static_cudart
    assert not any(e.startswith("symtab:") for e in scan.static_cudart_evidence)
    assert "string:/cudart.shm." in scan.static_cudart_evidence


def test_shared_cudart_executable(built):
    scan = scan_elf(built["cudart_shared"])
    assert not scan.static_cudart and scan.static_cudart_evidence == []
    assert scan.cudart_soname == "libcudart.so.13" and "libcudart.so.13" in scan.needed
    names = {n for n, _v in scan.cuda_imports}
    assert REGISTRATION <= names
    assert {"cudaMalloc", "cudaFree", "cudaDeviceSynchronize", "__cudaGetKernel", "__cudaLaunchKernel"} <= names
    assert "cudaLaunchKernel" not in names  # nvcc 13 launches through __cudaGetKernel/__cudaLaunchKernel
    assert ("cudaMalloc", "libcudart.so.13") in scan.cuda_imports
    assert scan.cuda_symbol_versions == {"libcudart.so.13"}
    assert scan.cuda_api_version == 130
    assert [k for k, _a, _v in scan.images] == ["cubin", "cubin", "ptx"]


def test_shared_library(built):
    scan = scan_elf(built["shared_lib"])
    assert scan.is_shared_library and scan.elf_type == "shared_library"
    assert scan.cudart_soname == "libcudart.so.13"
    assert ("cudaMemcpy", "libcudart.so.13") in scan.cuda_imports
    assert not scan.static_cudart
    assert len(scan.fatbins) == 2 and scan.cuda_api_version == 130


def test_object_file_is_not_judged(built):
    scan = scan_elf(built["no_compress"])
    assert scan.elf_type == "object" and not scan.static_cudart and len(scan.fatbins) == 1


def test_not_cuda_and_not_elf(tmp_path):
    scan = scan_elf("/bin/sh")
    assert not scan.static_cudart and scan.fatbins == [] and scan.cuda_imports == [] and scan.cudart_soname is None
    p = tmp_path / "x"
    p.write_text("not elf")
    with pytest.raises(FatbinError):
        scan_elf(p)
    with pytest.raises(FileNotFoundError):
        scan_elf(tmp_path / "missing")


@pytest.fixture(scope="module")
def gcc_builds(tmp_path_factory) -> dict[str, Path]:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("gcc_builds")
    (d / "cuda.c").write_text("int cuInit(unsigned f) { return (int)f; }\n"
                              "int cuDeviceGetCount(int* n) { *n = 0; return 0; }\n")
    (d / "drv.c").write_text("int cuInit(unsigned);\nint cuDeviceGetCount(int*);\n"
                             "int main(void) { int n; cuInit(0); return cuDeviceGetCount(&n); }\n")
    (d / "dl.c").write_text('#include <dlfcn.h>\nint main(void) { return dlopen("libcudart.so.12", RTLD_NOW) == 0; }\n')
    lib = d / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(lib), str(d / "cuda.c")], check=True)
    subprocess.run([cc, "-o", str(d / "drv"), str(d / "drv.c"), f"-L{d}", "-l:libcuda.so.1"], check=True)
    subprocess.run([cc, "-o", str(d / "dl"), str(d / "dl.c"), "-ldl"], check=True)
    return {"drv": d / "drv", "dl": d / "dl"}


def test_driver_api_imports(gcc_builds):
    scan = scan_elf(gcc_builds["drv"])
    assert "libcuda.so.1" in scan.needed
    assert {n for n, _v in scan.driver_imports} == {"cuInit", "cuDeviceGetCount"}
    assert scan.cuda_imports == [] and not scan.static_cudart


def test_dlopen_style(gcc_builds):
    scan = scan_elf(gcc_builds["dl"])
    assert scan.dlopens_cudart and not scan.static_cudart and scan.cudart_soname is None
