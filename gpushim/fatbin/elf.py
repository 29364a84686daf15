"""Finding the fat binaries embedded in a host ELF file (executable, shared library or object).

nvcc puts every fatbin in the section ``.nv_fatbin`` (``__nv_relfatbin`` in ``-rdc`` objects), 8-byte
aligned and back to back, and a 24-byte wrapper per fatbin in ``.nvFatBinSegment``::

    u32 magic 0x466243B1 | u32 version | u64 pointer to the fatbin | u64 filename_or_fatbins

Version 1 is the wrapper handed to ``__cudaRegisterFatBinary``; version 2 holds device-linked code (nvlink's
output; with ``-rdc`` that one is registered).  In position-independent files the pointer may be left 0 and
filled by a relocation, so wrappers are resolved through ``R_X86_64_RELATIVE``/``R_X86_64_64`` relocations too.
A file without section headers is scanned for the fatbin magic at 8-byte-aligned offsets.
"""

from __future__ import annotations

import io
import os
import struct
from dataclasses import dataclass

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

from .container import FATBIN_HEADER, FATBIN_MAGIC, fatbin_size, parse_fatbin
from .errors import FatbinError

WRAPPER_MAGIC = 0x466243B1
WRAPPER = struct.Struct("<IIQQ")
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
ELF_MAGIC = b"\x7fELF"
#: What pyelftools (and construct underneath) raise on malformed files; callers turn these into FatbinError.
PYELF_ERRORS = (ELFError, struct.error, ValueError, OSError, KeyError, IndexError, AttributeError, TypeError,
                OverflowError, AssertionError)


@dataclass(frozen=True, slots=True)
class FoundFatbin:
    """A fatbin located in a host ELF file."""

    file_offset: int
    data: bytes
    section: str | None  # the section holding it, if known
    wrapper_version: int | None  # 1 = registered module, 2 = device-link output; None when no wrapper points at it


def read_binary(path_or_bytes: str | os.PathLike[str] | bytes | bytearray | memoryview) -> bytes:
    if isinstance(path_or_bytes, bytes | bytearray | memoryview):
        return bytes(path_or_bytes)
    with open(path_or_bytes, "rb") as f:
        return f.read()


def open_elf(raw: bytes) -> ELFFile:
    """pyelftools view of ``raw``; :class:`FatbinError` when it is not a readable ELF file."""
    if not raw.startswith(ELF_MAGIC):
        raise FatbinError("not an ELF file")
    try:
        return ELFFile(io.BytesIO(raw))
    except PYELF_ERRORS as e:
        raise FatbinError(f"unreadable ELF file: {e}") from None


def _fatbin_at(raw: bytes, off: int, limit: int | None = None) -> bytes | None:
    end_limit = len(raw) if limit is None else min(limit, len(raw))
    if off < 0 or off + FATBIN_HEADER.size > end_limit:
        return None
    try:
        size = fatbin_size(raw[off : off + FATBIN_HEADER.size])
    except FatbinError:
        return None
    if off + size > end_limit:
        return None
    return raw[off : off + size]


def _walk_section(raw: bytes, start: int, size: int) -> list[tuple[int, bytes]]:
    found = []
    pos, end = start, start + size
    while pos + FATBIN_HEADER.size <= end:
        if struct.unpack_from("<I", raw, pos)[0] == FATBIN_MAGIC:
            blob = _fatbin_at(raw, pos, end)
            if blob is not None:
                found.append((pos, blob))
                pos += (len(blob) + 7) & ~7
                continue
        pos += 8  # padding between fatbins, or garbage: keep looking
    return found


class _AddressMap:
    """Virtual address -> file offset, and pointer-sized reads that honour relocations."""

    def __init__(self, elf: ELFFile, raw: bytes):
        self.raw = raw
        self.elf = elf
        self.ranges: list[tuple[int, int, int]] = []  # (vaddr, size, offset)
        self.is_rel = elf["e_type"] == "ET_REL"
        if not self.is_rel:
            for seg in elf.iter_segments():
                if seg["p_type"] == "PT_LOAD":
                    self.ranges.append((seg["p_vaddr"], seg["p_filesz"], seg["p_offset"]))
        self._relocs: dict[int, int] | None = None

    def offset_of(self, vaddr: int) -> int | None:
        for base, size, off in self.ranges:
            if base <= vaddr < base + size:
                return off + vaddr - base
        return None

    def relocated_value(self, vaddr: int) -> int | None:
        if self._relocs is None:
            self._relocs = {}
            if not self.is_rel:
                for sec in self.elf.iter_sections():
                    if isinstance(sec, RelocationSection) and sec.is_RELA():
                        for rel in sec.iter_relocations():
                            if rel["r_info_sym"] == 0:  # R_X86_64_RELATIVE and friends: value = base + addend
                                self._relocs[rel["r_offset"]] = rel["r_addend"]
        return self._relocs.get(vaddr)


def _wrapper_targets(elf: ELFFile, raw: bytes) -> list[tuple[int, int]]:
    """(wrapper version, file offset of the fatbin) for every wrapper in .nvFatBinSegment."""
    sec = elf.get_section_by_name(".nvFatBinSegment")
    if sec is None or sec["sh_type"] == "SHT_NOBITS":
        return []
    data = sec.data()
    amap = _AddressMap(elf, raw)
    targets = []
    for i in range(0, len(data) - WRAPPER.size + 1, 8):
        magic, version, ptr, _ = WRAPPER.unpack_from(data, i)
        if magic != WRAPPER_MAGIC:
            continue
        if amap.is_rel:
            off = _object_wrapper_target(elf, sec, i + 8)
        else:
            if ptr == 0:
                ptr = amap.relocated_value(sec["sh_addr"] + i + 8) or 0
            off = amap.offset_of(ptr) if ptr else None
        if off is not None:
            targets.append((version, off))
    return targets


def _object_wrapper_target(elf: ELFFile, sec, field_offset: int) -> int | None:
    """In a relocatable object the wrapper's pointer is a relocation against a section symbol."""
    for rsec in elf.iter_sections():
        if not isinstance(rsec, RelocationSection) or not rsec.is_RELA():
            continue
        if elf.get_section(rsec["sh_info"]).name != sec.name:
            continue
        symtab = elf.get_section(rsec["sh_link"])
        for rel in rsec.iter_relocations():
            if rel["r_offset"] != field_offset:
                continue
            sym = symtab.get_symbol(rel["r_info_sym"])
            shndx = sym["st_shndx"]
            if not isinstance(shndx, int):
                return None
            target = elf.get_section(shndx)
            return target["sh_offset"] + sym["st_value"] + rel["r_addend"]
    return None


def find_fatbins(path_or_bytes: str | os.PathLike[str] | bytes | bytearray | memoryview) -> list[FoundFatbin]:
    """Every fatbin in a host ELF file, in file order, with where it was found."""
    raw = read_binary(path_or_bytes)
    elf = open_elf(raw)
    try:
        return _find(elf, raw)
    except FatbinError:
        raise
    except PYELF_ERRORS as e:
        raise FatbinError(f"unreadable ELF file: {e}") from None


def _find(elf: ELFFile, raw: bytes) -> list[FoundFatbin]:
    found: dict[int, FoundFatbin] = {}
    sections = [s for s in elf.iter_sections() if s["sh_type"] != "SHT_NOBITS"]
    for sec in sections:
        if sec.name in FATBIN_SECTIONS:
            for off, blob in _walk_section(raw, sec["sh_offset"], sec["sh_size"]):
                found[off] = FoundFatbin(off, blob, sec.name, None)
    for version, off in _wrapper_targets(elf, raw):
        prev = found.get(off)
        if prev is not None:
            found[off] = FoundFatbin(off, prev.data, prev.section, version)
            continue
        blob = _fatbin_at(raw, off)
        if blob is not None:
            name = next((s.name for s in sections if s["sh_offset"] <= off < s["sh_offset"] + s["sh_size"]), None)
            found[off] = FoundFatbin(off, blob, name, version)
    if not sections:  # section headers stripped: scan the whole file
        for off, blob in _walk_section(raw, 0, len(raw) & ~7):
            try:
                parse_fatbin(blob)
            except FatbinError:
                continue
            found.setdefault(off, FoundFatbin(off, blob, None, None))
    return [found[k] for k in sorted(found)]


def fatbins_in_elf(path_or_bytes: str | os.PathLike[str] | bytes | bytearray | memoryview) -> list[bytes]:
    """The bytes of every fat binary in an executable, shared library or object; [] if there is none."""
    return [f.data for f in find_fatbins(path_or_bytes)]
