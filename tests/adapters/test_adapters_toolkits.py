"""Assembled nvcc 11.8 / 12.4 toolkits build -cudart shared programs that load the wheel's libcudart.

Skipped unless installed (python adapters/tools/toolkits.py install 11.8|12.4); they need the network once.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "adapters" / "tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

import toolkits  # noqa: E402

NODE = {"11.8": "libcudart.so.11.0", "12.4": "libcudart.so.12"}


@pytest.mark.parametrize("version", ["11.8", "12.4"])
def test_toolkit_builds_and_loads(version: str) -> None:
    if not (toolkits.toolkit_dir(version) / "toolkit.json").exists():
        pytest.skip(f"toolkit {version} not installed (adapters/tools/toolkits.py install {version})")
    res = toolkits.check(version)
    node = NODE[version]
    assert res["needed"][0] == node
    imports = set(res["imports"])
    for name in ("__cudaRegisterFatBinary", "__cudaRegisterFunction", "__cudaPushCallConfiguration",
                 "__cudaPopCallConfiguration", "cudaLaunchKernel", "cudaMalloc"):
        assert f"{name}@{node}" in imports
    assert res["run_rc"] == 0
    out = "\n".join(res["run_output"])
    major, minor = (int(x) for x in version.split("."))
    assert f"CUDART_VERSION={major * 1000 + minor * 10} " in out
    # no GPU/driver here: insufficient driver (35) or no device (100); with a GPU: success
    assert any(f"cudaMalloc={c} " in out for c in (0, 35, 100))
