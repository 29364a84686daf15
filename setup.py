"""gpushim: `pip install .` builds libgpushim.so into the package and installs the adapters/ data as
gpushim.adapters. The shim is plain C (no Python inside applications); it is compiled with the system C
compiler from shim/, after shim/generate.py derives its tables from gpushim/protocol.py and adapters/."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def build_shim() -> Path:
    subprocess.check_call([sys.executable, str(ROOT / "shim" / "generate.py")], cwd=ROOT)
    out = ROOT / "gpushim" / "lib" / "libgpushim.so"
    out.parent.mkdir(exist_ok=True)
    cc = os.environ.get("CC", "cc")
    subprocess.check_call([
        cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-fvisibility=hidden", "-pthread", "-O2", "-g",
        "-shared", "-o", str(out), str(ROOT / "shim" / "gen" / "exports.c"),
        f"-Wl,--version-script={ROOT / 'shim' / 'gen' / 'libgpushim.map'}", "-Wl,-soname,libcuda.so.1",
        "-Wl,-z,defs", "-ldl",
    ], cwd=ROOT)
    driver = out.parent / "driver"  # the driver face's names (see the Makefile)
    driver.mkdir(exist_ok=True)
    for name, target in (("libcuda.so.1", "../libgpushim.so"), ("libcuda.so", "libcuda.so.1")):
        link = driver / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    return out


def build_fastpath() -> None:
    """The session worker's C fast path (gpushim/server/fastpath.c). Optional: without a working compiler
    the worker runs its Python path and logs why."""
    out = ROOT / "gpushim" / "lib" / "libgsfast.so"
    cc = os.environ.get("CC", "cc")
    try:
        subprocess.check_call([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-O2", "-g", "-shared",
                               "-o", str(out), str(ROOT / "gpushim" / "server" / "fastpath.c")], cwd=ROOT)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"gpushim: the worker's C fast path was not built ({e}); the worker runs without it", file=sys.stderr)


class BuildPyWithShim(build_py):
    def run(self) -> None:
        build_shim()
        build_fastpath()
        super().run()


setup(
    name="gpushim",
    version="0.1.0",
    description="Run unmodified CUDA applications against GPUs behind another driver, process or host",
    python_requires=">=3.11",
    packages=["gpushim", "gpushim.backends", "gpushim.backends.emulator", "gpushim.backends.cuda", "gpushim.server",
              "gpushim.ptx", "gpushim.ptx.jit", "gpushim.fatbin", "gpushim.compat", "gpushim.adapters"],
    package_dir={"gpushim.adapters": "adapters"},
    package_data={"gpushim": ["lib/libgpushim.so", "lib/libgsfast.so", "lib/driver/*"],
                  "gpushim.adapters": ["cudart/*/*", "cudart/*.json", "cudadrv/*/*", "compat.json"]},
    install_requires=["click>=8", "msgpack>=1.0", "numpy>=1.26", "rich>=13", "pyelftools>=0.30", "zstandard>=0.22",
                      "llvmlite>=0.44"],  # the compiling PTX engine (gpushim/ptx/jit); numba depends on it too
    extras_require={
        # cuda-bindings 12.x drives any driver >= 525, 13.x needs >= 580: tools/gpu_check.sh picks by driver.
        "cuda": ["cuda-python>=12.4", "nvidia-ml-py>=12.535"],
        # the bindings import without a driver; tests/cuda_backend type-checks gpushim's calls against them
        "test": ["pytest>=8", "pytest-timeout", "cffi>=1.16", "ruff", "cuda-bindings>=12.4", "cryptography>=41",
                 # frameworks the driver face is tested with (tests/e2e/test_driver.py; ~45 s to install)
                 "numba-cuda==0.30.4", "cuda-core==1.2.2", "nvidia-cuda-nvrtc>=13.0,<14",
                 # numba-cuda's own tests import it (tests/e2e/test_numba_suite.py; pure Python, seconds)
                 "filecheck>=1.0",
                 # numba-cuda's bf16 tests need it, and skip without it (a 0.5 MB wheel; ~5 s with numpy)
                 "ml_dtypes>=0.5",
                 # CuPy, static runtime inside (tests/e2e/test_cupy.py; ~20 s to install); cuRAND's library for
                 # its RandomState test (CuPy does not bring it)
                 "cupy-cuda13x==14.2.0", "nvidia-curand>=10.4,<11"],
        # not torch: its CUDA 13 wheel and nvidia-* packages are ~5.2 GB and take ~3 min to install, so
        # tests/e2e/test_torch.py skips without it (GPUSHIM_TORCH_PYTHON names a Python that has it)
    },
    entry_points={"console_scripts": ["gpushim = gpushim.cli:main"]},
    cmdclass={"build_py": BuildPyWithShim},
)
