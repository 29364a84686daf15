"""Where things are: the default server socket, the shim library, the test programs."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def default_server_url() -> str:
    """The address the shim uses when GPUSHIM_SERVER is unset (the same rule as shim/gs_transport.c)."""
    rt = os.environ.get("XDG_RUNTIME_DIR")
    if rt:
        return f"unix://{rt}/gpushim.sock"
    return f"unix:///tmp/gpushim-{os.getuid()}.sock"


def server_url() -> str:
    return os.environ.get("GPUSHIM_SERVER") or default_server_url()


def shim_path() -> Path:
    """libgpushim.so inside the package (built by `make` or by `pip install`)."""
    return PACKAGE / "lib" / "libgpushim.so"
