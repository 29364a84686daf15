"""Fat binary and device-ELF analysis: finding fatbins in host binaries, decoding their images
(uncompressed, NVIDIA LZ, zstd), kernel parameter layouts from cubins and PTX."""

from .container import FatbinImage, fatbin_size, parse_fatbin
from .cubin import CubinInfo, KernelParams, ParamInfo, cubin_info
from .elf import FoundFatbin, fatbins_in_elf, find_fatbins
from .errors import FatbinError
from .lz import lz_decompress
from .ptx import PtxInfo, ptx_info

__all__ = [
    "CubinInfo",
    "FatbinError",
    "FatbinImage",
    "FoundFatbin",
    "KernelParams",
    "ParamInfo",
    "PtxInfo",
    "cubin_info",
    "fatbin_size",
    "fatbins_in_elf",
    "find_fatbins",
    "lz_decompress",
    "parse_fatbin",
    "ptx_info",
]
