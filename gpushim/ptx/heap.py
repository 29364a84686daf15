"""Device-side malloc/free: the device heap lives in the emulated device memory itself.

Each malloc is one `memory.alloc(size, kind=HEAP_KIND)`; the bytes handed out are counted per memory object
against HEAP_LIMIT (CUDA's default cudaLimitMallocHeapSize, 8 MiB), beyond which malloc returns NULL as on
the GPU. free() of NULL does nothing; free() of anything but a live device-heap block is ignored.
With peer access on, a launch sees a PeerView (backends/emulator/peers.py) made for that launch: the heap is
its launching device's memory (`view.own`), so blocks and the limit persist across launches as in CUDA.
"""

from __future__ import annotations

import weakref

import numpy as np

HEAP_KIND = "device_heap"
HEAP_LIMIT = 8 << 20

_used: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _device(memory):
    """The device memory that owns the heap: a per-launch peer view's own device, else the memory itself."""
    return getattr(memory, "own", memory)


def set_heap_limit(memory, nbytes: int) -> None:
    """cudaDeviceSetLimit(cudaLimitMallocHeapSize) for one device memory."""
    _used.setdefault(_device(memory), {"used": 0, "limit": HEAP_LIMIT})["limit"] = int(nbytes)


def heap_used(memory) -> int:
    """Bytes of device heap the kernels of this memory's session hold."""
    s = _used.get(_device(memory))
    return s["used"] if s else 0


def _state(memory) -> dict:
    memory = _device(memory)
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
    memory = _device(memory)  # a peer's heap block is not this device's to free: ignored like any other pointer
    s = _state(memory)
    for a in addrs.tolist():
        if a == 0:
            continue
        al = memory.find(int(a))
        if al is None or al.addr != a or al.kind != HEAP_KIND:
            continue
        memory.free(int(a))
        s["used"] -= al.size
