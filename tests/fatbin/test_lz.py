"""The NVIDIA LZ decoder: round trips through an LZ4-block encoder, speed, and corrupt input."""

from __future__ import annotations

import random
import time

import pytest

from gpushim.fatbin import FatbinError, lz_decompress

from .helpers import lz4_block_compress


def _samples() -> list[bytes]:
    rng = random.Random(4)
    ptxish = "".join(f"add.s32 %r{i % 97}, %r{i % 13}, {i};\nld.param.u64 %rd{i % 7}, [p_{i % 5}];\n"
                     for i in range(400)).encode()
    return [
        b"",
        b"a",
        b"abcdefghijklmnopqrstuvwxyz0123456789",
        b"\0" * 5000,  # long overlapping matches
        b"ab" * 3000,  # offset-2 overlap
        bytes(rng.randrange(256) for _ in range(3000)),  # incompressible: long literal runs
        ptxish,
        ptxish + bytes(rng.randrange(4) for _ in range(2000)) + ptxish,
    ]


@pytest.mark.parametrize("data", _samples(), ids=lambda d: f"{len(d)}B")
def test_round_trip(data):
    packed = lz4_block_compress(data)
    assert lz_decompress(packed, len(data)) == data
    # fatbinary pads the stored payload with NULs to 8 bytes; padding after a complete output is ignored
    assert lz_decompress(packed + b"\0" * 7, len(data)) == data


def test_reasonably_fast():
    data = b"".join(f"mad.lo.s32 %r{i % 251}, %r{i % 17}, %r{i % 19}, {i * 7};\n".encode() for i in range(60000))
    packed = lz4_block_compress(data)
    t0 = time.process_time()  # this process's CPU time: other work on a loaded host does not count
    assert lz_decompress(packed, len(data)) == data
    elapsed = time.process_time() - t0
    assert elapsed < 2.0, f"{len(data) / 1e6:.1f} MB took {elapsed:.2f} s"


@pytest.mark.parametrize(("data", "size"), [
    (b"\x1f" + b"a", 100),  # literal count 1, then a match with its offset missing
    (b"\x10a\x00\x00", 10),  # match offset 0
    (b"\x10a\x05\x00", 10),  # offset before the start of the output
    (b"\xf0", 300),  # extended literal count with no extension byte
    (b"\xf0\xff", 300),  # ... continuing past the end
    (b"\x50abc", 5),  # literals run past the input
    (b"\x1fa\x01\x00", 100),  # extended match length missing
    (b"\x30abc", 4),  # output shorter than announced
    (b"\x50abcde", 3),  # output longer than announced
    (b"\x1fa\x01\x00\xff\xff\x10", 50),  # match longer than the output
    (b"\x10a", 10**9),  # impossible expansion ratio
    (b"\x10a", -1),
])
def test_corrupt_input_raises(data, size):
    with pytest.raises(FatbinError):
        lz_decompress(data, size)


def test_random_garbage_never_escapes():
    rng = random.Random(7)
    t0 = time.process_time()
    for _ in range(2000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        try:
            lz_decompress(data, rng.randrange(0, 2000))
        except FatbinError:
            pass
    assert time.process_time() - t0 < 5
