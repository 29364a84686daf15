"""Device management: counts, properties, attributes, limits, flags, synchronisation and reset. A mixin of
gpushim.server.session.Session: the methods use the session's backend session (`self.bs`), handle tables and
helpers (`_dev`, `_stream`, ...)."""

from __future__ import annotations

from typing import Any

from gpushim.cuda_errors import CudaError, Err
from gpushim.server.wait import Wait

UNSUPPORTED_LIMIT = 215
# cudaLimit defaults of current GPUs: stack, printf FIFO, malloc heap, runtime sync depth, pending launches,
# L2 fetch granularity, persisting L2 cache size; CU_LIMIT_CIG_ENABLED (query only: no context is a CIG one;
# cuBLAS asks it)
LIMIT_DEFAULTS = {0: 1024, 1: 1 << 20, 2: 8 << 20, 3: 2, 4: 2048, 5: 64, 6: 0, 8: 0}
QUERY_ONLY_LIMITS = {8}


class DeviceOps:
    def op_device_count(self) -> list[Any]:
        return [len(self.info.devices)]

    def op_device_props(self, dev: int) -> list[Any]:
        return [self.backend.devices()[self._dev(dev)].props]

    def op_device_attr(self, attr: int, dev: int) -> list[Any]:
        attrs = self.backend.devices()[self._dev(dev)].attributes
        if attr not in attrs:
            raise CudaError(Err.INVALID_VALUE, f"device attribute {attr} is unknown to this server")
        return [attrs[attr]]

    def op_device_sync(self, dev: int) -> Wait:
        d = self._dev(dev)
        return Wait(lambda: self.bs.device_idle(d))

    def op_device_reset(self, dev: int) -> list[Any]:
        d = self._dev(dev)
        for h, s in list(self.streams.items()):
            if s.device == d:
                self.bs.stream_destroy(s)
                del self.streams[h]
        for h, e in list(self.events.items()):
            if e.device == d:
                del self.events[h]
        self.bs.reset_device(d)
        self.sticky = None
        self.deferred = None
        self.device_flags.pop(d, None)
        self.limits.pop(d, None)
        return []

    def op_device_limit(self, dev: int, limit: int, value: int, set: int) -> list[Any]:
        d = self._dev(dev)
        limits = self.limits.setdefault(d, dict(LIMIT_DEFAULTS))
        if limit not in limits:
            raise CudaError(UNSUPPORTED_LIMIT, f"cudaLimit {limit} is not supported")
        if set:
            if limit in QUERY_ONLY_LIMITS:
                raise CudaError(UNSUPPORTED_LIMIT, f"cudaLimit {limit} can only be queried")
            if limit == 6 and value > self.backend.devices()[d].props.get("persistingL2CacheMaxSize", 0):
                raise CudaError(Err.INVALID_VALUE, "persisting L2 cache size above the device's maximum")
            self.bs.set_limit(d, limit, value)
            limits[limit] = value
        return [limits[limit]]

    def op_driver_version(self) -> list[Any]:
        return [self.backend.driver_version()]

    def op_mem_info(self, dev: int) -> list[Any]:
        # the backend's free bytes are what this session may still allocate: its quota (and, on the emulator, the
        # host's RAM cap) counted in (the host ledger is read once per call)
        free, total = self.bs.mem_info(self._dev(dev))
        return [free, total]

    def op_stream_priority_range(self, dev: int) -> list[Any]:
        least, greatest = self.backend.devices()[self._dev(dev)].priority_range
        return [least, greatest]

    def op_device_pci_bus_id(self, dev: int) -> list[Any]:
        return [self.backend.devices()[self._dev(dev)].pci_bus_id]

    def op_device_by_pci_bus_id(self, bus_id: str) -> list[Any]:
        want = bus_id.lower().strip()
        for client_dev, d in enumerate(self.info.devices):
            full = self.backend.devices()[d].pci_bus_id.lower()
            if want in (full, full.split(":", 1)[1], full.removeprefix("0000:")):
                return [client_dev]
        raise CudaError(Err.INVALID_DEVICE, f"no device at PCI bus id '{bus_id}'")

    def op_can_access_peer(self, dev: int, peer: int) -> list[Any]:
        return [int(self._dev(dev) != self._dev(peer))]

    def op_peer_access(self, dev: int, peer: int, set: int) -> list[Any]:  # noqa: A002 (the protocol's name)
        d, p = self._dev(dev), self._dev(peer)
        if d == p:
            raise CudaError(Err.INVALID_DEVICE, f"device {dev} cannot be its own peer")
        self.bs.set_peer_access(d, p, bool(set))
        return []

    def op_set_device_flags(self, dev: int, flags: int) -> list[Any]:
        if flags & ~0x1F:
            raise CudaError(Err.INVALID_VALUE, f"invalid device flags {flags:#x}")
        self.device_flags[self._dev(dev)] = flags
        return []

    def op_get_device_flags(self, dev: int) -> list[Any]:
        return [self.device_flags.get(self._dev(dev), 0)]
