"""Relocatable device code (nvcc -rdc=true, or -dc + -dlink): the PTX of every translation unit, linked.

The device-link stub registers the linked image (cubins only) together with each translation unit's own fat
binary, which carries that unit's PTX (shim/api_launch.c uploads them as one module: the linked image followed
by the units' fat binaries). The emulator runs PTX, so it links the units' PTX the way cuLink links PTX inputs
(gpushim.server.ops_driver.link_ptx): `.extern` functions and variables resolve to another unit's definitions.
Names with internal linkage (a unit's string constants `$str`, `static` functions and variables) may repeat
across units; they are renamed per unit first so that each unit keeps its own.
"""

from __future__ import annotations

import re
from dataclasses import replace

from gpushim.fatbin import FatbinError, FatbinImage, parse_fatbin
from gpushim.fatbin.container import FATBIN_HEADER, fatbin_size

# module-scope declarations with internal linkage (no .visible/.extern/.weak/.common); nvcc writes them at
# the start of a line
_INTERNAL_VAR = re.compile(r"^\.(?:global|const|shared)\b[^;=]*?([A-Za-z_$][\w$]*)\s*(?:\[[^\]]*\])*\s*[;=]", re.M)
_INTERNAL_FUNC = re.compile(r"^\.func\s*(?:\([^)]*\))?\s*([A-Za-z_$][\w$]*)", re.M)
DEVRT_MARK = b"__cuda_syscall_cnpv2"  # what only libcudadevrt's device code calls
_NAME = r"(?<![\w$.%%])%s(?![\w$])"


def split_fatbins(data: bytes) -> list[bytes]:
    """The fat binaries laid back to back in `data` (one for an ordinary module)."""
    parts = []
    pos = 0
    while pos + FATBIN_HEADER.size <= len(data):
        try:
            n = fatbin_size(data[pos : pos + FATBIN_HEADER.size])
        except FatbinError:
            break
        if n <= FATBIN_HEADER.size or pos + n > len(data):
            break
        parts.append(data[pos : pos + n])
        pos += n
    return parts or [data]


def is_rdc(parts: list[bytes]) -> bool:
    """Whether fat binaries back to back are a relocatable-device-code module: a device-link image (nvlink's
    output: cubins only) followed by the units' fat binaries. Anything else is read as its first fat binary,
    as before."""
    if len(parts) < 2:
        return False
    try:
        return not any(i.kind == "ptx" for i in parse_fatbin(parts[0], decompress=False))
    except FatbinError:
        return False


def pick_ptx(images: list[FatbinImage], device_arch: int) -> FatbinImage | None:
    """The oldest PTX the device could JIT: newer-arch PTX uses instructions the engine may not run."""
    ptx = [i for i in images if i.kind == "ptx"]
    fitting = [i for i in ptx if i.arch <= device_arch] or ptx
    return min(fitting, key=lambda i: i.arch) if fitting else None


def _internal_names(text: str) -> set[str]:
    return {m.group(1) for m in _INTERNAL_VAR.finditer(text)} | {m.group(1) for m in _INTERNAL_FUNC.finditer(text)}


def _rename(text: str, names: set[str], suffix: str) -> str:
    """Every whole-identifier use of names gets the suffix (one pass; longest names first in the pattern)."""
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.sub(_NAME % f"(?:{alt})", lambda m: m.group(0) + suffix, text)


def link_units(texts: list[str]) -> str:
    """One PTX module from the units' PTX: internal names that repeat across units renamed per unit, then
    linked like cuLink's PTX inputs."""
    from gpushim.server.ops_driver import link_ptx

    internal = [_internal_names(t) for t in texts]
    out = []
    for i, t in enumerate(texts):
        others: set[str] = set()
        for j, names in enumerate(internal):
            if j != i:
                others |= names
        clash = internal[i] & others
        out.append(_rename(t, clash, f"$rdc{i}") if clash and i else t)
    return link_ptx(out)


def load_units(parts: list[bytes], device_arch: int) -> tuple[list[FatbinImage], FatbinImage | None, str]:
    """The images of a relocatable-device-code module (the linked image, then one fat binary per unit): every
    image (for the adaptation policy and register counts), the PTX to run (the units' PTX linked; None when a
    unit carries none) and, then, why."""
    images = parse_fatbin(parts[0])
    chosen = []
    missing = []
    for k, part in enumerate(parts[1:], 1):
        unit = parse_fatbin(part)
        if any(DEVRT_MARK in i.payload for i in unit):
            continue  # libcudadevrt (-lcudadevrt): the engine provides its functions itself (gpushim/ptx/devrt.py)
        images.extend(i for i in unit if i.kind != "cubin")  # the units' cubins are relocatable objects
        best = pick_ptx(unit, device_arch)
        if best is None:
            missing.append(k)
        else:
            chosen.append(best)
    n = len(parts) - 1
    if missing or not chosen:
        which = ", ".join(str(k) for k in missing)
        return images, None, (f"relocatable device code: translation unit(s) {which} of {n} carry no PTX, "
                              "and the emulator links and runs PTX. Rebuild with PTX included, e.g. "
                              "-gencode arch=compute_75,code=compute_75.")
    linked = link_units([i.ptx_text for i in chosen])
    base = max(chosen, key=lambda i: i.arch)
    data = linked.encode()
    return images, replace(base, payload=data, size=len(data), stored_size=len(data), compression="none"), ""
