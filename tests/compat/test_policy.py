"""The compatibility table (adapters/compat.json) and the per-session policy built from it."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from gpushim.compat.policy import ImageChoice, Verdict, build_policy, relabel_ptx, required_isa
from gpushim.compat.table import VersionRange, fmt, load_table, parse_version, render_markdown
from gpushim.cuda_errors import CudaError
from gpushim.fatbin import FatbinImage, ptx_info
from gpushim.fatbin.container import FLAG_ARCH_SPECIFIC

ROOT = Path(__file__).resolve().parents[2]


# -- the table ----------------------------------------------------------------------------------------------------

def test_table_loads_and_is_consistent() -> None:
    t = load_table()
    assert set(t.families) == {11, 12, 13}
    assert [fmt(d.cuda) for d in t.drivers][:1] == ["11.0"] and fmt(t.drivers[-1].cuda) == "13.0"
    assert all(a.cuda < b.cuda for a, b in zip(t.drivers, t.drivers[1:], strict=False))
    # PTX ISA per driver never goes down; cubin ABI 1.8 only from 13.0
    assert all(a.ptx_isa <= b.ptx_isa for a, b in zip(t.drivers, t.drivers[1:], strict=False))
    assert {fmt(d.cuda) for d in t.drivers if d.cubin_abi_max == (1, 8)} == {"13.0"}


@pytest.mark.parametrize(("driver", "isa"), [("11.0", (7, 0)), ("11.8", (7, 8)), ("12.2", (8, 2)), ("12.4", (8, 4)),
                                             ("12.7", (8, 5)), ("12.9", (8, 8)), ("13.0", (9, 0)), ("13.1", (9, 0))])
def test_ptx_isa_per_driver(driver: str, isa: tuple[int, int]) -> None:
    assert build_policy(12040, parse_version(driver), [(9, 0)]).driver_isa == isa


def test_minimum_drivers_per_family() -> None:
    t = load_table()
    assert (fmt(t.families[11].min_driver), t.families[11].min_linux_driver) == ("11.0", "450.80.02")
    assert (fmt(t.families[12].min_driver), t.families[12].min_linux_driver) == ("12.0", "525.60.13")
    assert fmt(t.families[13].min_driver) == "13.0" and t.families[13].min_linux_driver.startswith("580")


def test_version_ranges() -> None:
    assert 12040 in VersionRange.parse(">=12.4") and 12030 not in VersionRange.parse(">=12.4")
    assert 12041 in VersionRange.parse("12.4")  # patch digits are ignored
    assert 11080 in VersionRange.parse("11.x") and 12000 not in VersionRange.parse("11.x")
    assert 12090 in VersionRange.parse("12.8-12.9") and 13000 not in VersionRange.parse("12.8-12.9")
    assert 11020 not in VersionRange.parse("<11.2") and 11010 in VersionRange.parse("<11.2")


def test_committed_doc_is_current() -> None:
    doc = ROOT / "docs" / "compatibility.md"
    assert doc.read_text(encoding="utf-8") == render_markdown(), (
        "docs/compatibility.md is stale: python -m gpushim.compat.table --markdown > docs/compatibility.md")


def test_markdown_command() -> None:
    out = subprocess.run([sys.executable, "-m", "gpushim.compat.table", "--markdown"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("# Compatibility table") and "| 13.0 | 580.65.06 | 9.0 | ≤ 1.8 |" in out


# -- whole sessions -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("client", "driver", "strategy", "error"), [
    ("13.0", "13.0", "native", 0),
    ("12.4", "13.0", "native", 0),
    ("11.8", "13.0", "native", 0),
    ("12.4", "12.2", "native", 0),   # minor-version compatibility
    ("13.0", "12.4", "translate", 0),  # a real libcudart 13 refuses this with 35
    ("13.0", "11.8", "translate", 0),
    ("12.4", "11.8", "translate", 0),
    ("10.2", "12.4", "reject", 35),
    ("14.0", "13.0", "reject", 35),
    ("12.4", "10.2", "reject", 35),
])
def test_session_verdict(client: str, driver: str, strategy: str, error: int) -> None:
    v = build_policy(parse_version(client), parse_version(driver), [(9, 0)]).session_verdict()
    assert (v.strategy, v.error) == (strategy, error), v
    assert v.reason


def test_session_rejects_when_no_device_is_supported() -> None:
    v = build_policy(12040, 11040, [(9, 0)]).session_verdict()  # H100 needs an 11.8 driver
    assert (v.strategy, v.error) == ("reject", 100) and "9.0" in v.reason
    v = build_policy(12040, 13000, [(7, 0)]).session_verdict()  # Volta: not on CUDA 13 drivers
    assert v.strategy == "reject" and "last: 12.x" in v.reason
    assert build_policy(12040, 11040, [(9, 0), (8, 0)]).session_verdict().ok


def test_session_log_lines() -> None:
    p = build_policy(13000, 12040, [(9, 0)])
    text = "\n".join(p.adaptations)
    assert text.startswith("session: translate: CUDA 13.0 application on a CUDA 12.4 driver")
    for word in ("PTX ISA 9.0", "cubin_abi_1.8", "struct cudaDeviceProp", "1008", "batch_prefetch_discard"):
        assert word in text
    assert "zstd_fatbin" not in text  # 12.4 reads zstd itself
    assert build_policy(13000, 13000, [(9, 0)]).adaptations == []
    old = "\n".join(build_policy(12040, 11080, [(9, 0)]).adaptations)
    for word in ("cuFuncGetParamInfo", "large_kernel_params", "zstd_fatbin", "PTX ISA 8.4"):
        assert word in old


# -- calls, features, errors --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("feature", "below", "at"), [
    ("cuFuncGetParamInfo", "12.2", "12.4"), ("large_kernel_params", "12.0", "12.1"), ("zstd_fatbin", "12.2", "12.4"),
    ("memory_pools", "11.1", "11.2"), ("cubin_abi_1.8", "12.9", "13.0"),
])
def test_driver_has(feature: str, below: str, at: str) -> None:
    assert not build_policy(12040, parse_version(below), [(8, 0)]).driver_has(feature)
    assert build_policy(12040, parse_version(at), [(8, 0)]).driver_has(feature)


def test_driver_features_without_a_client() -> None:
    from gpushim.compat.policy import driver_features

    f = driver_features(12020)
    assert not f["cuFuncGetParamInfo"] and f["large_kernel_params"] and not f["zstd_fatbin"] and f["memory_pools"]
    assert all(driver_features(13000).values())


def test_driver_has_unknown_feature() -> None:
    with pytest.raises(KeyError):
        build_policy(12040, 12040, [(9, 0)]).driver_has("warp_drive")


@pytest.mark.parametrize(("client", "driver", "api", "strategy", "error"), [
    ("12.4", "11.1", "cudaMallocAsync", "emulate", 0),
    ("12.4", "11.2", "cudaMallocAsync", "native", 0),
    ("12.4", "11.1", "cudaMallocAsync_ptsz", "emulate", 0),
    ("12.4", "11.1", "cudaMemPoolCreate", "reject", 801),
    ("11.8", "12.4", "cudaGraphInstantiate", "translate", 0),
    ("12.4", "11.8", "cudaGraphInstantiate", "translate", 0),
    ("12.4", "12.2", "cudaGraphInstantiate", "native", 0),
    ("12.4", "13.0", "cudaGetDriverEntryPoint", "reject", 801),
    ("12.4", "12.2", "cudaLaunchKernel", "emulate", 0),  # no cuFuncGetParamInfo: layouts parsed
    ("12.4", "12.4", "cudaLaunchKernel", "native", 0),
    ("13.0", "11.8", "__cudaGetKernel", "translate", 0),
    ("13.0", "12.2", "__cudaGetKernel", "native", 0),
    ("13.0", "12.4", "cudaMemPrefetchBatchAsync", "emulate", 0),
    ("13.0", "12.4", "cudaMemcpyBatchAsync", "emulate", 0),
    ("12.9", "13.0", "cudaMemcpyBatchAsync", "translate", 0),
    ("13.0", "12.2", "cudaGraphConditionalHandleCreate", "reject", 801),
    ("13.0", "12.4", "cudaGraphConditionalHandleCreate", "native", 0),
    ("13.0", "12.4", "cudaDeviceGetAttribute", "translate", 0),
    ("12.4", "12.2", "cudaDeviceGetAttribute", "native", 0),
    ("11.8", "13.0", "cudaGetDeviceProperties", "translate", 0),  # 728 vs 1008 bytes
    ("12.4", "12.2", "cudaGetDeviceProperties_v2", "native", 0),  # same layout
    ("12.4", "13.0", "cudaPointerGetAttributes", "translate", 0),  # 24 vs 88
    ("12.4", "11.8", "cudaPointerGetAttributes", "native", 0),  # 24 both
    ("12.4", "12.4", "cudaMalloc", "native", 0),
])
def test_check_api(client: str, driver: str, api: str, strategy: str, error: int) -> None:
    v = build_policy(parse_version(client), parse_version(driver), [(8, 0)]).check_api(api)
    assert (v.strategy, v.error) == (strategy, error), v
    assert v.strategy == "native" or v.reason
    assert "{" not in v.reason  # placeholders filled


def test_check_api_in_a_rejected_session() -> None:
    v = build_policy(12040, 10020, [(9, 0)]).check_api("cudaMalloc")
    assert (v.strategy, v.error) == ("reject", 35)


@pytest.mark.parametrize(("client", "code", "want"), [
    ("11.8", 402, 801), ("11.8", 226, 719), ("11.8", 913, 98), ("11.8", 915, 1), ("11.8", 225, 801),
    ("11.8", 4242, 999), ("11.8", 2, 2), ("11.8", 0, 0), ("12.4", 402, 402), ("12.4", 226, 719),
    ("13.0", 913, 913), ("13.0", 4242, 999),
])
def test_map_error(client: str, code: int, want: int) -> None:
    assert build_policy(parse_version(client), 13000, [(9, 0)]).map_error(code) == want


def test_kernel_params() -> None:
    old = build_policy(12040, 12000, [(9, 0)])
    assert old.check_kernel_params(4096).strategy == "native"
    v = old.check_kernel_params(6008)
    assert (v.strategy, v.error) == ("reject", 801) and "12.1" in v.reason
    assert build_policy(12040, 12010, [(9, 0)]).check_kernel_params(6008).strategy == "native"
    assert build_policy(12040, 13000, [(9, 0)]).check_kernel_params(40000).error == 1


# -- kernel images ------------------------------------------------------------------------------------------------

PTX = """//
// Generated by NVIDIA NVVM Compiler
.version {ver}
.target {target}
.address_size 64

.visible .entry k(
\t.param .u64 k_param_0
)
{{
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<3>;
{body}
\tld.param.u64 %rd1, [k_param_0];
\tcvta.to.global.u64 %rd2, %rd1;
\tmov.u32 %r1, %tid.x;
\tst.global.u32 [%rd2], %r1;
\tret;
}}
"""


def ptx_image(ver: str = "9.0", target: str = "sm_75", body: str = "", arch: int = 75, flags: int = 0x11,
              compression: str = "none") -> FatbinImage:
    text = PTX.format(ver=ver, target=target, body=body)
    payload = text.encode()
    major, minor = (int(x) for x in ver.split("."))
    return FatbinImage("ptx", arch, (major, minor), compression, len(payload), len(payload), flags, payload)


def cubin_image(arch: int, abi: tuple[int, int] = (1, 7), flags: int = 0x11) -> FatbinImage:
    return FatbinImage("cubin", arch, abi, "none", 64, 64, flags, b"\x7fELF" + bytes(60))


def test_cubin_for_the_device_is_native() -> None:
    p = build_policy(12040, 12040, [(8, 6)])
    choice = p.choose_image([cubin_image(80), cubin_image(86), cubin_image(75), ptx_image("8.4")], (8, 6))
    assert isinstance(choice, ImageChoice)
    assert (choice.image.arch, choice.strategy, choice.ptx_text) == (86, "native", None)
    # sm_80 runs on 8.9 (same major, lower minor); sm_90 does not run on 8.x
    choice = p.choose_image([cubin_image(80), cubin_image(90), ptx_image("8.4")], (8, 9))
    assert choice.image.arch == 80 and choice.kind == "cubin"


def test_cubin_abi_18_needs_a_13_driver() -> None:
    images = [cubin_image(90, (1, 8)), ptx_image("9.0", arch=75)]
    assert build_policy(13000, 13000, [(9, 0)]).choose_image(images, (9, 0)).kind == "cubin"
    choice = build_policy(13000, 12040, [(9, 0)]).choose_image(images, (9, 0))
    assert choice.kind == "ptx" and choice.strategy == "translate"
    assert "ELF ABI 1.8" in choice.reason and "re-labelled from ISA 9.0 to 8.4" in choice.reason
    assert ptx_info(choice.ptx_text or "").version == (8, 4)


def test_ptx_jit_native_when_the_driver_knows_the_isa() -> None:
    choice = build_policy(12040, 12040, [(9, 0)]).choose_image([cubin_image(52), ptx_image("8.4", "sm_52", arch=52)],
                                                               (9, 0))
    assert (choice.kind, choice.strategy) == ("ptx", "native")
    assert choice.ptx_text is not None and ".version 8.4" in choice.ptx_text


def test_ptx_relabel_decided_by_the_feature_scan() -> None:
    simple = ptx_image("9.0")
    elect = ptx_image("9.0", target="sm_90", arch=90, body="\t.reg .pred %p<2>;\n\telect.sync %r2|%p1, -1;")
    assert required_isa(elect.ptx_text)[0] == (8, 0)
    # 12.2 driver (ISA 8.2): both re-labelled
    for img in (simple, elect):
        c = build_policy(13000, 12020, [(9, 0)]).choose_image([img], (9, 0))
        assert c.strategy == "translate" and ".version 8.2" in (c.ptx_text or "")
    # 11.8 driver (ISA 7.8): elect.sync (PTX 8.0) cannot be expressed -> 222 with the reason
    assert ".version 7.8" in (build_policy(13000, 11080, [(9, 0)]).choose_image([simple], (9, 0)).ptx_text or "")
    with pytest.raises(CudaError) as e:
        build_policy(13000, 11080, [(9, 0)]).choose_image([elect], (9, 0))
    assert e.value.code == 222 and "elect.sync" in e.value.message and "7.8" in e.value.message


def test_arch_specific_targets() -> None:
    spec_cubin = cubin_image(90, flags=0x11 | FLAG_ARCH_SPECIFIC)
    spec_ptx = ptx_image("8.4", "sm_90a", arch=90, flags=0x11 | FLAG_ARCH_SPECIFIC)
    images = [spec_cubin, spec_ptx]
    assert build_policy(12040, 12000, [(9, 0)]).choose_image(images, (9, 0)).kind == "cubin"
    with pytest.raises(CudaError) as e:  # 11.8: no sm_90a cubins, and sm_90a PTX needs ISA 8.0
        build_policy(12040, 11080, [(9, 0)]).choose_image(images, (9, 0))
    assert e.value.code == 222 and "sm_90a" in e.value.message
    with pytest.raises(CudaError) as e:  # sm_90a runs on exactly 9.0, never on 10.0
        build_policy(12040, 13000, [(10, 0)]).choose_image(images, (10, 0))
    assert e.value.code == 209


def test_nothing_for_the_device() -> None:
    with pytest.raises(CudaError) as e:
        build_policy(12040, 12040, [(9, 0)]).choose_image([cubin_image(75), cubin_image(86)], (9, 0))
    assert e.value.code == 209 and "sm_75" in e.value.message and "sm_90" in e.value.message
    with pytest.raises(CudaError) as e:  # PTX for a newer arch cannot be JIT-compiled for an older device
        build_policy(12040, 12040, [(7, 5)]).choose_image([ptx_image("8.4", "sm_90", arch=90)], (7, 5))
    assert e.value.code == 209


def test_zstd_image_on_an_old_driver_is_translated() -> None:
    img = ptx_image("8.2", "sm_75", compression="zstd")
    assert build_policy(12020, 12020, [(9, 0)]).choose_image([img], (9, 0)).strategy == "translate"
    assert build_policy(12040, 12040, [(9, 0)]).choose_image([img], (9, 0)).strategy == "native"


def test_still_compressed_ptx_is_refused_with_a_reason() -> None:
    text = PTX.format(ver="8.4", target="sm_75", body="").encode()
    blob = zstandard.ZstdCompressor().compress(text)
    img = FatbinImage("ptx", 75, (8, 4), "zstd", len(blob), len(text), 0x8011, blob)
    with pytest.raises(CudaError) as e:
        build_policy(12040, 12020, [(9, 0)]).choose_image([img], (9, 0))
    assert "compressed" in e.value.message


def test_relabel_ptx_changes_only_the_version() -> None:
    text = PTX.format(ver="9.0", target="sm_75", body="")
    out = relabel_ptx(text, (7, 8))
    assert out.replace(".version 7.8", ".version 9.0") == text


def test_verdict_worse() -> None:
    assert Verdict("translate").worse(Verdict("reject", 801, "x")).strategy == "reject"
    assert Verdict("emulate").worse(Verdict("native")).strategy == "emulate"


def test_fixture_images_per_driver() -> None:
    """choose_image on the committed fixtures' real fat binaries."""
    from gpushim.compat.elfscan import scan_elf
    from gpushim.fatbin import parse_fatbin

    def choose(path: str, client: int, driver: int) -> ImageChoice:
        fatbins = scan_elf(ROOT / "tests" / "fixtures" / "bin" / path).fatbins
        module = parse_fatbin(fatbins[-1])  # the last one is the module (the first: nvlink's stub)
        return build_policy(client, driver, [(9, 0)]).choose_image(module, (9, 0))

    assert choose("13.0/kernels", 13000, 13000).image.arch_name == "sm_90"
    c = choose("13.0/kernels", 13000, 12020)
    assert c.kind == "ptx" and "zstd" in c.reason and ptx_info(c.ptx_text or "").version == (8, 2)
    assert choose("12.4/kernels", 12040, 11080).strategy == "translate"
    assert choose("11.8/kernels", 11080, 11080).strategy == "native"
    with pytest.raises(CudaError) as e:
        choose("13.0/archspecific", 13000, 11080)
    assert e.value.code == 222


def test_struct_bytes_in_the_cubins_match_the_params() -> None:
    # sanity of the synthetic cubin helper: the policy never parses cubin payloads
    assert struct.unpack_from("<I", cubin_image(90).payload)[0] == 0x464C457F
