"""Malformed fat binaries raise FatbinError, quickly, and nothing else."""

from __future__ import annotations

import random
import struct
import time

import pytest

from gpushim.fatbin import FatbinError, fatbin_size, fatbins_in_elf, parse_fatbin

MAGIC = struct.pack("<I", 0xBA55ED50)


@pytest.fixture(scope="module")
def fatbin(built) -> bytes:
    """A fatbin with LZ cubins and PTX for two architectures."""
    return fatbins_in_elf(built["multi_lz"])[-1]


@pytest.fixture(scope="module")
def zstd_fatbin(built) -> bytes:
    return fatbins_in_elf(built["zstd_all"])[-1]


def _entry_bounds(fb: bytes) -> list[tuple[int, int, int]]:
    """(entry start, payload start, entry end) of every entry."""
    out, pos = [], 16
    while pos < len(fb):
        hsize, psize = struct.unpack_from("<IQ", fb, pos + 4)
        out.append((pos, pos + hsize, pos + hsize + psize))
        pos += hsize + psize
    return out


def _with_payload_size(fb: bytes, cut: int) -> bytes:
    """The first ``cut`` bytes of ``fb`` with the header claiming exactly that length."""
    return fb[:8] + struct.pack("<Q", cut - 16) + fb[16:cut]


@pytest.mark.parametrize("which", ["fatbin", "zstd_fatbin"])
def test_truncations(request, which):
    fb: bytes = request.getfixturevalue(which)
    bounds = _entry_bounds(fb)
    assert len(bounds) >= 2
    full = parse_fatbin(fb)
    cuts = {0, 1, 8, 15, 16, 17}
    for start, pstart, end in bounds:
        cuts |= {start - 1, start, start + 1, start + 32, pstart - 1, pstart, pstart + 1, end - 1, end, end + 1}
    cuts = {c for c in cuts if 0 <= c < len(fb)}
    t0 = time.process_time()
    for cut in sorted(cuts):
        with pytest.raises(FatbinError):  # header still announces the full size
            parse_fatbin(fb[:cut])
        if cut < 16:
            continue
        patched = _with_payload_size(fb, cut)
        ends = [e for _s, _p, e in bounds]
        if cut == 16 or cut in ends:  # a shorter but well-formed fatbin
            kept = parse_fatbin(patched)
            assert [i.payload for i in kept] == [i.payload for i in full[: len(kept)]]
        else:
            with pytest.raises(FatbinError):
                parse_fatbin(patched)
    assert time.process_time() - t0 < 5


def test_bad_magic_and_short_headers(fatbin):
    for bad in (b"", b"\x50", MAGIC, b"\0" * 16, b"\x7fELF" + fatbin[4:], fatbin[:15]):
        with pytest.raises(FatbinError):
            parse_fatbin(bad)
        with pytest.raises(FatbinError):
            fatbin_size(bad[:16])
    with pytest.raises(FatbinError):  # version 2
        parse_fatbin(fatbin[:4] + b"\x02\x00" + fatbin[6:])
    with pytest.raises(FatbinError):  # header size below 16
        parse_fatbin(fatbin[:6] + b"\x08\x00" + fatbin[8:])


def _patch_entry(fb: bytes, index: int, offset: int, fmt: str, value: int) -> bytes:
    start = _entry_bounds(fb)[index][0]
    buf = bytearray(fb)
    struct.pack_into(fmt, buf, start + offset, value)
    return bytes(buf)


@pytest.mark.parametrize(("offset", "fmt", "value"), [
    (4, "<I", 0xFFFFFFF8),  # entry header size
    (4, "<I", 8),  # entry header size below 64
    (4, "<I", 68),  # not a multiple of 8
    (8, "<Q", 2**63),  # payload size
    (8, "<Q", 2**64 - 1),
    (16, "<I", 0xFFFFFFFF),  # compressed size beyond the stored bytes
    (16, "<I", 0),  # compressed entry without a compressed size
    (56, "<Q", 2**60),  # uncompressed size
    (56, "<Q", 2**32 + 5),
    (56, "<Q", 1),  # smaller than the real output
    (40, "<Q", 0x11 | 0x2000 | 0x8000),  # two compressions
])
@pytest.mark.parametrize("which", ["fatbin", "zstd_fatbin"])
def test_huge_and_inconsistent_sizes(request, which, offset, fmt, value):
    fb = request.getfixturevalue(which)
    t0 = time.process_time()
    with pytest.raises(FatbinError):
        parse_fatbin(_patch_entry(fb, 0, offset, fmt, value))
    with pytest.raises(FatbinError):
        parse_fatbin(fb[:8] + struct.pack("<Q", 2**63) + fb[16:])
    assert time.process_time() - t0 < 1


def test_flipped_compression_flag(zstd_fatbin, fatbin):
    # zstd data announced as LZ, LZ data announced as zstd
    with pytest.raises(FatbinError):
        parse_fatbin(_patch_entry(zstd_fatbin, 0, 40, "<Q", 0x2011))
    with pytest.raises(FatbinError):
        parse_fatbin(_patch_entry(fatbin, 0, 40, "<Q", 0x8011))


def test_corrupted_compressed_payloads(fatbin, zstd_fatbin):
    rng = random.Random(11)
    t0 = time.process_time()
    for fb in (fatbin, zstd_fatbin):
        bounds = _entry_bounds(fb)
        for _ in range(150):
            _s, pstart, end = rng.choice(bounds)
            buf = bytearray(fb)
            for _ in range(rng.randrange(1, 4)):
                buf[rng.randrange(pstart, end)] = rng.randrange(256)
            try:
                parse_fatbin(bytes(buf))  # a corrupted literal may still decode; nothing else may escape
            except FatbinError:
                pass
    assert time.process_time() - t0 < 10


def test_random_bytes(fatbin):
    rng = random.Random(3)
    t0 = time.process_time()
    for i in range(400):
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
        if i % 2:  # a valid header in front of garbage
            data = MAGIC + b"\x01\x00\x10\x00" + struct.pack("<Q", len(body)) + body
        else:  # garbage entries after the real first entry header
            data = fatbin[:80] + body
        try:
            parse_fatbin(data)
        except FatbinError:
            pass
    assert time.process_time() - t0 < 5


def test_random_entry_headers(fatbin):
    """Valid container framing, random entry header fields."""
    rng = random.Random(5)
    start, pstart, end = _entry_bounds(fatbin)[0]
    t0 = time.process_time()
    for _ in range(300):
        buf = bytearray(fatbin)
        for off in rng.sample(range(0, 64, 4), 3):
            struct.pack_into("<I", buf, start + off, rng.choice([0, 1, 7, 64, 2**31, 2**32 - 1, rng.randrange(2**32)]))
        try:
            parse_fatbin(bytes(buf))
        except FatbinError:
            pass
    assert time.process_time() - t0 < 5
