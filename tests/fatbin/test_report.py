"""describe_binary and the `gpushim images` command."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpushim.fatbin import FatbinError
from gpushim.fatbin.report import describe_binary, images_command

MANY = "_Z4manycsixfdPv5Smallcb3Vect"


def test_describe_binary(built):
    report = describe_binary(built["multi_lz"])
    assert [fb["wrapper_version"] for fb in report["fatbins"]] == [2, 1]
    imgs = report["fatbins"][1]["images"]
    assert [(i["kind"], i["arch"], i["version"], i["compression"]) for i in imgs] == [
        ("cubin", 75, "1.8", "lz"), ("ptx", 90, "9.0", "lz"), ("cubin", 90, "1.8", "lz")]
    for img in imgs:
        k = img["kernels"][MANY]
        assert k["param_bytes"] == 114
        assert [(p["offset"], p["size"]) for p in k["params"]][-2:] == [(96, 16), (112, 2)]
        assert k["source"] == img["kind"]
        assert img["stored_size"] < img["size"]
    assert imgs[0]["cuda_api_version"] == 130
    json.dumps(report)  # serialisable


def test_describe_missing_and_not_elf(tmp_path):
    with pytest.raises(FileNotFoundError):
        describe_binary(tmp_path / "nope")
    p = tmp_path / "text"
    p.write_text("hello")
    with pytest.raises(FatbinError):
        describe_binary(p)


def test_images_command_table_and_json(built):
    runner = CliRunner()
    res = runner.invoke(images_command, [str(built["lz_all"])])
    assert res.exit_code == 0, res.output
    assert "cubin" in res.output and "ptx" in res.output and "lz" in res.output
    assert MANY in res.output
    res = runner.invoke(images_command, [str(built["default"]), "--json"])
    assert res.exit_code == 0
    data = json.loads(res.output)
    assert data["fatbins"][-1]["images"][1]["compression"] == "zstd"


def test_images_command_no_fatbins():
    res = CliRunner().invoke(images_command, ["/bin/sh"])
    assert res.exit_code == 0 and "no CUDA fat binaries" in res.output


def test_images_command_errors(tmp_path):
    runner = CliRunner()
    res = runner.invoke(images_command, [str(tmp_path / "missing")])
    assert res.exit_code == 2 and "no such file" in res.output
    p = tmp_path / "notelf"
    p.write_bytes(b"#!/bin/sh\necho hi\n")
    res = runner.invoke(images_command, [str(p)])
    assert res.exit_code == 2 and "not an ELF file" in res.output
