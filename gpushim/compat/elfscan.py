"""What a host ELF file tells about its CUDA runtime linkage, without running it.

``scan_elf(path)`` reports the file type, DT_NEEDED and DT_SONAME, the CUDA runtime functions it imports with
the version node each is bound to (``cudaMalloc@libcudart.so.12``, from ``.gnu.version``/``.gnu.version_r``),
driver API imports (``cu*``), the fat binaries it carries and the toolkit that built their cubins.  Verdicts
(is this application supported, by which adapter) belong to the compatibility table, not here.

Static cudart detection (``static_cudart``).  nvcc links ``libcudart_static.a`` by default; such binaries
import no ``cuda*``/``__cuda*`` symbols at all and call ``libcuda.so.1`` directly, so a libcudart shim never
sees them (CUDA-FACTS §1).  A binary is flagged when it imports no ``cuda*``/``__cuda*`` function and does not
export any either (it is not itself a libcudart), and at least one of these is found:

* it carries CUDA fat binaries (``.nv_fatbin``/``.nvFatBinSegment``): nvcc-generated host code registers
  them through ``__cudaRegisterFatBinary``, which must then be defined inside the binary;
* ``.symtab`` (unstripped files) defines ``__cudaRegisterFatBinary`` or another cudart entry point, or has
  the ``libcudart_static_<hash>`` symbols of the static library's objects;
* strings only the runtime itself contains: ``cudaErrorCudartUnloading`` (its error-name table) and
  ``/cudart.shm.`` (its IPC shared-memory name), which survive ``strip``.

The evidence found is listed in ``static_cudart_evidence``.  Relocatable objects (``.o``) are never flagged:
their linkage is decided when they are linked.  A binary that names ``libcudart.so`` in its strings without a
DT_NEEDED entry probably loads the runtime with ``dlopen`` (``dlopens_cudart``), as PyTorch's wheels do.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from elftools.elf.dynamic import DynamicSection
from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection
from elftools.elf.sections import SymbolTableSection

from gpushim.fatbin import FatbinError, cubin_info, find_fatbins, parse_fatbin
from gpushim.fatbin.elf import PYELF_ERRORS, open_elf, read_binary

CUDART_SYMBOL = re.compile(r"^(?:cuda[A-Z]|__cuda[A-Z])")
DRIVER_SYMBOL = re.compile(r"^cu[A-Z]")
CUDART_SONAME = re.compile(r"^libcudart\.so(?:\.\d+)*$")
STATIC_STRINGS = (b"cudaErrorCudartUnloading", b"/cudart.shm.")
STATIC_SYMTAB = ("__cudaRegisterFatBinary", "cudaMalloc", "cudaLaunchKernel", "cudaGetErrorString")
DF_1_PIE = 0x08000000


@dataclass
class ElfScan:
    path: str
    elf_type: str  # "executable" | "pie" | "shared_library" | "object"
    is_shared_library: bool
    soname: str | None
    needed: list[str]
    cudart_soname: str | None  # "libcudart.so.12", from DT_NEEDED or the version needs
    cuda_imports: list[tuple[str, str | None]]  # (symbol, version node) of imported cuda*/__cuda* functions
    driver_imports: list[tuple[str, str | None]]  # imported cu* driver API functions
    cuda_exports: list[str]  # cuda*/__cuda* functions this file defines dynamically (a libcudart or a shim)
    static_cudart: bool
    static_cudart_evidence: list[str]
    dlopens_cudart: bool
    dlopens_cuda: bool  # reaches libcuda without needing it: dlopen and look-ups by name (cuda-bindings, CuPy)
    fatbins: list[bytes]
    images: list[tuple[str, str, tuple[int, int]]]  # (kind, arch name, version) of every image
    cuda_api_version: int | None  # newest EIATTR_CUDA_API_VERSION among the cubins (e.g. 130)
    cuda_api_versions: set[int] = field(default_factory=set)
    ptx_versions: set[tuple[int, int]] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)  # malformed fatbins or cubins met on the way

    @property
    def cuda_symbol_versions(self) -> set[str]:
        """Version nodes the cuda imports are bound to, e.g. {"libcudart.so.12"}."""
        return {v for _n, v in self.cuda_imports if v}


def _elf_type(elf) -> tuple[str, bool]:
    etype = elf["e_type"]
    if etype == "ET_REL":
        return "object", False
    if etype == "ET_EXEC":
        return "executable", False
    flags_1 = 0
    dyn = elf.get_section_by_name(".dynamic")
    if isinstance(dyn, DynamicSection):
        for tag in dyn.iter_tags():
            if tag.entry.d_tag == "DT_FLAGS_1":
                flags_1 = tag.entry.d_val
    if flags_1 & DF_1_PIE:
        return "pie", False
    has_interp = any(seg["p_type"] == "PT_INTERP" for seg in elf.iter_segments())
    has_soname = isinstance(dyn, DynamicSection) and any(t.entry.d_tag == "DT_SONAME" for t in dyn.iter_tags())
    if has_interp and not has_soname:
        return "pie", False
    return "shared_library", True


def _dynamic(elf) -> tuple[list[str], str | None]:
    needed: list[str] = []
    soname = None
    for sec in elf.iter_sections():
        if isinstance(sec, DynamicSection):
            for tag in sec.iter_tags():
                if tag.entry.d_tag == "DT_NEEDED":
                    needed.append(tag.needed)
                elif tag.entry.d_tag == "DT_SONAME":
                    soname = tag.soname
    return needed, soname


def _version_nodes(elf) -> tuple[dict[int, tuple[str, str]], GNUVerSymSection | None]:
    """version index -> (file, version node name) from .gnu.version_r, and the .gnu.version section."""
    nodes: dict[int, tuple[str, str]] = {}
    versym = None
    for sec in elf.iter_sections():
        if isinstance(sec, GNUVerNeedSection):
            for verneed, auxiliaries in sec.iter_versions():
                for aux in auxiliaries:
                    nodes[aux["vna_other"]] = (verneed.name, aux.name)
        elif isinstance(sec, GNUVerSymSection):
            versym = sec
    return nodes, versym


def _dynamic_symbols(elf):
    """(name, defined, version node name or None) of every dynamic function symbol."""
    nodes, versym = _version_nodes(elf)
    dynsym = next((s for s in elf.iter_sections() if s["sh_type"] == "SHT_DYNSYM"), None)
    if not isinstance(dynsym, SymbolTableSection):
        return []
    out = []
    for i, sym in enumerate(dynsym.iter_symbols()):
        if not sym.name or sym["st_info"]["type"] not in ("STT_FUNC", "STT_NOTYPE", "STT_GNU_IFUNC"):
            continue
        version = None
        if versym is not None and i < versym.num_symbols():
            ndx = versym.get_symbol(i)["ndx"]
            if isinstance(ndx, int) and (ndx & 0x7FFF) in nodes:
                version = nodes[ndx & 0x7FFF][1]
        out.append((sym.name, sym["st_shndx"] != "SHN_UNDEF", version))
    return out


def _symtab_evidence(elf) -> list[str]:
    symtab = elf.get_section_by_name(".symtab")
    if not isinstance(symtab, SymbolTableSection):
        return []
    found: list[str] = []
    static_objects = False
    for sym in symtab.iter_symbols():
        if sym.name.startswith("libcudart_static_"):
            static_objects = True
        elif sym.name in STATIC_SYMTAB and sym["st_shndx"] != "SHN_UNDEF" and f"symtab:{sym.name}" not in found:
            found.append(f"symtab:{sym.name}")
    if static_objects:
        found.append("symtab:libcudart_static_*")
    return found


def scan_elf(path: str | os.PathLike[str], *, max_cubins: int | None = 64) -> ElfScan:
    """Scan one host ELF file.  ``FileNotFoundError``/``OSError`` if unreadable, FatbinError if not ELF.

    Images are listed from their headers; only the first cubin of each fatbin is decompressed (for its
    ``EIATTR_CUDA_API_VERSION``), at most ``max_cubins`` of them (None: no limit).
    """
    raw = read_binary(path)
    elf = open_elf(raw)
    try:
        return _scan(os.fspath(path), raw, elf, max_cubins)
    except FatbinError:
        raise
    except PYELF_ERRORS as e:
        raise FatbinError(f"malformed ELF file: {e}") from None


def _scan(path: str, raw: bytes, elf, max_cubins: int | None) -> ElfScan:
    elf_type, is_lib = _elf_type(elf)
    needed, soname = _dynamic(elf)
    nodes, _ = _version_nodes(elf)
    symbols = _dynamic_symbols(elf)
    cuda_imports = [(n, v) for n, d, v in symbols if not d and CUDART_SYMBOL.match(n)]
    driver_imports = [(n, v) for n, d, v in symbols if not d and DRIVER_SYMBOL.match(n) and not n.startswith("cuda")]
    cuda_exports = [n for n, d, _v in symbols if d and CUDART_SYMBOL.match(n)]

    cudart_soname = next((n for n in needed if CUDART_SONAME.match(n)), None)
    if cudart_soname is None:
        cudart_soname = next((f for f, _v in nodes.values() if CUDART_SONAME.match(f)), None)

    errors: list[str] = []
    try:
        found = find_fatbins(raw)
    except FatbinError as e:
        errors.append(f"fatbin search: {e}")
        found = []
    images: list[tuple[str, str, tuple[int, int]]] = []
    api_versions: set[int] = set()
    ptx_versions: set[tuple[int, int]] = set()
    decoded = 0
    for fb in found:
        try:
            parsed = parse_fatbin(fb.data, decompress=False)
        except FatbinError as e:
            errors.append(f"fatbin at 0x{fb.file_offset:x}: {e}")
            continue
        for img in parsed:
            images.append((img.kind, img.arch_name, img.version))
            if img.kind == "ptx":
                ptx_versions.add(img.version)
        # the toolkit version: decode the first cubin of each fatbin, up to max_cubins in all (big libraries
        # carry thousands of cubins, all built by the same toolkit)
        first = next((i for i in parsed if i.kind == "cubin"), None)
        if first is None or (max_cubins is not None and decoded >= max_cubins):
            continue
        decoded += 1
        try:
            (img,) = [i for i in parse_fatbin(fb.data) if i.offset == first.offset]
            info = cubin_info(img.payload)
        except FatbinError as e:
            errors.append(f"cubin {first.arch_name} in fatbin at 0x{fb.file_offset:x}: {e}")
            continue
        if info.cuda_api_version is not None:
            api_versions.add(info.cuda_api_version)

    evidence: list[str] = []
    if found:
        evidence.append(f"fatbins:{len(found)}")
    evidence += _symtab_evidence(elf)
    evidence += [f"string:{s.decode()}" for s in STATIC_STRINGS if s in raw]
    static = elf_type != "object" and not cuda_imports and not cuda_exports and bool(evidence)
    is_cudart = bool(soname and CUDART_SONAME.match(soname))
    dlopens = (cudart_soname is None and not static and not is_cudart and not cuda_exports
               and re.search(rb"libcudart\.so", raw) is not None)

    # names libcuda, or looks driver functions up by name (cuda-bindings' cydriver: its loader is Python)
    dlopens_cuda = "libcuda.so.1" not in needed and not (soname or "").startswith("libcuda.so") \
        and (re.search(rb"libcuda\.so", raw) is not None or b"cuGetProcAddress" in raw)

    return ElfScan(
        path=path, elf_type=elf_type, is_shared_library=is_lib, soname=soname, needed=needed,
        cudart_soname=cudart_soname, cuda_imports=cuda_imports, driver_imports=driver_imports,
        cuda_exports=cuda_exports, static_cudart=static, static_cudart_evidence=evidence if static else [],
        dlopens_cudart=dlopens, dlopens_cuda=dlopens_cuda, fatbins=[f.data for f in found], images=images,
        cuda_api_version=max(api_versions) if api_versions else None, cuda_api_versions=api_versions,
        ptx_versions=ptx_versions, errors=errors,
    )
