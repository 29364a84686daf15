"""cuLaunchKernelEx launch attributes through gpushim (tests/programs/drv_launch_attrs.c): a launch with every
kind of attribute at once computes the right result and its launch completion event completes; the attributes
reach the server (LAUNCH_EX, not LAUNCH); CUDA's cluster rules and bad attributes are refused by the launch
itself, with CUDA's errors, and leave nothing queued."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import BACKEND, BIN, Server

KERNELS = str(BIN / "drv_kernels")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, built: Path) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("launch_attrs"))
    yield s
    s.stop()


def test_launch_attributes(server: Server) -> None:
    r = server.run("drv_launch_attrs", KERNELS)
    assert r.returncode == 0, r.stdout + r.stderr
    v = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    assert v["attrs_result_bad"] == "0"
    # CUDA_ERROR_INVALID_CLUSTER_SIZE (912) for a cluster that does not divide the grid, one above the portable
    # 8 blocks, one with a zero dimension; 8 blocks is fine
    assert (v["cluster_3"], v["cluster_16"], v["cluster_0"], v["cluster_8"]) == ("912", "912", "912", "0")
    assert v["cluster_16_allowed"] == "0"  # after cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
    # CUDA_ERROR_INVALID_VALUE for a graphs-only attribute on a launch, an unknown id, attrs NULL with a count;
    # CUDA_ERROR_INVALID_HANDLE for an event that does not exist
    assert (v["graphs_only"], v["unknown_id"], v["null_attrs"], v["bad_event"]) == ("1", "1", "1", "400")
    assert "launch attribute 99 is not one gpushim knows" in r.stderr
    # the attributes travelled to the server (its debug log), IGNORE entries dropped
    assert "LAUNCH_EX vecadd: launch attributes [4, 8, 6, 10, 9, 1, 14, 12, 2]" in server.log.read_text()
    # cuTensorMapEncodeTiled: the device's driver encodes the descriptor; the emulator cannot, and says so;
    # bad arguments are the shim's CUDA_ERROR_INVALID_VALUE either way
    assert (v["tensormap_rank0"], v["tensormap_nodims"], v["tensormap_replace_null"]) == ("1", "1", "1")
    if BACKEND == "emulator":
        assert v["tensormap"] == "801 nonzero=0" and v["tensormap_replace"] == "801"
        assert "cuTensorMapEncodeTiled: this backend cannot encode TMA descriptors" in r.stderr
    else:
        assert v["tensormap"] == "0 nonzero=1" and v["tensormap_replace"] == "0"


def test_runtime_launch_attributes(server: Server) -> None:
    """The runtime's cudaLaunchKernelEx (tests/programs/launch_attrs.cu): the same attributes, the same checks,
    and a refused launch is also cudaGetLastError's answer."""
    r = server.run("launch_attrs")
    assert r.returncode == 0, r.stdout + r.stderr
    v = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    assert v == {"result_bad": "0", "cluster_3": "912", "last_error": "912", "unknown_id": "1", "graph_bad": "0"}
    assert "launch attributes are not kept in graphs by gpushim" in r.stderr
    assert "LAUNCH_EX _Z5twicePKiPii: launch attributes [4, 8, 6, 12]" in server.log.read_text()
