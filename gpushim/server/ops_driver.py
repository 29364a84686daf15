"""What the driver face (gpushim's libcuda.so.1) needs beyond the runtime's operations: modules given as
raw images (cuModuleLoadData takes a fat binary, a cubin or PTX text) and JIT linking of PTX (cuLink*).
A mixin of gpushim.server.session.Session, like the ops_* modules."""

from __future__ import annotations

import re
import struct
from typing import Any

from gpushim.cuda_errors import CudaError, Err
from gpushim.fatbin import FatbinError, cubin_info
from gpushim.fatbin.container import (
    ENTRY_HEADER,
    FATBIN_HEADER,
    FATBIN_MAGIC,
    FLAG_64BIT,
    FLAG_LINUX,
    KIND_CUBIN,
    KIND_PTX,
)
from gpushim.server.wait import Wait

INVALID_PTX = 218
MAX_LINK_INPUTS = 256
_TARGET = re.compile(r"^\s*\.target\s+sm_(\d+)", re.M)
_VERSION = re.compile(r"^\s*\.version\s+(\d+)\.(\d+)", re.M)
_HEADER_LINE = re.compile(r"^\s*\.(version|target|address_size)\b[^\n]*\n?", re.M)
_FUNC = re.compile(r"(\.extern\s+)?(\.visible\s+|\.weak\s+)?\.func\s*(?:\([^)]*\))?\s*(\w+)")
_EXTERN_VAR = re.compile(r"^\s*\.extern\s+\.(?:global|const|shared)\b[^;]*?(\w+)\s*(?:\[\d*\])?\s*;[^\n]*\n?", re.M)
_VAR = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:global|const)\b[^;]*?(\w+)\s*(?:\[\d*\])?\s*[;=]", re.M)


def _entry(kind: int, payload: bytes, arch: int, version: tuple[int, int]) -> bytes:
    padded = payload + b"\0" * (-len(payload) % 8)
    header = ENTRY_HEADER.pack(kind, 0x0101, ENTRY_HEADER.size, len(padded), 0, 0, version[1], version[0], arch,
                               0, 0, FLAG_64BIT | FLAG_LINUX, 0, 0)
    return header + padded


def _ptx_text(data: bytes) -> str | None:
    text = data.split(b"\0", 1)[0]
    if b".version" not in text or b".target" not in text:
        return None
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        return None


def as_fatbin(data: bytes) -> bytes:
    """A module image as a fat binary: a fat binary stays as it is, a cubin or PTX text (NUL-terminated or
    not) becomes the single entry of one, as the driver's cuModuleLoadData accepts all three."""
    if len(data) >= 4 and struct.unpack_from("<I", data, 0)[0] == FATBIN_MAGIC:
        return data
    if data[:4] == b"\x7fELF":
        try:
            info = cubin_info(data)
        except FatbinError as e:
            raise CudaError(Err.INVALID_KERNEL_IMAGE, f"the cubin is malformed: {e}") from None
        body = _entry(KIND_CUBIN, bytes(data), info.arch, info.abi_version)
    else:
        text = _ptx_text(data)
        if text is None:
            raise CudaError(Err.INVALID_KERNEL_IMAGE, "the module image is neither a fat binary, a cubin nor PTX")
        target, version = _TARGET.search(text), _VERSION.search(text)
        if not target or not version:
            raise CudaError(INVALID_PTX, "the PTX has no .version / .target sm_XX line")
        body = _entry(KIND_PTX, text.encode() + b"\0", int(target.group(1)),
                      (int(version.group(1)), int(version.group(2))))
    return FATBIN_HEADER.pack(FATBIN_MAGIC, 1, FATBIN_HEADER.size, len(body)) + body


def link_ptx(parts: list[str]) -> str:
    """Links PTX modules into one: the newest header of the inputs, then every module's body, with each
    `.extern` declaration that another input defines resolved: a function's becomes a prototype with the
    definition's linkage, a variable's is dropped. What no input defines stays `.extern` (ptxas and the
    PTX engine report it)."""
    if not parts:
        raise CudaError(Err.INVALID_VALUE, "cuLinkComplete: nothing was added to the link")
    versions = [_VERSION.search(p) for p in parts]
    targets = [_TARGET.search(p) for p in parts]
    if not all(versions) or not all(targets):
        raise CudaError(INVALID_PTX, "cuLinkComplete: an input has no .version / .target sm_XX line")
    # The linked module needs the newest ISA and target of its inputs.
    version = max((int(v.group(1)), int(v.group(2))) for v in versions if v)
    target = max(int(t.group(1)) for t in targets if t)
    bodies = [_HEADER_LINE.sub("", p) for p in parts]
    # defined functions -> their linkage, which a prototype must repeat
    funcs = {m.group(3): m.group(2) or "" for b in bodies for m in _FUNC.finditer(b) if not m.group(1)}
    variables = {m.group(1) for b in bodies for m in _VAR.finditer(b)}

    def resolve(body: str) -> str:
        body = _FUNC.sub(lambda m: funcs[m.group(3)] + m.group(0)[len(m.group(1)):]
                         if m.group(1) and m.group(3) in funcs else m.group(0), body)
        return _EXTERN_VAR.sub(lambda m: "" if m.group(1) in variables else m.group(0), body)

    header = f".version {version[0]}.{version[1]}\n.target sm_{target}\n.address_size 64\n"
    return header + "\n".join(resolve(b) for b in bodies)


class DriverOps:
    def op_stream_wait_value(self, stream: int, addr: int, value: int, cmp: int, width: int) -> list[Any]:
        if width not in (4, 8) or not 0 <= cmp <= 3 or not 0 <= value < 1 << (8 * width):
            raise CudaError(Err.INVALID_VALUE, f"cuStreamWaitValue{8 * width}: comparison {cmp}, value {value:#x}")
        wait = getattr(self.bs, "wait_value", None)
        if wait is None:
            raise CudaError(Err.NOT_SUPPORTED, "cuStreamWaitValue: this server's backend cannot hold a stream on "
                            "a memory value")
        wait(self._stream(stream), addr, value, cmp, width)
        return []

    def op_memset_wide(self, dst: int, pitch: int, value: int, width: int, height: int, elem: int,
                       stream: int) -> list[Any]:
        if elem not in (2, 4) or not 0 <= value < 1 << (8 * elem) or width < 0 or height < 0:
            raise CudaError(Err.INVALID_VALUE, f"MEMSET_WIDE: value {value:#x}, {elem}-byte elements")
        row = width * elem
        if row > 1 << 32 or row * height > 1 << 32:
            raise CudaError(Err.INVALID_VALUE, "cuMemsetD*: more than 4 GiB in one call")
        if height > 1 and pitch < row:
            raise CudaError(Err.INVALID_VALUE, f"cuMemsetD2D{8 * elem}: pitch {pitch} < row of {row} bytes")
        pattern = value.to_bytes(elem, "little") * width
        s = self._stream(stream)
        if height <= 1:
            self.bs.write(s, dst, pattern)
        else:
            self.bs.write_2d(s, dst, pitch, row, height, pattern * height)
        return []

    def op_link_ptx(self, count: int, data: bytes) -> list[Any]:
        parts = bytes(data).split(b"\0")
        if not 0 < count <= MAX_LINK_INPUTS or len(parts) != count:
            raise CudaError(Err.INVALID_VALUE, f"LINK_PTX: {count} inputs announced, {len(parts)} sent")
        texts = []
        for i, p in enumerate(parts):
            t = _ptx_text(p)
            if t is None:
                raise CudaError(INVALID_PTX, f"cuLinkAddData: input {i} is not PTX")
            texts.append(t)
        linked = link_ptx(texts)
        self.log.info("linked %d PTX inputs into %d bytes", count, len(linked))
        return [linked.encode()]

    def op_module_unload(self, hash: bytes) -> Wait:
        """cuModuleUnload of the client's last handle to this image: its kernels may still be queued, so the
        session's devices drain first (the driver may not unload code a queued launch uses)."""
        unload = getattr(self.bs, "unload_module", None)
        if unload is None:
            raise CudaError(Err.NOT_SUPPORTED, "cuModuleUnload: this server's backend keeps modules until the "
                            "session ends")
        devices = list(self.info.devices)

        def finish() -> list[Any]:
            unload(hash)
            self.log.info("module %s unloaded", hash.hex()[:12])
            return []

        return Wait(lambda: all(self.bs.device_idle(d) for d in devices), finish)
