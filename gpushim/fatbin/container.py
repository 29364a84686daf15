"""The fat binary container: header, entries, decompression (CUDA-FACTS §4, re-checked against nvcc 13.0).

Layout (all little-endian)::

    fatbin header, 16 bytes:  u32 magic 0xBA55ED50 | u16 version (1) | u16 header_size (16) | u64 payload_size
    entries back to back, each:
      +0  u16 kind (1 PTX, 2 ELF cubin, 8 LTO-IR seen with nvcc 13)   +2 u16 entry-header version (0x0101)
      +4  u32 header_size (64, 80 or 96)     +8  u64 payload_size (stored bytes, a multiple of 8)
      +16 u32 compressed_size (exact size of the compressed stream, 0 when uncompressed)
      +20 u32 offset of the option area inside the header (0 or 64)
      +24 u16 minor   +26 u16 major   +28 u32 arch
      +32 u32 object-name offset   +36 u32 object-name length   +40 u64 flags
      +48 u64 zero    +56 u64 uncompressed_size (0 when uncompressed)
      +64 u32 options offset (72), u32 options length, options bytes (when the header is longer than 64)

Flags: 0x1 64-bit, 0x10 Linux, 0x2000 NVIDIA LZ, 0x8000 zstd, 0x10000 payload is opaque (seen on LTO-IR
entries: "zstd" set but the payload is not a zstd frame), 0x100000 arch-specific target ("sm_90a"),
0x200000 family target ("sm_103f").
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

import zstandard

from .errors import FatbinError
from .lz import lz_decompress

FATBIN_MAGIC = 0xBA55ED50
FATBIN_HEADER = struct.Struct("<IHHQ")
ENTRY_MIN_HEADER = 64
ENTRY_HEADER = struct.Struct("<HHIQIIHHIIIQQQ")  # the fixed 64 bytes

KIND_PTX = 1
KIND_CUBIN = 2
KIND_NAMES = {KIND_PTX: "ptx", KIND_CUBIN: "cubin"}

FLAG_64BIT = 0x1
FLAG_LINUX = 0x10
FLAG_LZ = 0x2000
FLAG_ZSTD = 0x8000
FLAG_OPAQUE = 0x10000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY_SPECIFIC = 0x200000

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: Refuse to decompress an entry that claims more than this (a real cubin is at most some hundreds of MiB).
MAX_UNCOMPRESSED = 1 << 32


@dataclass(frozen=True, slots=True)
class FatbinImage:
    """One entry of a fat binary, with its payload already decompressed."""

    kind: str  # "ptx" | "cubin" | "other"
    arch: int  # e.g. 75
    version: tuple[int, int]  # PTX ISA for ptx, cubin ELF ABI for cubin
    compression: str  # "none" | "lz" | "zstd"
    stored_size: int  # bytes stored in the fatbin (entry payload_size, padded to 8)
    size: int  # uncompressed size
    flags: int
    payload: bytes  # decompressed (opaque entries, flag 0x10000: stored bytes as they are)
    kind_code: int = 0  # the raw kind field
    offset: int = 0  # of the entry header, from the start of the fatbin
    header_size: int = 64
    options: bytes = b""  # option area of long entry headers (LTO-IR: compiler options text)

    @property
    def ptx_text(self) -> str:
        """The PTX source (PTX entries only), trailing NULs removed."""
        if self.kind != "ptx":
            raise FatbinError(f"image is a {self.kind}, not PTX")
        return self.payload.rstrip(b"\0").decode("utf-8", errors="replace")

    @property
    def arch_name(self) -> str:
        """``sm_90a``-style name (``compute_90`` for PTX)."""
        suffix = "a" if self.flags & FLAG_ARCH_SPECIFIC else "f" if self.flags & FLAG_FAMILY_SPECIFIC else ""
        return f"{'compute' if self.kind == 'ptx' else 'sm'}_{self.arch}{suffix}"


def fatbin_size(header: bytes | bytearray | memoryview) -> int:
    """Total size in bytes of the fat binary whose 16-byte header starts ``header``."""
    if len(header) < FATBIN_HEADER.size:
        raise FatbinError(f"fatbin header needs {FATBIN_HEADER.size} bytes, got {len(header)}")
    magic, version, header_size, payload_size = FATBIN_HEADER.unpack_from(header, 0)
    if magic != FATBIN_MAGIC:
        raise FatbinError(f"bad fatbin magic 0x{magic:08x}")
    if version != 1:
        raise FatbinError(f"unsupported fatbin version {version}")
    if header_size < FATBIN_HEADER.size:
        raise FatbinError(f"bad fatbin header size {header_size}")
    return header_size + payload_size


def _zstd_decompress(data: bytes, size: int) -> bytes:
    """Decode one zstd frame, reading in chunks so a lying frame cannot make us allocate more than ``size``."""
    chunks: list[bytes] = []
    got = 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=False) as reader:
            while got <= size:
                chunk = reader.read(min(1 << 20, size + 1 - got))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
    except zstandard.ZstdError as e:
        raise FatbinError(f"corrupt zstd payload: {e}") from None
    if got != size:
        raise FatbinError(f"zstd payload decoded to {'more than ' if got > size else ''}{got} bytes, expected {size}")
    return b"".join(chunks)


def _decode(kind: str, flags: int, stored: bytes, compressed_size: int, size: int) -> tuple[str, bytes]:
    if flags & FLAG_LZ and flags & FLAG_ZSTD:
        raise FatbinError(f"entry flags 0x{flags:x} name two compressions")
    if not flags & (FLAG_LZ | FLAG_ZSTD):
        return "none", stored
    compression = "lz" if flags & FLAG_LZ else "zstd"
    if flags & FLAG_OPAQUE and kind == "other":
        return compression, stored
    if compressed_size == 0 or compressed_size > len(stored):
        raise FatbinError(f"compressed size {compressed_size} outside the {len(stored)} stored bytes")
    if size > MAX_UNCOMPRESSED:
        raise FatbinError(f"uncompressed size {size} is implausible")
    data = stored[:compressed_size]
    if compression == "lz":
        return compression, lz_decompress(data, size)
    if not data.startswith(ZSTD_MAGIC):
        raise FatbinError("zstd flag set but the payload is not a zstd frame")
    return compression, _zstd_decompress(data, size)


def parse_fatbin(data: bytes | bytearray | memoryview, *, decompress: bool = True) -> list[FatbinImage]:
    """All images of the fat binary at the start of ``data`` (bytes after it are ignored).

    With ``decompress=False`` only the entry headers are checked and each ``payload`` holds the stored
    (possibly compressed) bytes: a cheap listing of what a large library carries.
    """
    buf = bytes(data[:FATBIN_HEADER.size])
    total = fatbin_size(buf)
    if total > len(data):
        raise FatbinError(f"fatbin of {total} bytes truncated to {len(data)}")
    buf = bytes(data[:total])
    pos = FATBIN_HEADER.unpack_from(buf, 0)[2]
    images: list[FatbinImage] = []
    while pos < total:
        if pos + ENTRY_MIN_HEADER > total:
            raise FatbinError(f"truncated entry header at offset {pos}")
        (kind_code, _hver, hsize, psize, csize, _optarea, minor, major, arch, _name_off, _name_len,
         flags, _zero, usize) = ENTRY_HEADER.unpack_from(buf, pos)
        if hsize < ENTRY_MIN_HEADER or hsize % 8:
            raise FatbinError(f"bad entry header size {hsize} at offset {pos}")
        start = pos + hsize
        end = start + psize
        if end > total:
            raise FatbinError(f"entry at offset {pos} ({hsize}+{psize} bytes) runs past the fatbin end {total}")
        options = b""
        if hsize > ENTRY_MIN_HEADER + 8:
            ooff, olen = struct.unpack_from("<II", buf, pos + ENTRY_MIN_HEADER)
            if ENTRY_MIN_HEADER <= ooff and ooff + olen <= hsize:
                options = buf[pos + ooff : pos + ooff + olen]
        kind = KIND_NAMES.get(kind_code, "other")
        stored = buf[start:end]
        if decompress:
            compression, payload = _decode(kind, flags, stored, csize, usize)
        else:
            if flags & FLAG_LZ and flags & FLAG_ZSTD:
                raise FatbinError(f"entry flags 0x{flags:x} name two compressions")
            compression = "lz" if flags & FLAG_LZ else "zstd" if flags & FLAG_ZSTD else "none"
            payload = stored
        images.append(FatbinImage(
            kind=kind, arch=arch, version=(major, minor), compression=compression, stored_size=psize,
            size=usize if compression != "none" else psize, flags=flags, payload=payload, kind_code=kind_code,
            offset=pos, header_size=hsize, options=options,
        ))
        pos = end
    return images
