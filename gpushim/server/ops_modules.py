"""Modules and kernels: uploads by hash, parameter layouts, launches, module variables. A mixin of
gpushim.server.session.Session: the methods use the session's backend session (`self.bs`), handle tables and
helpers (`_dev`, `_stream`, ...)."""

from __future__ import annotations

from typing import Any

from gpushim.backends import launch_attrs, tensormap
from gpushim.compat.policy import SMALL_PARAM_LIMIT
from gpushim.cuda_errors import CudaError
from gpushim.server.ops_driver import as_fatbin


class ModuleOps:
    def _ensure_module(self, key: bytes) -> None:
        if not self.bs.has_module(key):
            self.bs.load_module(key, as_fatbin(self.store.get(key)))

    def op_module_query(self, hash: bytes) -> list[Any]:
        if self.bs.has_module(hash):
            return [1]
        # Known modules are loaded at once: the store may evict the file before this session uses it.
        data = self.store.find(hash)
        if data is None:
            return [0]
        self.bs.load_module(hash, as_fatbin(data))
        return [1]

    def op_module_load(self, hash: bytes, fatbin: bytes) -> list[Any]:
        self.store.check(hash, fatbin)  # size, hash and format, before the upload counts or touches the disk
        if not self.store.has(hash):  # the allowance bounds what a session writes into the store
            self.uploads.charge(len(fatbin))
        # a fat binary, or (driver face: cuModuleLoadData) a cubin or PTX text, stored as the client sent it
        self.store.put(hash, fatbin, checked=True)
        self.bs.load_module(hash, as_fatbin(fatbin))
        return []

    def op_func_info(self, dev: int, hash: bytes, name: str) -> list[Any]:
        self._ensure_module(hash)
        params, nbytes, attrs = self.bs.function_info(self._dev(dev), hash, name)
        return [params, nbytes, attrs]

    def op_launch(self, dev: int, hash: bytes, name: str, grid: list[int], block: list[int], shared: int,
                  stream: int, params: bytes) -> list[Any]:
        if len(params) > SMALL_PARAM_LIMIT:  # (every driver takes the small ones: no verdict to build)
            verdict = self.policy.check_kernel_params(len(params))
            if not verdict.ok:
                raise CudaError(verdict.error, f"kernel {name}: {verdict.reason}")
        if not self.bs.has_module(hash):  # _ensure_module, without a call on the hot path
            self._ensure_module(hash)
        self.bs.launch(self._dev(dev), hash, name, grid, block, shared, self._stream(stream, dev), params)
        return []

    def op_launch_ex(self, dev: int, hash: bytes, name: str, grid: list[int], block: list[int], shared: int,
                     stream: int, attrs: list[int], params: bytes) -> list[Any]:
        """LAUNCH with launch attributes (gpushim/backends/launch_attrs.py): the events of a programmatic
        event / launch completion event attribute are recorded here, after the kernel on its stream."""
        parsed = launch_attrs.parse(attrs)
        parsed.non_portable = (hash, name) in self.__dict__.get("nonportable_clusters", ())
        self.log.debug("LAUNCH_EX %s: launch attributes %s", name, [a.id for a in parsed.attrs])
        events = [self._event(a.a) for a in parsed.attrs if a.id in launch_attrs.EVENTS]
        verdict = self.policy.check_kernel_params(len(params))
        if not verdict.ok:
            raise CudaError(verdict.error, f"kernel {name}: {verdict.reason}")
        self._ensure_module(hash)
        s = self._stream(stream, dev)
        self.bs.launch(self._dev(dev), hash, name, grid, block, shared, s, params, parsed.without_events())
        for e in events:
            self.bs.event_record(e, s)
        return []

    def op_tensor_map_encode(self, dev: int, fields: list[int]) -> list[Any]:
        return [self.bs.tensor_map_encode(self._dev(dev), tensormap.parse(fields))]

    def op_tensor_map_replace_address(self, dev: int, address: int, tensormap: bytes) -> list[Any]:
        return [self.bs.tensor_map_replace_address(self._dev(dev), address, bytes(tensormap))]

    def op_symbol_info(self, dev: int, hash: bytes, name: str) -> list[Any]:
        self._ensure_module(hash)
        ptr, size = self.bs.symbol_info(self._dev(dev), hash, name)
        return [ptr, size]

    def op_func_set_attr(self, dev: int, hash: bytes, name: str, attr: int, value: int) -> list[Any]:
        self._ensure_module(hash)
        self.bs.function_info(self._dev(dev), hash, name)  # the kernel must exist
        set_attr = getattr(self.bs, "func_set_attr", None)  # a real driver takes every attribute (cuda backend)
        if set_attr is not None:
            set_attr(self._dev(dev), hash, name, attr, value)
        if attr == launch_attrs.FUNC_ATTR_NON_PORTABLE_CLUSTER:  # launches with clusters above 8 blocks check it
            allowed = self.__dict__.setdefault("nonportable_clusters", set())
            (allowed.add if value else allowed.discard)((hash, name))
        return []
