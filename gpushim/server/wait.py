"""A reply that cannot be given yet."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Wait:
    """A reply that must wait until `ready()`; `finish()` then gives the results (or raises CudaError)."""

    ready: Callable[[], bool]
    finish: Callable[[], list[Any]] = field(default=lambda: [])
