"""`gpushim compat-check` on every committed fixture x driver (no server needed), the JSON report, static cudart,
shared libraries, and --server."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpushim.compat.check import check_binary, compat_check_command
from gpushim.compat.table import parse_version

from .conftest import DRIVERS, FIXTURES, H100, fixture_names, manifest

# The verdict of every fixture on an H100 behind each driver: 0 runs natively, 1 with adaptations, 2 not at all.
# Why the non-obvious ones are what they are:
#   11.8 client, 11.8/12.2 driver, kernels: 1 -- no cuFuncGetParamInfo below 12.4 (layouts parsed from the image)
#   11.8 devprops on 12.x/13.0: 1 -- cudaDeviceProp (728 bytes) is filled in the 11.x layout
#   12.4 on 11.8: 1 -- PTX 8.4 re-labelled to 7.8, 12.x call forms on an 11.x driver
#   12.4 on 13.0 devprops: 1 -- 1032-byte cudaDeviceProp vs the 13.x generation's 1008
#   13.0 on 12.x: 1 -- a real libcudart 13 refuses these drivers; gpushim adapts
#   bigparam on 11.8: 2 -- 6008-byte kernel parameters need a CUDA 12.1 driver (801)
#   archspecific on 11.8: 2 -- sm_90a needs a 12.0 driver for the cubin and PTX ISA 8.0 for the PTX (222)
EXPECTED: dict[str, tuple[int, int, int, int]] = {  # drivers 11.8, 12.2, 12.4, 13.0
    "11.8/devprops": (1, 1, 1, 1),
    "11.8/e2e_kernels": (1, 1, 1, 1),  # cudaFuncGetAttributes: 56-byte cudaFuncAttributes everywhere after 11.x
    "11.8/errors": (1, 1, 0, 0),
    "11.8/kernels": (1, 1, 0, 0),
    "11.8/libvadd.so": (1, 1, 0, 0),
    "12.4/archspecific": (2, 1, 0, 0),
    "12.4/bigparam": (2, 1, 0, 0),
    "12.4/devprops": (1, 1, 0, 1),
    "12.4/e2e_kernels": (1, 1, 0, 0),
    "12.4/errors": (1, 1, 0, 0),
    "12.4/kernels": (1, 1, 0, 0),
    "13.0/archspecific": (2, 1, 1, 0),
    "13.0/bigparam": (2, 1, 1, 0),
    "13.0/devprops": (1, 1, 1, 0),
    "13.0/errors": (1, 1, 1, 0),
    "13.0/kernels": (1, 1, 1, 0),
    "13.0/libvadd.so": (1, 1, 1, 0),
    # nvcc's default build: its own runtime refuses older drivers; on a 13.0 driver it runs (issue 13)
    "13.0/static_kernels": (2, 2, 2, 0),
    # the same for 11.8 and 12.4 (checked under gpushim: 12.4's runtime refuses the 11.8 driver with 35 and
    # runs on 12.2 by CUDA's minor version compatibility, its PTX re-labelled)
    "11.8/static_e2e_kernels": (0, 0, 0, 0),
    "12.4/static_e2e_kernels": (2, 1, 0, 0),
}


def test_every_fixture_has_an_expectation() -> None:
    assert set(EXPECTED) == set(fixture_names(programs_only=False))


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_verdict(name: str, driver: str) -> None:
    rep = check_binary(str(FIXTURES / name), parse_version(driver), H100)
    want = EXPECTED[name][DRIVERS.index(driver)]
    assert rep.exit_code == want, "\n".join(rep.reasons())
    if want:
        assert rep.reasons()


def cli(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(compat_check_command, list(args))
    return r.exit_code, r.output


def test_cli_table_and_exit_status() -> None:
    code, out = cli(str(FIXTURES / "13.0" / "kernels"), "--gpu", "h100", "--driver", "12.2")
    assert code == 1
    assert "needs libcudart.so.13" in out and "CUDA 13.0 (from EIATTR_CUDA_API_VERSION 130" in out
    assert "CUDA runtime calls" in out and "__cudaLaunchKernel" in out and "kernel images" in out
    assert "[sm_75 cubin 1.8, compute_75 ptx 9.0 zstd, sm_90 cubin 1.8]" in out
    assert "verdict: runs with adaptations" in out
    code, out = cli(str(FIXTURES / "13.0" / "kernels"), "--gpu", "h100", "--driver", "13.0")
    assert code == 0 and "verdict: runs natively" in out
    code, out = cli(str(FIXTURES / "13.0" / "archspecific"), "--gpu", "9.0", "--driver", "11.8")
    assert code == 2 and "verdict: will not run" in out and "222" in out


def test_cli_json() -> None:
    code, out = cli(str(FIXTURES / "12.4" / "bigparam"), "--gpu", "h100", "--driver", "11.8", "--json")
    assert code == 2
    d = json.loads(out)
    assert d["exit_code"] == 2 and d["verdict"] == "will not run"
    assert d["cudart_soname"] == "libcudart.so.12" and d["client_runtime"] == 12040
    assert d["client_runtime_source"].startswith("EIATTR_CUDA_API_VERSION 124")
    assert d["driver"] == 11080 and d["devices"] == [{"name": "NVIDIA H100 80GB HBM3", "cc": "9.0"}]
    assert d["session"]["strategy"] == "translate"
    nodes = {a["node"] for a in d["apis"]}
    assert nodes == {"libcudart.so.12"}
    assert {a["what"] for a in d["apis"]} >= {"cudaLaunchKernel", "__cudaRegisterFatBinary", "cudaMalloc"}
    module = d["fatbins"][-1]
    assert {(i["kind"], i["arch"], i["version"], i["compression"]) for i in module} == {
        ("cubin", "sm_75", "1.7", "none"), ("ptx", "compute_75", "8.4", "lz")}
    (img,) = d["images"]
    assert (img["strategy"], img["error"]) == ("reject", 801) and "6008 bytes" in img["reason"]
    assert any("large_kernel_params" in a for a in d["adaptations"])


def test_cli_static_cudart() -> None:
    code, out = cli(str(FIXTURES / "13.0" / "static_kernels"), "--gpu", "h100", "--driver", "13.0", "--json")
    d = json.loads(out)
    # it reaches gpushim through libcuda.so.1 and the driver's private tables (issue 13): no per-call rows
    assert code == 0 and d["static_cudart"] and d["apis"] == [] and d["client_runtime"] == 13000
    assert any("links the CUDA runtime statically" in n and "cuGetExportTable" in n for n in d["notes"])
    assert not any("verified with" in n for n in d["notes"])


def test_cli_shared_library() -> None:
    code, out = cli(str(FIXTURES / "13.0" / "libvadd.so"), "--gpu", "a100", "--driver", "12.4", "--json")
    d = json.loads(out)
    assert code == 1 and d["elf_type"] == "shared_library" and d["client_runtime"] == 13000
    assert d["devices"][0]["cc"] == "8.0"
    assert d["images"] and d["images"][0]["strategy"] == "translate"


def test_gpu_by_compute_capability() -> None:
    for gpu, cc in (("sm_100", "10.0"), ("9.0", "9.0"), ("sm_89", "8.9"), ("t4", "7.5")):
        code, out = cli(str(FIXTURES / "13.0" / "kernels"), "--gpu", gpu, "--driver", "13.0", "--json")
        assert json.loads(out)["devices"][0]["cc"] == cc
    # sm_100 with the 13.0 kernels (sm_75/sm_90 cubins, compute_75 PTX): the PTX is JIT-compiled
    code, out = cli(str(FIXTURES / "13.0" / "kernels"), "--gpu", "sm_100", "--driver", "13.0", "--json")
    assert code == 0 and "compute_75" in json.loads(out)["images"][0]["reason"]


def test_cli_errors() -> None:
    code, out = cli(str(FIXTURES / "manifest.json"), "--gpu", "h100")
    assert code == 1 and "not an ELF file" in out
    code, out = cli(str(FIXTURES / "13.0" / "kernels"), "--gpu", "nosuchgpu")
    assert code == 2 and "unknown GPU model" in out
    code, out = cli(str(FIXTURES / "13.0" / "kernels"), "--server", "unix:///nonexistent", "--driver", "12.4")
    assert code == 2 and "either --server or --gpu" in out


def test_cli_server(servers) -> None:  # noqa: ANN001
    server = servers("12.2")
    code, out = cli(str(FIXTURES / "13.0" / "kernels"), "--server", server.url, "--json")
    d = json.loads(out)
    assert d["driver"] == 12020 and d["devices"][0]["cc"] == "9.0" and d["target_source"] == f"server {server.url}"
    assert code == EXPECTED["13.0/kernels"][DRIVERS.index("12.2")]
    code, out = cli(str(FIXTURES / "13.0" / "kernels"), "--server", "unix:///nonexistent/sock")
    assert code == 1 and "no gpushim server" in out


def test_manifest_records_the_builds() -> None:
    m = manifest()
    assert {v["version"] for v in m.values()} == {"11.8", "12.4", "13.0"}
    for key, v in m.items():
        assert (FIXTURES / key).stat().st_size == v["size"]
        assert "release " + v["version"] in v["nvcc"]
    total = sum(p.stat().st_size for p in FIXTURES.rglob("*") if p.is_file())
    assert total < 5_000_000
