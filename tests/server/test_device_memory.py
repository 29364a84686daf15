"""The emulator's device-memory allocator (gpushim/backends/emulator/memory.py): first fit over a sorted list
of holes, aligned starts, coalescing on free, every allocation charged to the session's account."""

from __future__ import annotations

import random

import pytest

from gpushim.backends.accounting import HostLedger, MemoryAccount
from gpushim.backends.emulator.memory import ALLOC_ALIGNMENT, DeviceMemory
from gpushim.cuda_errors import CudaError, Err

PAGE = 4096


def check(mem: DeviceMemory, live: dict[int, tuple[int, int]]) -> None:
    """Holes sorted, disjoint, never adjacent (coalesced); holes and allocations tile the capacity exactly."""
    spans = sorted([(a - mem.base, r) for a, (_, r) in live.items()] + list(mem._free))
    pos = 0
    for off, n in spans:
        assert off == pos and n > 0, (off, pos)
        pos += n
    assert pos == mem.capacity
    for (o1, n1), (o2, _) in zip(mem._free, mem._free[1:], strict=False):
        assert o1 + n1 < o2  # a gap between holes: an allocation sits there
    assert mem.used == sum(r for _, r in live.values()) == mem.account.used


def test_random_allocations_and_frees_tile_the_arena() -> None:
    rng = random.Random(16)
    mem = DeviceMemory(1 << 24, account=MemoryAccount(None, HostLedger(1 << 30)))
    live: dict[int, tuple[int, int]] = {}
    try:
        for _ in range(600):
            if live and rng.random() < 0.45:
                addr = rng.choice(list(live))
                assert mem.free(addr).addr == addr
                del live[addr]
            else:
                size = rng.choice([0, 1, 511, 512, 513, 4096, 5000, 65536, rng.randrange(1, 200000)])
                align = rng.choice([ALLOC_ALIGNMENT, PAGE])
                try:
                    addr = mem.alloc(size, align=align)
                except CudaError as e:
                    assert e.code == Err.MEMORY_ALLOCATION
                    continue
                reserved = max(align, -(-size // align) * align)
                assert (addr - mem.base) % align == 0
                assert mem.find(addr).size == size and mem.find(addr).reserved == reserved
                live[addr] = (size, reserved)
            check(mem, live)
        for addr in list(live):
            mem.free(addr)
        assert mem._free == [(0, mem.capacity)] and mem.used == 0 and mem.account.used == 0
    finally:
        mem.close()


def test_a_misaligned_hole_keeps_its_head() -> None:
    """A page-aligned allocation after a 512-byte one starts on the next page; the bytes before it stay free
    and are reused by the next small allocation (first fit)."""
    mem = DeviceMemory(1 << 20)
    try:
        a = mem.alloc(512)
        b = mem.alloc(1, align=PAGE)
        assert b - mem.base == PAGE and mem._free[0] == (512, PAGE - 512)
        c = mem.alloc(PAGE - 512)
        assert c == a + 512 and mem._free == [(2 * PAGE, (1 << 20) - 2 * PAGE)]
        with pytest.raises(CudaError) as e:
            mem.alloc(1 << 20)
        assert e.value.code == Err.MEMORY_ALLOCATION and mem.account.used == 2 * PAGE
    finally:
        mem.close()
