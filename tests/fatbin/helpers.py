"""Small helpers shared by the fatbin tests."""

from __future__ import annotations

from pathlib import Path

from gpushim.fatbin import FatbinImage, fatbins_in_elf, parse_fatbin


def images(path: Path) -> list[list[FatbinImage]]:
    """Images of every fatbin in a binary."""
    return [parse_fatbin(fb) for fb in fatbins_in_elf(path)]


def main_images(path: Path) -> list[FatbinImage]:
    """Images of the registered (last, version-1 wrapper) fatbin, which holds the program's kernels."""
    return images(path)[-1]


def summary(imgs: list[FatbinImage]) -> list[tuple[str, int, str]]:
    return [(i.kind, i.arch, i.compression) for i in imgs]


def lz4_block_compress(data: bytes) -> bytes:
    """A small greedy LZ4-block compressor (tests only) producing NVIDIA-LZ-compatible streams."""
    out = bytearray()
    table: dict[bytes, int] = {}
    n = len(data)
    anchor = i = 0
    while i + 12 <= n:  # LZ4 rule: the last 5 bytes are literals, a match starts at most 12 bytes from the end
        key = data[i : i + 4]
        cand = table.get(key)
        table[key] = i
        if cand is None or i - cand > 0xFFFF:
            i += 1
            continue
        mlen = 4
        while i + mlen < n - 5 and data[cand + mlen] == data[i + mlen]:
            mlen += 1
        _sequence(out, data[anchor:i], i - cand, mlen)
        i += mlen
        anchor = i
    _sequence(out, data[anchor:], None, 0)
    return bytes(out)


def _ext(out: bytearray, v: int) -> None:
    while v >= 255:
        out.append(255)
        v -= 255
    out.append(v)


def _sequence(out: bytearray, literals: bytes, offset: int | None, mlen: int) -> None:
    lit = len(literals)
    ml = mlen - 4 if offset is not None else 0
    out.append((min(lit, 15) << 4) | min(ml, 15))
    if lit >= 15:
        _ext(out, lit - 15)
    out += literals
    if offset is not None:
        out += offset.to_bytes(2, "little")
        if ml >= 15:
            _ext(out, ml - 15)
