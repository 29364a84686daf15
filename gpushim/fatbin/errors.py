"""The one exception type of the fatbin package."""

from __future__ import annotations


class FatbinError(ValueError):
    """Malformed or unsupported fat binary, compressed payload, cubin or ELF file."""
