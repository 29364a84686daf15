"""Decoder for NVIDIA's LZ compression of fatbin entries (entry flag 0x2000).

The format is the LZ4 *block* format (CUDA-FACTS §4): a sequence is a token byte whose high nibble is the
literal count and low nibble the match length minus 4 (15 = extended by following bytes, 255 = continue),
the literals, then a 2-byte little-endian match offset and the match-length extension bytes.  The last
sequence carries literals only.  fatbinary emits at most ``uncompressed_size`` bytes; the stored payload is
padded to 8 bytes, so callers pass the exact compressed size from the entry header (trailing NUL padding is
tolerated anyway: decoding stops once the output is complete).
"""

from __future__ import annotations

from .errors import FatbinError

#: An LZ4 sequence of n input bytes produces at most about 255*n output bytes; anything claiming more is corrupt.
MAX_RATIO = 256


def lz_decompress(data: bytes | bytearray | memoryview, uncompressed_size: int) -> bytes:
    """Decompress ``data`` to exactly ``uncompressed_size`` bytes or raise :class:`FatbinError`."""
    src = bytes(data)
    n = len(src)
    if uncompressed_size < 0:
        raise FatbinError(f"LZ: negative uncompressed size {uncompressed_size}")
    if uncompressed_size > MAX_RATIO * n + 16:
        raise FatbinError(f"LZ: uncompressed size {uncompressed_size} impossible for {n} compressed bytes")
    out = bytearray()
    want = uncompressed_size
    ip = 0
    while ip < n:
        token = src[ip]
        ip += 1
        lit = token >> 4
        if lit == 15:
            while True:
                if ip >= n:
                    raise FatbinError("LZ: truncated literal length")
                b = src[ip]
                ip += 1
                lit += b
                if b != 255:
                    break
        if lit:
            end = ip + lit
            if end > n:
                raise FatbinError("LZ: literals run past the end of the input")
            out += src[ip:end]
            ip = end
        olen = len(out)
        if olen >= want:
            break  # complete; anything left is padding
        if ip >= n:
            break  # final literal-only sequence
        if ip + 2 > n:
            raise FatbinError("LZ: truncated match offset")
        off = src[ip] | (src[ip + 1] << 8)
        ip += 2
        mlen = (token & 15) + 4
        if mlen == 19:
            while True:
                if ip >= n:
                    raise FatbinError("LZ: truncated match length")
                b = src[ip]
                ip += 1
                mlen += b
                if b != 255:
                    break
        if off == 0 or off > olen:
            raise FatbinError(f"LZ: match offset {off} outside the {olen} bytes decoded so far")
        if olen + mlen > want:
            raise FatbinError("LZ: output exceeds the uncompressed size")
        start = olen - off
        if mlen <= off:
            out += out[start : start + mlen]
        else:  # overlapping copy repeats the last `off` bytes
            pattern = bytes(out[start:])
            reps, rest = divmod(mlen, off)
            out += pattern * reps + pattern[:rest]
    if len(out) != want:
        raise FatbinError(f"LZ: decoded {len(out)} bytes, expected {want}")
    return bytes(out)
