"""``gpushim compat-check BINARY``: will this application (or shared library) run through gpushim on a given
GPU and driver, natively, with adaptations, or not at all -- decided from its ELF file alone.

It reads what the binary needs (``scan_elf``: the libcudart it links and the version nodes of its cuda*
imports, static cudart, fat binaries), works out the client runtime version (the toolkit recorded in its
cubins, else the PTX ISA, else the libcudart major), builds the same policy a server would build for the
session (``gpushim.compat.policy``) and prints a verdict per imported API and per kernel image, and an overall
verdict.  Exit status: 0 runs natively, 1 runs with adaptations, 2 will not run.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import click

from gpushim.compat.elfscan import ElfScan, scan_elf
from gpushim.compat.policy import Policy, Verdict, build_policy
from gpushim.compat.table import encode, fmt, load_table, parse_version
from gpushim.cuda_errors import CudaError
from gpushim.fatbin import FatbinError, FatbinImage, cubin_info, parse_fatbin, ptx_info

__all__ = ["CheckReport", "check_binary", "compat_check_command", "shim_stubs"]

VERDICT_TEXT = {0: "runs natively", 1: "runs with adaptations", 2: "will not run"}
_SONAME_MAJOR = re.compile(r"^libcudart\.so\.(\d+)")
_NODE_MAJOR = {"libcudart.so.11.0": 11, "libcudart.so.12": 12, "libcudart.so.13": 13}


@dataclass
class Row:
    what: str  # API name or image description
    strategy: str
    error: int = 0
    reason: str = ""
    node: str | None = None
    device: str | None = None

    @property
    def exit_code(self) -> int:
        return {"native": 0, "translate": 1, "emulate": 1, "reject": 2}[self.strategy]


@dataclass
class CheckReport:
    binary: str
    elf_type: str
    cudart_soname: str | None
    client_runtime: int | None
    client_runtime_source: str
    static_cudart: bool
    driver: int
    devices: list[dict[str, Any]]
    target_source: str
    session: Row | None = None
    apis: list[Row] = field(default_factory=list)
    images: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    fatbins: list[list[dict[str, Any]]] = field(default_factory=list)  # per fat binary: its images
    adaptations: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # reasons the program will not run

    @property
    def exit_code(self) -> int:
        rows = [r for r in [self.session, *self.apis, *self.images] if r is not None]
        code = max((r.exit_code for r in rows), default=0)
        if self.problems:
            code = 2
        return code

    @property
    def verdict(self) -> str:
        return VERDICT_TEXT[self.exit_code]

    def reasons(self) -> list[str]:
        out = list(self.problems)
        for r in [self.session, *self.apis, *self.images]:
            if r is None or r.strategy == "native" or not r.reason:
                continue
            line = f"{r.what}: {r.strategy}" + (f" ({r.error})" if r.error else "") + f": {r.reason}"
            if line not in out:
                out.append(line)
        return out

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["client_runtime_text"] = fmt(self.client_runtime) if self.client_runtime else None
        d["driver_text"] = fmt(self.driver)
        d["verdict"] = self.verdict
        d["exit_code"] = self.exit_code
        d["reasons"] = self.reasons()
        return d


# -- what gpushim's shim implements ---------------------------------------------------------------------------

@cache
def shim_stubs(path: str | None = None) -> dict[str, set[str]] | None:
    """Per version node, the functions libgpushim.so only stubs (they return cudaErrorNotSupported): exported
    names whose address is that of a ``gs_stub_*`` function.  None when the shim is not built or stripped."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    from gpushim.fatbin.elf import open_elf, read_binary

    if path is None:
        from gpushim.paths import shim_path

        path = str(shim_path())
    if not Path(path).exists():
        return None
    elf: ELFFile = open_elf(read_binary(path))
    symtab = elf.get_section_by_name(".symtab")
    dynsym = elf.get_section_by_name(".dynsym")
    if not isinstance(symtab, SymbolTableSection) or not isinstance(dynsym, SymbolTableSection):
        return None
    stub_addrs = {s["st_value"] for s in symtab.iter_symbols() if s.name.startswith("gs_stub_")}
    if not stub_addrs:
        return None
    from elftools.elf.gnuversions import GNUVerDefSection, GNUVerSymSection

    versym = next((s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection)), None)
    verdef = next((s for s in elf.iter_sections() if isinstance(s, GNUVerDefSection)), None)
    names: dict[int, str] = {}
    if verdef is not None:
        for vd, aux in verdef.iter_versions():
            first = next(iter(aux), None)
            if first is not None:
                names[vd["vd_ndx"]] = first.name
    out: dict[str, set[str]] = {}
    for i, sym in enumerate(dynsym.iter_symbols()):
        if sym["st_value"] not in stub_addrs or not sym.name or versym is None:
            continue
        ndx = versym.get_symbol(i)["ndx"]
        if ndx == "VER_NDX_GLOBAL":  # unversioned: the driver face's cu* (keyed by the base name, libcuda.so.1)
            ndx = 1
        node = names.get(ndx & 0x7FFF) if isinstance(ndx, int) else None
        if node:
            out.setdefault(node, set()).add(sym.name)
    return out


# -- the client runtime ---------------------------------------------------------------------------------------

def client_runtime(scan: ElfScan) -> tuple[int | None, str]:
    major = None
    if scan.cudart_soname and (m := _SONAME_MAJOR.match(scan.cudart_soname)):
        major = int(m.group(1))
    if major is None:
        majors = {_NODE_MAJOR[n] for n in scan.cuda_symbol_versions if n in _NODE_MAJOR}
        major = max(majors) if majors else None
    apis = sorted(v for v in scan.cuda_api_versions if major is None or v // 10 == major)
    if apis:
        v = apis[-1]
        return encode(v // 10, v % 10), f"EIATTR_CUDA_API_VERSION {v} in its cubins"
    if scan.ptx_versions:
        isa = max(scan.ptx_versions)
        t = load_table()
        rows = [d for d in t.drivers if d.ptx_isa == isa and (major is None or d.cuda // 1000 == major)]
        if rows:
            return rows[0].cuda, f"its PTX ISA {isa[0]}.{isa[1]}"
    if major is not None:
        return encode(major, 0), f"{scan.cudart_soname or 'its version nodes'} (minor unknown)"
    return None, "no CUDA runtime linkage"


# -- targets --------------------------------------------------------------------------------------------------

def _cc_of(text: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"(?:sm_?)?(\d+)\.(\d+)", text.strip()) or re.fullmatch(r"sm_?(\d+)(\d)", text.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def gpu_target(gpu: str) -> dict[str, Any]:
    cc = _cc_of(gpu)
    if cc:
        return {"name": f"sm_{cc[0]}{cc[1]}", "cc": f"{cc[0]}.{cc[1]}"}
    from gpushim.backends.emulator.models import find_model

    try:
        m = find_model(gpu)
    except KeyError as e:
        raise click.BadParameter(str(e.args[0]), param_hint="--gpu") from None
    return {"name": m.name, "cc": f"{m.major}.{m.minor}"}


def server_target(url: str) -> tuple[int, list[dict[str, Any]]]:
    from gpushim.cli import query_status

    try:
        st = query_status(url)
    except OSError as e:
        raise click.ClickException(f"no gpushim server at {url}: {e.strerror or e}") from None
    return int(st["driver"]), [{"name": d.get("name", "?"), "cc": str(d["cc"])} for d in st.get("devices", [])]


# -- the check ------------------------------------------------------------------------------------------------

def _param_bytes(images: list[FatbinImage]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for img in images:
        try:
            if img.kind == "cubin":
                for name, k in cubin_info(img.payload).kernels.items():
                    sizes[name] = max(sizes.get(name, 0), k.param_bytes)
            elif img.kind == "ptx":
                info = ptx_info(img.ptx_text)
                for name in info.entries:
                    sizes[name] = max(sizes.get(name, 0), info.param_bytes(name))
        except FatbinError:
            continue
    return sizes


def _has_kernels(images: list[FatbinImage]) -> bool:
    if any(i.kind == "ptx" for i in images):
        return True
    for img in images:
        if img.kind == "cubin":
            try:
                if cubin_info(img.payload).kernels:
                    return True
            except FatbinError:
                return True
    return False


def _listing(fatbins: list[bytes]) -> list[list[dict[str, Any]]]:
    out = []
    for data in fatbins:
        try:
            images = parse_fatbin(data, decompress=False)
        except FatbinError:
            out.append([])
            continue
        out.append([{"kind": i.kind, "arch": i.arch_name, "version": f"{i.version[0]}.{i.version[1]}",
                     "compression": i.compression, "stored_size": i.stored_size, "size": i.size} for i in images])
    return out


def _relocatable(images: list[FatbinImage]) -> bool:
    """A translation unit's fat binary of relocatable device code (-rdc): its cubins are ELF relocatable
    objects (e_type ET_REL)."""
    return any(i.kind == "cubin" and bytes(i.payload[16:18]) == b"\x01\x00" for i in images)


def _image_rows(policy: Policy, fatbins: list[bytes], ccs: list[tuple[int, int]]) -> tuple[list[Row], list[str]]:
    rows: list[Row] = []
    notes: list[str] = []
    parsed: list[list[FatbinImage] | FatbinError] = []
    for data in fatbins:
        try:
            parsed.append(parse_fatbin(data))
        except FatbinError as e:
            parsed.append(e)
    # -rdc: the device-link image (cubins only) runs, or the units' PTX is linked for the device (the emulator
    # and the CUDA runtime both do), so the units' PTX counts as the linked image's
    unit_ptx = [i for imgs in parsed if isinstance(imgs, list) and _relocatable(imgs) for i in imgs if i.kind == "ptx"]
    for n, images in enumerate(parsed):
        if isinstance(images, FatbinError):
            rows.append(Row(f"fatbin #{n}", "reject", 200, f"malformed fat binary: {images}"))
            continue
        if not _has_kernels(images):
            notes.append(f"fatbin #{n} holds no kernels (nvlink's device-link stub); not checked")
            continue
        listing = ", ".join(f"{i.arch_name} {i.kind} {i.version[0]}.{i.version[1]}"
                            + (f" {i.compression}" if i.compression != "none" else "") for i in images
                            if i.kind in ("ptx", "cubin"))
        if unit_ptx and not _relocatable(images) and not any(i.kind == "ptx" for i in images):
            images = images + unit_ptx
            listing += f" + the PTX of its relocatable units ({len(unit_ptx)})"
        params = _param_bytes(images)
        for cc in ccs:
            device = f"sm_{cc[0]}{cc[1]}"
            what = f"fatbin #{n} [{listing}]"
            try:
                choice = policy.choose_image(images, cc)
            except CudaError as e:
                rows.append(Row(what, "reject", e.code, e.message, device=device))
                continue
            verdict = Verdict(choice.strategy, 0, choice.reason)
            if params:
                name, biggest = max(params.items(), key=lambda kv: kv[1])
                pv = policy.check_kernel_params(biggest)
                if pv.strategy != "native":
                    verdict = verdict.worse(Verdict(pv.strategy, pv.error, f"kernel {name}: {pv.reason}"))
            rows.append(Row(what, verdict.strategy, verdict.error, verdict.reason, device=device))
    return rows, notes


@cache
def _driver_exports() -> dict[str, int]:
    """libcuda's exported functions -> the CUDA version that introduced that variant (adapters/cudadrv)."""
    from gpushim.adapters import DATA_DIR

    base = DATA_DIR.parent / "cudadrv"
    files = sorted(base.glob("*/entry_points.json"), key=lambda f: tuple(int(x) for x in f.parent.name.split(".")))
    if not files:
        return {}
    data = json.loads(files[-1].read_text())
    out: dict[str, int] = {}
    for e in data["entry_points"].values():
        for version, name in e["versions"] + e.get("per_thread", []):
            out[name] = version
    return out


def driver_client_version(scan: ElfScan) -> tuple[int | None, str]:
    """The oldest CUDA a driver-API binary can have been built with: its newest imported entry-point variant."""
    table = _driver_exports()
    known = [(table[n], n) for n, _v in scan.driver_imports if n in table]
    if not known:
        return None, "no known driver API imports"
    version, name = max(known)
    return version, f"its driver API imports ({name} is CUDA {fmt(version)}'s)"


def _driver_rows(scan: ElfScan, stubs: dict[str, set[str]] | None) -> list[Row]:
    """One row per imported driver function: gpushim's libcuda.so.1 implements it, stubs it, or lacks it."""
    table = _driver_exports()
    driver_stubs = (stubs or {}).get("libcuda.so.1", set())
    rows = []
    for name, _v in sorted(scan.driver_imports):
        if name not in table:
            rows.append(Row(name, "reject", 500, "not a function of the CUDA driver gpushim models "
                                                  "(adapters/cudadrv): the program will not load", "libcuda.so.1"))
        elif name in driver_stubs:
            rows.append(Row(name, "reject", 801, f"gpushim does not implement {name} yet (its libcuda.so.1 returns "
                                                  "CUDA_ERROR_NOT_SUPPORTED)", "libcuda.so.1"))
        else:
            rows.append(Row(name, "native", 0, "gpushim's libcuda.so.1", "libcuda.so.1"))
    return rows


def _static_runtimes_verified() -> set[str]:
    """CUDA majors whose static runtime started against gpushim's tables (adapters/cudadrv/export_tables.json)."""
    from gpushim.adapters import DATA_DIR

    data = json.loads((DATA_DIR.parent / "cudadrv" / "export_tables.json").read_text())
    return {v.split(".")[0] for t in data["tables"].values() for v in t["requested_by"]}


def check_binary(path: str, driver: int, devices: list[dict[str, Any]], target_source: str = "",
                 shim: str | None = None) -> CheckReport:
    """Everything compat-check decides about ``path`` for a driver (e.g. 12040) and devices [{name, cc}]."""
    try:
        scan = scan_elf(path, max_cubins=None)
    except FatbinError as e:
        raise click.ClickException(f"{path}: {e}") from None
    except OSError as e:
        raise click.ClickException(f"cannot read {path}: {e.strerror or e}") from None
    runtime, source = client_runtime(scan)
    rep = CheckReport(binary=path, elf_type=scan.elf_type, cudart_soname=scan.cudart_soname, client_runtime=runtime,
                      client_runtime_source=source, static_cudart=scan.static_cudart, driver=driver,
                      devices=devices, target_source=target_source)
    rep.notes += scan.errors
    ccs = sorted({c for d in devices if (c := _cc_of(str(d["cc"])))})
    if not ccs:
        rep.problems.append("the target has no GPU")

    if scan.static_cudart:
        major = runtime // 1000 if runtime else None
        verified = major is not None and str(major) in _static_runtimes_verified()
        rep.notes.append(
            "links the CUDA runtime statically (nvcc's default): its runtime calls reach gpushim through gpushim's "
            "libcuda.so.1 (cuGetProcAddress and the driver's private tables, cuGetExportTable), so they cannot be "
            "listed one by one here (evidence: " + ", ".join(scan.static_cudart_evidence) + ")")
        if runtime and driver // 1000 < runtime // 1000:
            rep.problems.append(
                f"its statically linked CUDA {fmt(runtime)} runtime checks the driver version itself and refuses a "
                f"CUDA {fmt(driver)} driver (cudaErrorInsufficientDriver, 35): gpushim cannot adapt a runtime built "
                f"into the program. Use a server that presents a CUDA {runtime // 1000}.x driver, or rebuild with "
                "`nvcc -cudart shared` so that gpushim's runtime adapts it")
            return rep
        if not verified:
            rep.notes.append(
                "gpushim's private driver tables have been verified with the CUDA "
                + ", ".join(sorted(_static_runtimes_verified())) + " static runtimes only; "
                f"this one (CUDA {fmt(runtime) if runtime else 'unknown'}) may ask for more: gpushim logs each table "
                "and slot it refuses")
    if scan.soname and _SONAME_MAJOR.match(scan.soname):
        rep.problems.append(f"{path} is a CUDA runtime library itself ({scan.soname}); check the application instead")
        return rep
    if scan.dlopens_cuda and not scan.driver_imports:
        rep.notes.append("reaches libcuda.so.1 by dlopen and look-ups by name (as cuda-bindings and CuPy do): "
                         "its driver calls go through cuGetProcAddress, which gpushim's libcuda.so.1 answers for "
                         f"every CUDA {fmt(max(_driver_exports().values(), default=0))} entry point")
    if runtime is None and scan.driver_imports:
        runtime, source = driver_client_version(scan)
        rep.client_runtime, rep.client_runtime_source = runtime, source
    if runtime is None:
        if scan.dlopens_cudart:
            rep.notes.append("loads libcudart with dlopen (as PyTorch's wheels do): its calls cannot be listed "
                             "statically; the runtime it loads decides (check that library)")
        elif not scan.dlopens_cuda:
            rep.problems.append("uses no CUDA runtime (no libcudart linkage, no cuda* imports)")
        return rep

    policy = build_policy(runtime, driver, ccs or [(9, 0)])
    sv = policy.session_verdict()
    rep.session = Row(f"CUDA {fmt(runtime)} application on a CUDA {fmt(driver)} driver", sv.strategy, sv.error,
                      sv.reason)
    rep.adaptations = list(policy.adaptations)
    if not sv.ok:
        return rep

    stubs = shim_stubs(shim)
    rep.apis += _driver_rows(scan, stubs)
    if stubs is None:
        rep.notes.append("libgpushim.so is not built here: whether gpushim implements each call is not checked")
    major_node = {11: "libcudart.so.11.0", 12: "libcudart.so.12", 13: "libcudart.so.13"}.get(runtime // 1000)
    for name, node in sorted(scan.cuda_imports):
        if node and major_node and node != major_node:
            rep.apis.append(Row(name, "reject", 35, f"bound to {node}, but the application's runtime is "
                                                   f"{major_node}: mixed CUDA runtimes", node))
            continue
        v = policy.check_api(name)
        if v.ok and stubs is not None and name in stubs.get(node or major_node or "", set()):
            v = Verdict("reject", 801, f"gpushim does not implement {name} for CUDA {runtime // 1000} yet "
                                       "(the shim returns cudaErrorNotSupported)")
        rep.apis.append(Row(name, v.strategy, v.error, v.reason, node))
    rows, notes = _image_rows(policy, scan.fatbins, ccs)
    rep.fatbins = _listing(scan.fatbins)
    rep.images += rows
    rep.notes += notes
    return rep


# -- output ---------------------------------------------------------------------------------------------------

_STYLE = {"native": "green", "translate": "yellow", "emulate": "yellow", "reject": "bold red"}


def print_report(rep: CheckReport) -> None:
    from rich.console import Console
    from rich.markup import escape as esc
    from rich.table import Table

    con = Console(width=max(120, Console().width), soft_wrap=True, highlight=False)
    rt = f"CUDA {fmt(rep.client_runtime)} (from {rep.client_runtime_source})" if rep.client_runtime else "unknown"
    con.print(f"[bold]{esc(rep.binary)}[/bold]: {rep.elf_type}, needs {esc(rep.cudart_soname or 'no libcudart')}; "
              f"runtime {esc(rt)}")
    devs = ", ".join(f"{d['name']} (cc {d['cc']})" for d in rep.devices) or "no GPU"
    con.print(esc(f"target: CUDA {fmt(rep.driver)} driver, {devs}"
                  + (f" [{rep.target_source}]" if rep.target_source else "")))

    def strat(r: Row) -> str:
        return f"[{_STYLE[r.strategy]}]{r.strategy}[/]" + (f" ({r.error})" if r.error else "")

    if rep.session:
        s = rep.session
        con.print(f"session: {strat(s)}" + (f": {esc(s.reason)}" if s.reason else ""))
    if rep.apis:
        t = Table(title="CUDA runtime calls")
        for col in ("API", "node", "strategy", "reason"):
            t.add_column(col, overflow="fold")
        for r in rep.apis:
            t.add_row(esc(r.what), esc(r.node or ""), strat(r), esc(r.reason))
        con.print(t)
    if rep.images:
        t = Table(title="kernel images", show_lines=True)
        for col in ("fat binary", "device", "strategy", "reason"):
            t.add_column(col, overflow="fold")
        for r in rep.images:
            t.add_row(esc(r.what), esc(r.device or ""), strat(r), esc(r.reason))
        con.print(t)
    for n in rep.notes:
        con.print(esc(f"note: {n}"))
    style = {0: "bold green", 1: "bold yellow", 2: "bold red"}[rep.exit_code]
    con.print(f"verdict: [{style}]{rep.verdict}[/]")
    for line in rep.reasons():
        con.print(esc(f"  - {line}"))


@click.command("compat-check")
@click.argument("binary", type=click.Path(exists=True, dir_okay=False))
@click.option("--server", default=None, help="Ask this running gpushim server for its GPUs and driver.")
@click.option("--gpu", default=None,
              help="GPU model (h100, h200, a100, l4, t4, rtxpro6000) or compute capability (9.0, sm_90).")
@click.option("--driver", default=None, help="Driver's CUDA version, e.g. 12.4 (default 13.0).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def compat_check_command(binary: str, server: str | None, gpu: str | None, driver: str | None, as_json: bool) -> None:
    """Check whether BINARY (an application or shared library) runs through gpushim on a GPU and driver.

    Exit status: 0 runs natively, 1 runs with adaptations, 2 will not run.
    """
    if server and (gpu or driver):
        raise click.UsageError("use either --server or --gpu/--driver")
    if server:
        drv, devices = server_target(server)
        source = f"server {server}"
    else:
        try:
            drv = parse_version(driver or "13.0")
        except ValueError:
            raise click.BadParameter(f"{driver!r} is not a version like 12.4", param_hint="--driver") from None
        devices = [gpu_target(gpu or "h100")]
        source = "" if gpu or driver else "default target; use --gpu/--driver or --server"
    rep = check_binary(binary, drv, devices, source)
    if as_json:
        click.echo(json.dumps(rep.to_json(), indent=2, default=sorted))
    else:
        print_report(rep)
    sys.exit(rep.exit_code)
