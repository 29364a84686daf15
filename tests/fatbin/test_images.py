"""Fatbins found in real nvcc 13 builds: kinds, architectures, compression, and that every codec yields the
same bytes."""

from __future__ import annotations

import pytest

from gpushim.fatbin import FatbinError, cubin_info, fatbin_size, fatbins_in_elf, find_fatbins, parse_fatbin

from .helpers import images, main_images, summary

KERNELS = {"_Z4taddIfEvPT_PKS0_i", "_Z4taddIdEvPT_PKS0_i", "_Z4taddIiEvPT_PKS0_i", "_Z5emptyv",
           "_Z3bigPf3Big", "_Z4manycsixfdPv5Smallcb3Vect"}


def test_default_build_has_sm75_cubin_and_zstd_ptx(built):
    found = find_fatbins(built["default"])
    assert [f.wrapper_version for f in found] == [2, 1]  # device-link output, then the registered module
    assert all(f.section == ".nv_fatbin" for f in found)
    imgs = main_images(built["default"])
    assert summary(imgs) == [("cubin", 75, "none"), ("ptx", 75, "zstd")]
    cubin, ptx = imgs
    assert cubin.version == (1, 8)  # cubin ELF ABI of CUDA 13
    assert ptx.version == (9, 0)  # PTX ISA of CUDA 13.0
    assert cubin.payload.startswith(b"\x7fELF") and len(cubin.payload) == cubin.size
    assert ".version 9.0" in ptx.ptx_text and ".target sm_75" in ptx.ptx_text
    assert "\0" not in ptx.ptx_text
    assert ptx.stored_size < ptx.size and ptx.stored_size % 8 == 0
    assert cubin.arch_name == "sm_75" and ptx.arch_name == "compute_75"
    with pytest.raises(FatbinError):
        _ = cubin.ptx_text


@pytest.mark.parametrize(("name", "expected"), [
    ("none", [("cubin", 75, "none"), ("ptx", 75, "none")]),
    ("no_compress", [("cubin", 75, "none"), ("ptx", 75, "none")]),
    ("zstd_all", [("cubin", 75, "zstd"), ("ptx", 75, "zstd")]),
    ("lz", [("cubin", 75, "none"), ("ptx", 75, "lz")]),
    ("lz_all", [("cubin", 75, "lz"), ("ptx", 75, "lz")]),
    ("multi_lz", [("cubin", 75, "lz"), ("ptx", 90, "lz"), ("cubin", 90, "lz")]),
    ("multi_none", [("cubin", 75, "none"), ("ptx", 90, "none"), ("cubin", 90, "none")]),
])
def test_compression_modes(built, name, expected):
    assert summary(main_images(built[name])) == expected


def test_object_file_fatbin_found_through_relocated_wrapper(built):
    (found,) = find_fatbins(built["no_compress"])
    assert found.wrapper_version == 1  # wrapper pointer resolved through .rela.nvFatBinSegment


def _by_key(path):
    return {(i.kind, i.arch): i for i in main_images(path)}


@pytest.mark.parametrize("compressed", ["default", "zstd_all", "lz", "lz_all"])
def test_codecs_give_identical_payloads(built, compressed):
    plain = _by_key(built["none"])
    other = _by_key(built[compressed])
    assert plain.keys() == other.keys()
    for key, img in other.items():
        ref = plain[key]
        if key[0] == "ptx":
            assert img.ptx_text == ref.ptx_text
            assert img.payload.rstrip(b"\0") == ref.payload.rstrip(b"\0")
        else:
            assert img.payload == ref.payload  # byte for byte
        assert img.size == len(img.payload)


def test_lz_multi_arch_identical_to_uncompressed(built):
    plain = _by_key(built["multi_none"])
    lz = _by_key(built["multi_lz"])
    assert plain.keys() == lz.keys() == {("cubin", 75), ("cubin", 90), ("ptx", 90)}
    assert lz["cubin", 75].payload == plain["cubin", 75].payload
    assert lz["cubin", 90].payload == plain["cubin", 90].payload
    assert lz["ptx", 90].ptx_text == plain["ptx", 90].ptx_text
    # the device-link fatbin too
    dl_plain, dl_lz = images(built["multi_none"])[0], images(built["multi_lz"])[0]
    assert [i.payload for i in dl_plain] == [i.payload for i in dl_lz]


def test_cubins_carry_kernels_and_toolkit_version(built):
    for (kind, arch), img in _by_key(built["multi_lz"]).items():
        if kind != "cubin":
            continue
        info = cubin_info(img.payload)
        assert info.arch == arch
        assert info.abi_version == (1, 8)
        assert info.cuda_api_version == 130
        assert set(info.kernels) == KERNELS
        assert info.tool_version and "13.0" in info.tool_version


def test_fatbin_size_and_trailing_bytes(built):
    fb = fatbins_in_elf(built["lz_all"])[-1]
    assert fatbin_size(fb[:16]) == len(fb)
    assert summary(parse_fatbin(fb + b"\xde\xad" * 100)) == summary(parse_fatbin(fb))
    assert summary(parse_fatbin(memoryview(bytearray(fb)))) == summary(parse_fatbin(fb))


def test_fatbins_in_elf_accepts_bytes_and_finds_nothing_in_plain_elf(built, tmp_path):
    raw = built["default"].read_bytes()
    assert fatbins_in_elf(raw) == fatbins_in_elf(built["default"])
    assert fatbins_in_elf("/bin/sh") == []
    junk = tmp_path / "junk"
    junk.write_bytes(b"not an elf at all")
    with pytest.raises(FatbinError):
        fatbins_in_elf(junk)


def test_section_headers_stripped_falls_back_to_scan(built):
    raw = bytearray(built["lz"].read_bytes())
    # wipe e_shoff/e_shnum/e_shstrndx: the file still runs, but has no sections
    raw[0x28:0x30] = bytes(8)
    raw[0x3C:0x40] = bytes(4)
    found = fatbins_in_elf(bytes(raw))
    assert found == fatbins_in_elf(built["lz"])


def test_header_only_listing(built):
    fb = fatbins_in_elf(built["multi_lz"])[-1]
    full = parse_fatbin(fb)
    quick = parse_fatbin(fb, decompress=False)
    assert [(i.kind, i.arch, i.version, i.compression, i.size, i.stored_size) for i in quick] == [
        (i.kind, i.arch, i.version, i.compression, i.size, i.stored_size) for i in full]
    assert all(len(i.payload) == i.stored_size for i in quick)


def test_rdc_build_registers_the_device_linked_fatbin(built):
    found = find_fatbins(built["rdc"])
    assert [(f.section, f.wrapper_version) for f in found] == [(".nv_fatbin", 2), ("__nv_relfatbin", 1)]
    linked, relocatable = (parse_fatbin(f.data) for f in found)
    assert summary(linked) == [("cubin", 75, "none")]
    assert summary(relocatable) == [("cubin", 75, "zstd"), ("ptx", 75, "zstd")]  # -rdc compresses the cubin too
    assert set(cubin_info(linked[0].payload).kernels) == KERNELS == set(cubin_info(relocatable[0].payload).kernels)
