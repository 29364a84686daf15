"""``gpushim images BINARY``: what device code a host binary carries, and the parameter layouts of its kernels."""

from __future__ import annotations

import json
import os
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from .container import FatbinImage, parse_fatbin
from .cubin import cubin_info
from .elf import find_fatbins, read_binary
from .errors import FatbinError
from .ptx import ptx_info


def _image_kernels(img: FatbinImage) -> tuple[dict[str, Any], dict[str, Any]]:
    """(kernels, extra facts) of one image; errors are reported, not raised."""
    extra: dict[str, Any] = {}
    kernels: dict[str, Any] = {}
    try:
        if img.kind == "cubin":
            info = cubin_info(img.payload)
            extra["cuda_api_version"] = info.cuda_api_version
            extra["tool_version"] = info.tool_version
            for name, k in info.kernels.items():
                kernels[name] = {
                    "source": "cubin",
                    "param_bytes": k.param_bytes,
                    "params": [{"ordinal": p.ordinal, "offset": p.offset, "size": p.size} for p in k.params],
                }
        elif img.kind == "ptx":
            info = ptx_info(img.ptx_text)
            extra["ptx_target"] = info.target
            extra["features"] = sorted(info.features)
            for name, params in info.entries.items():
                layout = info.param_layout(name)
                kernels[name] = {
                    "source": "ptx",
                    "param_bytes": info.param_bytes(name),
                    "params": [
                        {"ordinal": i, "offset": off, "size": size, "align": align}
                        for i, ((off, size), (_s, align)) in enumerate(zip(layout, params, strict=True))
                    ],
                }
    except FatbinError as e:
        extra["error"] = str(e)
    return kernels, extra


def describe_binary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Every fatbin and image in a host binary, with kernel parameter layouts.

    Raises ``FileNotFoundError`` (or another ``OSError``) when the file cannot be read and
    :class:`FatbinError` when it is not an ELF file.  A malformed fatbin is reported in its entry's ``error``.
    """
    raw = read_binary(path)
    found = find_fatbins(raw)
    fatbins = []
    for i, fb in enumerate(found):
        entry: dict[str, Any] = {
            "index": i, "file_offset": fb.file_offset, "size": len(fb.data), "section": fb.section,
            "wrapper_version": fb.wrapper_version, "images": [],
        }
        try:
            images = parse_fatbin(fb.data)
        except FatbinError as e:
            entry["error"] = str(e)
            images = []
        for img in images:
            kernels, extra = _image_kernels(img)
            entry["images"].append({
                "kind": img.kind, "arch": img.arch, "arch_name": img.arch_name,
                "version": f"{img.version[0]}.{img.version[1]}", "compression": img.compression,
                "stored_size": img.stored_size, "size": img.size, "flags": img.flags, **extra, "kernels": kernels,
            })
        fatbins.append(entry)
    return {"path": os.fspath(path), "fatbins": fatbins}


def _params_text(k: dict[str, Any]) -> str:
    return ", ".join(f"{p['offset']}:{p['size']}" for p in k["params"]) or "-"


def print_report(report: dict[str, Any], console: Console) -> None:
    if not report["fatbins"]:
        console.print(f"{report['path']}: no CUDA fat binaries")
        return
    table = Table(title=f"device code in {report['path']}")
    for col in ("fatbin", "kind", "arch", "version", "codec", "stored", "size", "kernels"):
        right = col in ("stored", "size", "kernels")
        table.add_column(col, justify="right" if right else "left", no_wrap=True, min_width=len(col))
    for fb in report["fatbins"]:
        tag = f"#{fb['index']}" + (f" v{fb['wrapper_version']}" if fb["wrapper_version"] else "")
        if "error" in fb:
            table.add_row(tag, "[red]error[/red]", "", "", "", "", str(fb["size"]), fb["error"])
        for img in fb["images"]:
            kernels = img.get("error") or str(len(img["kernels"]))
            table.add_row(tag, img["kind"], img["arch_name"], img["version"], img["compression"],
                          str(img["stored_size"]), str(img["size"]), kernels)
    console.print(table)
    layouts: dict[str, str] = {}
    for fb in report["fatbins"]:
        for img in fb["images"]:
            for name, k in img["kernels"].items():
                layouts.setdefault(name, f"{k['param_bytes']} bytes  (offset:size) {_params_text(k)}  [{k['source']}]")
    if layouts:
        ptable = Table(title="kernel parameters")
        ptable.add_column("kernel")
        ptable.add_column("layout")
        for name, text in layouts.items():
            ptable.add_row(name, text)
        console.print(ptable)


@click.command("images")
@click.argument("binary", type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def images_command(binary: str, as_json: bool) -> None:
    """List the CUDA device images (PTX, cubins) embedded in BINARY and their kernels' parameter layouts."""
    try:
        report = describe_binary(binary)
    except FileNotFoundError:
        click.echo(f"error: {binary}: no such file", err=True)
        raise SystemExit(2) from None
    except (OSError, FatbinError) as e:
        click.echo(f"error: {binary}: {e}", err=True)
        raise SystemExit(2) from None
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        print_report(report, Console())
