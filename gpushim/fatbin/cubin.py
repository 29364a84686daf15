"""Kernel metadata from a cubin (CUDA device ELF) through pyelftools (CUDA-FACTS §5, re-checked with nvcc 13.0).

``.nv.info.<kernel>`` holds 4-byte records ``u8 format, u8 attribute, u16 value-or-size``.  Format 1 (NVAL)
has no value, 2 (BVAL) and 3 (HVAL) keep their value in the u16 field, and 4 (SVAL) is followed by ``size``
payload bytes.  Attributes used here:

* ``EIATTR_PARAM_CBANK`` 0x0a (SVAL 8): u32 constant-bank symbol, u16 offset of the parameters in bank 0,
  u16 their size;
* ``EIATTR_KPARAM_INFO`` 0x17 (SVAL 12): u32 index, u16 ordinal, u16 offset, u32 packed with
  ``size = packed >> 18`` -- one per parameter, last parameter first;
* ``EIATTR_CBANK_PARAM_SIZE`` 0x19 (HVAL with nvcc 13): total parameter bytes;
* ``EIATTR_CUDA_API_VERSION`` 0x37 (SVAL 4): toolkit that built the cubin, e.g. 130 for 13.0.

The global ``.nv.info`` carries ``EIATTR_REGCOUNT`` 0x2f (u32 symbol index, u32 registers) per function.
``.note.nv.cuinfo`` (owner "NVIDIA Corp", type 1000) holds ``u16 ?, u16 sm arch, u32 CUDA API version``,
and ``.note.nv.tkinfo`` (type 2000) the producing tool and its version strings.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from .elf import PYELF_ERRORS, open_elf
from .errors import FatbinError

EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
EIATTR_PARAM_CBANK = 0x0A
EIATTR_KPARAM_INFO = 0x17
EIATTR_CBANK_PARAM_SIZE = 0x19
EIATTR_REGCOUNT = 0x2F
EIATTR_CUDA_API_VERSION = 0x37

INFO_PREFIX = ".nv.info."
CONST0_PREFIX = ".nv.constant0."


class ParamInfo(NamedTuple):
    ordinal: int
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class KernelParams:
    name: str
    params: list[ParamInfo]  # sorted by ordinal
    param_bytes: int  # EIATTR_CBANK_PARAM_SIZE (0 for a kernel without parameters)
    cbank_offset: int | None = None  # where the parameters start in constant bank 0 (EIATTR_PARAM_CBANK)
    registers: int | None = None  # EIATTR_REGCOUNT


@dataclass(frozen=True, slots=True)
class CubinInfo:
    arch: int
    abi_version: tuple[int, int]  # (1, EI_ABIVERSION): (1, 7) for CUDA 11/12, (1, 8) for 13
    cuda_api_version: int | None  # EIATTR_CUDA_API_VERSION, e.g. 130
    kernels: dict[str, KernelParams] = field(default_factory=dict)
    tool_version: str | None = None  # e.g. "Cuda compilation tools, release 13.0, V13.0.88" (.note.nv.tkinfo)


def iter_nv_info(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """(format, attribute, value-or-payload) records of an ``.nv.info`` section."""
    out: list[tuple[int, int, int | bytes]] = []
    pos = 0
    while pos + 4 <= len(data):
        fmt, attr, val = struct.unpack_from("<BBH", data, pos)
        pos += 4
        if fmt == EIFMT_SVAL:
            if pos + val > len(data):
                raise FatbinError(f".nv.info record 0x{attr:02x} runs past the section end")
            out.append((fmt, attr, data[pos : pos + val]))
            pos += val
        elif fmt in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
            out.append((fmt, attr, val))
        else:
            raise FatbinError(f"unknown .nv.info record format {fmt}")
    return out


def _kernel(name: str, records: list[tuple[int, int, int | bytes]], registers: int | None) -> KernelParams:
    params: list[ParamInfo] = []
    param_bytes = 0
    cbank_offset = None
    for _fmt, attr, val in records:
        if attr == EIATTR_KPARAM_INFO and isinstance(val, bytes) and len(val) >= 12:
            _index, ordinal, offset, packed = struct.unpack_from("<IHHI", val)
            params.append(ParamInfo(ordinal, offset, packed >> 18))
        elif attr == EIATTR_CBANK_PARAM_SIZE:
            param_bytes = val if isinstance(val, int) else int.from_bytes(val[:4], "little")
        elif attr == EIATTR_PARAM_CBANK and isinstance(val, bytes) and len(val) >= 8:
            cbank_offset = struct.unpack_from("<H", val, 4)[0]
    params.sort(key=lambda p: p.ordinal)
    if not param_bytes and params:
        param_bytes = max(p.offset + p.size for p in params)
    return KernelParams(name, params, param_bytes, cbank_offset, registers)


def _note_descs(elf, name: str) -> list[tuple[int, bytes]]:
    sec = elf.get_section_by_name(name)
    if sec is None:
        return []
    data, out, pos = sec.data(), [], 0
    while pos + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
        pos += 12 + ((namesz + 3) & ~3)
        out.append((ntype, data[pos : pos + descsz]))
        pos += (descsz + 3) & ~3
    return out


def cubin_info(cubin: bytes | bytearray | memoryview) -> CubinInfo:
    """Architecture, ABI, toolkit version and per-kernel parameter layouts of a cubin."""
    elf = open_elf(bytes(cubin))
    try:
        return _cubin_info(elf)
    except FatbinError:
        raise
    except PYELF_ERRORS as e:
        raise FatbinError(f"unreadable cubin: {e}") from None


def _cubin_info(elf) -> CubinInfo:
    if elf["e_machine"] not in ("EM_CUDA", 190):
        raise FatbinError(f"not a CUDA cubin (e_machine {elf['e_machine']})")
    abi = elf["e_ident"]["EI_ABIVERSION"]
    flags = elf["e_flags"]
    arch = (flags >> 8) & 0xFF if abi >= 8 else flags & 0xFF
    api_version: int | None = None
    tool_version = None
    for ntype, desc in _note_descs(elf, ".note.nv.cuinfo"):
        if ntype == 1000 and len(desc) >= 8:
            arch = struct.unpack_from("<H", desc, 2)[0] or arch
            api_version = struct.unpack_from("<I", desc, 4)[0] or None
    for ntype, desc in _note_descs(elf, ".note.nv.tkinfo"):
        if ntype == 2000:
            m = re.search(rb"Cuda compilation tools[^\0]*", desc)
            if m:
                tool_version = m.group(0).decode("ascii", "replace")

    names = {s.name for s in elf.iter_sections()}
    registers: dict[str, int] = {}
    symtab = elf.get_section_by_name(".symtab")
    glob = elf.get_section_by_name(".nv.info")
    if glob is not None and symtab is not None:
        for _fmt, attr, val in iter_nv_info(glob.data()):
            if attr == EIATTR_REGCOUNT and isinstance(val, bytes) and len(val) >= 8:
                sym_index, count = struct.unpack_from("<II", val)
                if sym_index < symtab.num_symbols():
                    registers[symtab.get_symbol(sym_index).name] = count

    kernels: dict[str, KernelParams] = {}
    kernel_api: int | None = None
    for sec in elf.iter_sections():
        if not sec.name.startswith(INFO_PREFIX):
            continue
        name = sec.name[len(INFO_PREFIX):]
        records = iter_nv_info(sec.data())
        attrs = {attr for _f, attr, _v in records}
        for _f, attr, val in records:
            if attr == EIATTR_CUDA_API_VERSION and kernel_api is None:
                kernel_api = val if isinstance(val, int) else int.from_bytes(val[:4], "little")
        if CONST0_PREFIX + name in names or attrs & {EIATTR_KPARAM_INFO, EIATTR_CBANK_PARAM_SIZE}:
            kernels[name] = _kernel(name, records, registers.get(name))
    return CubinInfo(arch, (1, abi), kernel_api if kernel_api is not None else api_version, kernels, tool_version)
