"""Placement: the order in which a session that names no device sees the server's devices, so that its
device 0 (what `cudaSetDevice(0)` and the default device pick) is the least-loaded GPU.

The inputs come from discovery (each device's memory) and from the scheduler's shared table (device memory
held by sessions, sessions waiting for or using each device), plus the sessions already placed on each device
as their first; `inputs` is what `gpushim status` shows."""

from __future__ import annotations

from typing import Any

from gpushim.backends.base import Backend
from gpushim.server.scheduler import DeviceArbiter


def inputs(backend: Backend, arbiter: DeviceArbiter, primaries: dict[int, int] | None = None) -> list[dict[str, Any]]:
    out = []
    for d in backend.devices():
        load = arbiter.load(d.ordinal)
        total = int(d.props.get("totalGlobalMem") or 0)
        placed = (primaries or {}).get(d.ordinal, 0)
        out.append({"device": d.ordinal, "total_memory": total,
                    "free_memory": max(total - load["memory_used"], 0),
                    "sessions_placed": placed, **load,
                    # lower is better: sessions competing for the device, then memory left
                    "load": load["waiting"] + int(load["busy"]) + max(load["sessions"], placed)})
    return out


def order_devices(backend: Backend, arbiter: DeviceArbiter, primaries: dict[int, int] | None = None) -> list[int]:
    """Backend ordinals, least loaded first (ties: most free memory, then the lower ordinal)."""
    rows = inputs(backend, arbiter, primaries)
    rows.sort(key=lambda r: (r["load"], -r["free_memory"], r["device"]))
    return [r["device"] for r in rows]
