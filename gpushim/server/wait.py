"""A reply that cannot be given yet."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Wait:
    """A reply that must wait until `ready()`; `finish()` then gives the results (or raises CudaError). Any
    other exception from either is a server bug: the session answers the call with an error, logs the
    traceback and drops the wait (Session.progress)."""

    ready: Callable[[], bool]
    finish: Callable[[], list[Any]] = field(default=lambda: [])
    what: str = ""  # the operation waiting, for logs and error messages (set by the session)
