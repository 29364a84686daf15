"""Per-CUDA-runtime-version knowledge as data (installed as ``gpushim.adapters``).

The data under ``cudart/<version>/`` is generated from the real libcudart and headers of each version by
``tools/gen_adapters.py`` (see README.md); nothing here is written by hand. This module only loads it::

    from gpushim import adapters           # or, from the repository root: import adapters
    abi = adapters.abi_for(12040)          # RuntimeAbi for libcudart 12.4
    abi.layouts["cudaDeviceProp"]["size"]  # 1032
    abi.node                               # "libcudart.so.12"

Only the standard library is imported; files are read on first use and cached.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

__all__ = ["DATA_DIR", "RuntimeAbi", "abi", "abi_for", "nodes", "version_key", "versions"]

DATA_DIR = Path(__file__).resolve().parent / "cudart"


def version_key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


def _encode(version: str) -> int:
    major, minor = version_key(version)
    return major * 1000 + minor * 10


@cache
def versions() -> list[str]:
    """The runtime versions with data, oldest first, e.g. ['11.8', '12.4', '12.9', '13.0']."""
    found = [p.name for p in DATA_DIR.iterdir() if (p / "version.json").is_file()]
    return sorted(found, key=version_key)


def _load(version: str, name: str) -> Any:
    return json.loads((DATA_DIR / version / name).read_text(encoding="utf-8"))


@dataclass(frozen=True)
class ErrorInfo:
    code: int
    name: str
    message: str


@dataclass(frozen=True)
class RuntimeAbi:
    """Everything known about one libcudart version. Attributes load lazily."""

    data_version: str  # the modelled version whose data this is, e.g. "12.4"

    @cached_property
    def version(self) -> dict[str, Any]:
        """version.json: runtime_version, soname, nodes, package, header_aliases, enums ..."""
        return _load(self.data_version, "version.json")

    @property
    def runtime_version(self) -> int:
        """CUDART_VERSION of the modelled headers, e.g. 12040."""
        return int(self.version["runtime_version"])

    @property
    def major(self) -> int:
        return version_key(self.data_version)[0]

    @property
    def soname(self) -> str:
        return str(self.version["soname"])

    @property
    def node(self) -> str:
        """The ELF version node the library's functions are defined in, e.g. 'libcudart.so.12'."""
        return str(self.version["nodes"][0])

    @cached_property
    def exports(self) -> frozenset[str]:
        return frozenset((DATA_DIR / self.data_version / "exports.txt").read_text().split())

    @cached_property
    def prototypes(self) -> dict[str, dict[str, Any]]:
        """name -> {return, params: [{name, type}], variadic, decl, returns_error, source}."""
        return _load(self.data_version, "prototypes.json")["functions"]

    @cached_property
    def _layouts_file(self) -> dict[str, Any]:
        return _load(self.data_version, "layouts.json")

    @cached_property
    def layouts(self) -> dict[str, dict[str, Any]]:
        """struct name -> {c_type, kind, size, align, fields: [{name, type, offset, size, count?, kind}]}.

        Typedef names (cudaLaunchConfig_t, cudaIpcMemHandle_t ...) are included as keys of the same entries.
        """
        lay = self._layouts_file
        out = dict(lay["structs"])
        for alias, target in lay["aliases"].items():
            out.setdefault(alias, lay["structs"][target])
        return out

    @cached_property
    def errors(self) -> dict[int, ErrorInfo]:
        """code -> (name, message) for every cudaError_t code this libcudart knows."""
        data = _load(self.data_version, "errors.json")
        return {e["code"]: ErrorInfo(e["code"], e["name"], e["message"]) for e in data["errors"]}

    @property
    def enums(self) -> dict[str, dict[str, int]]:
        """enum name -> {enumerator: value} for every enum of cuda_runtime_api.h (cudaError, cudaDeviceAttr ...)."""
        return self.version["enums"]

    def header_alias(self, name: str, per_thread: bool = False) -> str:
        """The export an application compiled against these headers calls for ``name``."""
        return self.version["header_aliases"]["per_thread" if per_thread else "default"].get(name, name)

    def error_name(self, code: int) -> str:
        e = self.errors.get(code)
        return e.name if e else "unrecognized error code"

    def error_string(self, code: int) -> str:
        e = self.errors.get(code)
        return e.message if e else "unrecognized error code"

    def sizeof(self, struct: str) -> int:
        return int(self.layouts[struct]["size"])

    def offsetof(self, struct: str, member: str) -> int:
        for f in self.layouts[struct]["fields"]:
            if f["name"] == member:
                return int(f["offset"])
        raise KeyError(f"{struct}.{member}")


@cache
def abi(version: str) -> RuntimeAbi:
    """The data of one modelled version, by name ('12.4')."""
    if version not in versions():
        raise LookupError(f"no adapter data for CUDA runtime {version}; have {versions()}")
    return RuntimeAbi(version)


def abi_for(runtime_version: int) -> RuntimeAbi:
    """The data of the closest modelled version with the same major as ``runtime_version`` (e.g. 12060).

    Prefers the newest modelled version <= the requested one; otherwise the oldest one above it.
    Raises LookupError if no version of that major is modelled.
    """
    major = runtime_version // 1000
    same = [v for v in versions() if version_key(v)[0] == major]
    if not same:
        raise LookupError(f"no adapter data for CUDA runtime major {major} ({runtime_version}); have {versions()}")
    below = [v for v in same if _encode(v) <= runtime_version]
    return abi(below[-1] if below else same[0])


@cache
def nodes() -> dict[str, Any]:
    """nodes.json: per version node the exported names, and per name whether it is ABI-identical across versions."""
    return json.loads((DATA_DIR / "nodes.json").read_text(encoding="utf-8"))
