"""C printf formatting of a device printf call (format string + nvcc's packed argument buffer).

nvcc packs the arguments in order, each aligned to its size: 4 bytes for int-sized conversions (char and short
are promoted to int), 8 bytes for long, long long, double (float is promoted), pointers and %s.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable

_SPEC = re.compile(rb"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d*))?(hh|h|ll|l|L|z|j|t|q)?([diouxXeEfFgGaAcspn%])")


def _hexfloat(v: float, upper: bool, prec: int | None) -> str:
    if v != v or v in (float("inf"), float("-inf")):
        s = str(v).replace("inf", "inf").replace("nan", "nan")
        return s.upper() if upper else s
    h = v.hex()  # 0x1.8000000000000p+1
    sign = "-" if h.startswith("-") else ""
    h = h.lstrip("-")
    mant, _, exp = h[2:].partition("p")
    ip, _, frac = mant.partition(".")
    frac = frac.rstrip("0") if prec is None else frac[:prec].ljust(prec, "0")
    e = int(exp)
    s = f"{sign}0x{ip}{'.' + frac if frac else ''}p{'+' if e >= 0 else '-'}{abs(e)}"
    return s.upper().replace("0X", "0X") if upper else s


def format_printf(fmt: bytes, read: Callable[[int, int], bytes], read_str: Callable[[int], bytes]) -> tuple[bytes, int]:
    out: list[bytes] = []
    pos = 0
    off = 0
    nargs = 0

    def take(size: int) -> bytes:
        nonlocal off, nargs
        off = -(-off // size) * size
        b = read(off, size)
        off += size
        nargs += 1
        return b

    for m in _SPEC.finditer(fmt):
        out.append(fmt[pos : m.start()])
        pos = m.end()
        flags, width, prec, length, conv = (g.decode() if g is not None else None for g in m.groups())
        if conv == "%":
            out.append(b"%")
            continue
        if width == "*":
            width = str(struct.unpack("<i", take(4))[0])
        if prec == "*":
            prec = str(struct.unpack("<i", take(4))[0])
        flags = flags or ""
        if width and width.startswith("-"):
            flags += "-"
            width = width[1:]
        spec = "%" + flags + (width or "") + (("." + prec) if prec is not None else "")
        wide = length in ("l", "ll", "z", "j", "t", "q")
        if conv in "di":
            v = struct.unpack("<q", take(8))[0] if wide else struct.unpack("<i", take(4))[0]
            if length == "h":
                v = ((v & 0xFFFF) ^ 0x8000) - 0x8000
            elif length == "hh":
                v = ((v & 0xFF) ^ 0x80) - 0x80
            s = (spec + "d") % v
        elif conv in "ouxX":
            v = struct.unpack("<Q", take(8))[0] if wide else struct.unpack("<I", take(4))[0]
            if length == "h":
                v &= 0xFFFF
            elif length == "hh":
                v &= 0xFF
            s = (spec + ("d" if conv == "u" else conv)) % v
        elif conv in "eEfFgG":
            v = struct.unpack("<d", take(8))[0]
            s = (spec + conv) % v
            if v != v:
                s = s.replace("nan", "-nan" if str(v).startswith("-") else "nan")
        elif conv in "aA":
            v = struct.unpack("<d", take(8))[0]
            body = _hexfloat(v, conv == "A", int(prec) if prec not in (None, "") else None)
            s = ("%" + flags.replace("#", "").replace("0", "") + (width or "") + "s") % body
        elif conv == "c":
            v = struct.unpack("<i", take(4))[0]
            s = ("%" + flags + (width or "") + "s") % chr(v & 0xFF)
        elif conv == "s":
            p = struct.unpack("<Q", take(8))[0]
            text = read_str(p).decode("latin-1")
            if prec not in (None, ""):
                text = text[: int(prec)]
            s = ("%" + flags + (width or "") + "s") % text
        elif conv == "p":
            p = struct.unpack("<Q", take(8))[0]
            s = ("%" + flags + (width or "") + "s") % (f"{p:#x}" if p else "(nil)")
        else:  # %n: nothing to write back on the device
            take(8)
            s = ""
        out.append(s.encode("latin-1"))
    out.append(fmt[pos:])
    return b"".join(out), nargs
