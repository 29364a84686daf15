"""Device-side malloc/free: the device heap lives in the emulated device memory itself.

Each malloc is one `memory.alloc(size, kind=HEAP_KIND)`; the bytes handed out are counted per memory object
against HEAP_LIMIT (CUDA's default cudaLimitMallocHeapSize, 8 MiB), beyond which malloc returns NULL as on
the GPU. free() of NULL does nothing; free() of anything but a live device-heap block is ignored.
"""

from __future__ import annotations

import weakref

import numpy as np

HEAP_KIND = "device_heap"
HEAP_LIMIT = 8 << 20

_used: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def set_heap_limit(memory, nbytes: int) -> None:
    """cudaDeviceSetLimit(cudaLimitMallocHeapSize) for one device memory."""
    _used.setdefault(memory, {"used": 0, "limit": HEAP_LIMIT})["limit"] = int(nbytes)


def heap_used(memory) -> int:
    """Bytes of device heap the kernels of this memory's session hold."""
    s = _used.get(memory)
    return s["used"] if s else 0


def _state(memory) -> dict:
    s = _used.get(memory)
    if s is None:
        s = _used[memory] = {"used": 0, "limit": HEAP_LIMIT}
    return s


def malloc(memory, sizes: np.ndarray) -> np.ndarray:
    out = np.zeros(sizes.shape, np.uint64)
    s = _state(memory)
    for i, n in enumerate(sizes.tolist()):
        if n == 0 or s["used"] + n > s["limit"]:
            continue
        try:
            out[i] = memory.alloc(int(n), kind=HEAP_KIND)
        except Exception:  # out of device memory: NULL, as on the GPU
            continue
        s["used"] += int(n)
    return out


def free(memory, addrs: np.ndarray) -> None:
    s = _state(memory)
    for a in addrs.tolist():
        if a == 0:
            continue
        al = memory.find(int(a))
        if al is None or al.addr != a or al.kind != HEAP_KIND:
            continue
        memory.free(int(a))
        s["used"] -= al.size
