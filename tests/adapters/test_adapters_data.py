"""The generated per-runtime-version data in adapters/ loads and says what the real libraries measured."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import adapters  # noqa: E402

VERSIONS = ["11.8", "12.4", "12.9", "13.0"]


def test_versions() -> None:
    assert adapters.versions() == VERSIONS


@pytest.mark.parametrize("version,count", [("11.8", 395), ("12.4", 416), ("12.9", 435), ("13.0", 422)])
def test_export_counts_and_prototypes(version: str, count: int) -> None:
    abi = adapters.abi(version)
    assert len(abi.exports) == count
    # every export has a prototype, and only exports have one
    assert set(abi.prototypes) == set(abi.exports)
    for name in ("__cudaRegisterFatBinary", "__cudaRegisterFunction", "__cudaPushCallConfiguration",
                 "__cudaPopCallConfiguration", "cudaMalloc", "cudaLaunchKernel", "cudaGetErrorString"):
        assert name in abi.exports
    assert abi.prototypes["cudaMalloc"]["params"] == [{"name": "devPtr", "type": "void**"},
                                                     {"name": "size", "type": "size_t"}]
    assert abi.prototypes["cudaGetErrorString"]["return"] == "const char*"
    assert not abi.prototypes["cudaGetErrorString"]["returns_error"]
    assert abi.prototypes["__cudaRegisterFatBinary"]["return"] == "void**"


def test_export_differences_between_versions() -> None:
    e = {v: adapters.abi(v).exports for v in VERSIONS}
    assert "cudaBindTexture" in e["11.8"] and "cudaBindTexture" not in e["12.4"]
    assert "__cudaGetKernel" in e["12.4"] and "__cudaGetKernel" not in e["11.8"]
    assert "cudaGetDeviceProperties_v2" in e["12.9"] and "cudaGetDeviceProperties_v2" not in e["13.0"]
    assert not any(n.endswith(("_v2", "_v3")) for n in e["13.0"])
    assert "__cudaGetProcAddress" in e["13.0"]


@pytest.mark.parametrize("name,sizes", [
    ("cudaDeviceProp", [728, 1032, 1032, 1008]),
    ("cudaFuncAttributes", [56, 144, 144, 144]),
    ("cudaPointerAttributes", [24, 24, 24, 88]),
    ("cudaResourceDesc", [64, 64, 64, 144]),
    ("cudaResourceViewDesc", [48, 48, 48, 112]),
    ("cudaExternalMemoryHandleDesc", [40, 40, 40, 104]),
    ("cudaExternalMemoryBufferDesc", [24, 24, 24, 88]),
    ("cudaExternalMemoryMipmappedArrayDesc", [64, 64, 64, 128]),
    ("cudaExternalSemaphoreHandleDesc", [32, 32, 32, 96]),
    ("cudaChildGraphNodeParams", [None, 8, 16, 16]),
    ("cudaLaunchConfig_t", [56] * 4),
    ("cudaLaunchAttribute", [72] * 4),
    ("cudaKernelNodeParams", [56] * 4),
    ("cudaMemLocation", [8] * 4),
    ("cudaMemcpy3DParms", [160] * 4),
    ("cudaIpcMemHandle_t", [64] * 4),
    ("cudaIpcEventHandle_t", [64] * 4),
    ("cudaExtent", [24] * 4),
    ("cudaPos", [24] * 4),
    ("cudaPitchedPtr", [32] * 4),
    ("cudaChannelFormatDesc", [20] * 4),
])
def test_struct_sizes(name: str, sizes: list[int | None]) -> None:
    for version, size in zip(VERSIONS, sizes, strict=True):
        abi = adapters.abi(version)
        if size is None:
            assert name not in abi.layouts
        else:
            assert abi.sizeof(name) == size, (version, name)


def test_device_prop_offsets() -> None:
    old, v12, v13 = (adapters.abi(v) for v in ("11.8", "12.4", "13.0"))
    for abi in (old, v12, v13):
        assert abi.offsetof("cudaDeviceProp", "totalConstMem") == 352
        assert abi.offsetof("cudaDeviceProp", "major") == 360
        assert abi.offsetof("cudaDeviceProp", "minor") == 364
        name = abi.layouts["cudaDeviceProp"]["fields"][0]
        assert (name["name"], name["type"], name["count"], name["size"]) == ("name", "char", 256, 256)
    assert old.offsetof("cudaDeviceProp", "multiProcessorCount") == 388
    assert v13.offsetof("cudaDeviceProp", "multiProcessorCount") == 384
    assert v12.offsetof("cudaDeviceProp", "l2CacheSize") == 616
    assert v13.offsetof("cudaDeviceProp", "l2CacheSize") == 596
    v13_fields = {f["name"] for f in v13.layouts["cudaDeviceProp"]["fields"]}
    for gone in ("clockRate", "deviceOverlap", "kernelExecTimeoutEnabled", "computeMode", "maxTexture1DLinear",
                 "memoryClockRate", "singleToDoublePrecisionPerfRatio", "cooperativeMultiDeviceLaunch"):
        assert gone not in v13_fields
    # 11.8 and 12.x agree on every field 11.8 has
    f12 = {f["name"]: f["offset"] for f in v12.layouts["cudaDeviceProp"]["fields"]}
    for f in old.layouts["cudaDeviceProp"]["fields"]:
        if not f["name"].startswith("reserved"):
            assert f12[f["name"]] == f["offset"], f["name"]
    dims = {f["name"]: f.get("dims") for f in v12.layouts["cudaDeviceProp"]["fields"]}
    assert dims["maxTexture2DLayered"] is None and dims["maxGridSize"] is None


def test_errors() -> None:
    known = {v: set(adapters.abi(v).errors) for v in VERSIONS}
    for v in VERSIONS:
        abi = adapters.abi(v)
        assert abi.error_name(0) == "cudaSuccess"
        assert abi.error_name(35) == "cudaErrorInsufficientDriver"
        assert abi.error_name(999) == "cudaErrorUnknown"
        assert abi.error_name(1000) == "unrecognized error code"
        # every known code is in the header enum with the same name
        enum = abi.enums["cudaError"]
        for code, e in abi.errors.items():
            assert enum[e.name] == code
    new_in_12 = (known["12.9"] - known["11.8"])
    assert new_in_12 == {225, 226, 402, 721, 811, 812, 913, 914, 915}
    assert known["11.8"] <= known["12.4"] <= known["12.9"] == known["13.0"]


def test_enums_and_versions() -> None:
    for v, rv in zip(VERSIONS, (11080, 12040, 12090, 13000), strict=True):
        abi = adapters.abi(v)
        assert abi.runtime_version == rv
        for e in ("cudaDeviceAttr", "cudaMemcpyKind", "cudaLimit", "cudaFuncAttribute", "cudaError"):
            assert abi.enums[e]
        assert abi.enums["cudaMemcpyKind"]["cudaMemcpyDefault"] == 4
        assert abi.enums["cudaDeviceAttr"]["cudaDevAttrMultiProcessorCount"] == 16
    assert adapters.abi("11.8").version["runtime_get_version_without_driver"]["error"] == 35
    assert adapters.abi("12.4").header_alias("cudaGetDeviceProperties") == "cudaGetDeviceProperties_v2"
    assert adapters.abi("13.0").header_alias("cudaGetDeviceProperties") == "cudaGetDeviceProperties"
    assert adapters.abi("12.4").header_alias("cudaMemcpy", per_thread=True) == "cudaMemcpy_ptds"
    assert adapters.abi("12.4").header_alias("cudaLaunchKernel", per_thread=True) == "cudaLaunchKernel_ptsz"


@pytest.mark.parametrize("rv,expect", [(11000, "11.8"), (11080, "11.8"), (12000, "12.4"), (12040, "12.4"),
                                       (12060, "12.4"), (12090, "12.9"), (12100, "12.9"), (13000, "13.0"),
                                       (13020, "13.0")])
def test_abi_for(rv: int, expect: str) -> None:
    abi = adapters.abi_for(rv)
    assert abi.data_version == expect
    assert abi.node == {"11": "libcudart.so.11.0", "12": "libcudart.so.12", "13": "libcudart.so.13"}[expect[:2]]
    assert abi.soname == abi.node


def test_abi_for_unknown_major() -> None:
    with pytest.raises(LookupError):
        adapters.abi_for(10020)


def test_nodes() -> None:
    n = adapters.nodes()
    assert {k: v["count"] for k, v in n["nodes"].items()} == {
        "libcudart.so.11.0": 395, "libcudart.so.12": 435, "libcudart.so.13": 422}
    f = n["functions"]
    assert f["cudaMalloc"]["abi_identical"] and len(f["cudaMalloc"]["nodes"]) == 3
    gdp = f["cudaGetDeviceProperties"]
    assert gdp["prototype_identical"] and not gdp["abi_identical"] and gdp["layout_differences"] == ["cudaDeviceProp"]
    assert not f["cudaGraphInstantiate"]["prototype_identical"]
    variants = {tuple(v["versions"]) for v in f["cudaGraphInstantiate"]["variants"]}
    assert variants == {("11.8",), ("12.4", "12.9", "13.0")}
    assert not f["cudaMemAdvise"]["abi_identical"]
    assert f["__cudaRegisterFatBinary"]["abi_identical"]


def test_importable_as_gpushim_adapters(tmp_path: Path) -> None:
    """Installed as package data of gpushim, the loader finds its data next to itself."""
    pkg = tmp_path / "gpushim"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copytree(ROOT / "adapters", pkg / "adapters", ignore=shutil.ignore_patterns("tools", "__pycache__"))
    code = textwrap.dedent("""
        import json
        from gpushim import adapters
        abi = adapters.abi_for(12040)
        print(json.dumps([adapters.versions(), abi.sizeof("cudaDeviceProp"), abi.node]))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)})
    assert json.loads(out.stdout) == [VERSIONS, 1032, "libcudart.so.12"]


CACHE = Path.home() / ".cache" / "gpushim" / "runtimes"


@pytest.mark.skipif(not all((CACHE / v / "source.json").exists() for v in VERSIONS),
                    reason="runtimes not fetched (python adapters/tools/fetch_runtimes.py)")
def test_regenerate_matches_committed(tmp_path: Path) -> None:
    """The committed data is exactly what the generators produce from the fetched libraries."""
    pytest.importorskip("pycparser")
    tools = ROOT / "adapters" / "tools"
    subprocess.run([sys.executable, str(tools / "gen_adapters.py"), "--out", str(tmp_path)], check=True,
                   capture_output=True)
    subprocess.run([sys.executable, str(tools / "gen_shim_exports.py"), "--data", str(tmp_path)], check=True,
                   capture_output=True)
    committed = ROOT / "adapters" / "cudart"
    for f in sorted(committed.rglob("*")):
        if f.is_file():
            rel = f.relative_to(committed)
            assert (tmp_path / rel).read_text() == f.read_text(), rel
