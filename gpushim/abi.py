"""Access to the per-version data in adapters/ whether gpushim is installed (gpushim.adapters) or run
from a checkout (the top-level adapters/ folder)."""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from gpushim import adapters  # installed: package data mapped into the package
except ImportError:  # a checkout: adapters/ sits beside gpushim/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import adapters  # type: ignore[no-redef]

__all__ = ["adapters", "device_attribute_ids", "error_names"]


def device_attribute_ids() -> dict[str, int]:
    """cudaDeviceAttr name -> value (newest runtime's header: enums only ever grew)."""
    return dict(adapters.abi(adapters.versions()[-1]).enums["cudaDeviceAttr"])


def error_names() -> dict[int, str]:
    abi = adapters.abi(adapters.versions()[-1])
    return {e.code: e.name for e in abi.errors.values()} if isinstance(abi.errors, dict) else {}
