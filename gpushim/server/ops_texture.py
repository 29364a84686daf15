"""Texture and surface objects (a mixin of gpushim.server.session.Session)."""

from __future__ import annotations

from typing import Any

from gpushim.server.wait import Wait


class TextureOps:
    def op_tex_create(self, dev: int, surface: int, fields: list[int]) -> list[Any]:
        return [self.bs.texture_create(self._dev(dev), bool(surface), fields)]

    def op_tex_destroy(self, handle: int) -> Wait:
        # Kernels already queued may still read the object: like cudaFree, wait for the devices first.
        self.bs.texture_check(handle)
        return Wait(lambda: all(self.bs.device_idle(d) for d in self.info.devices),
                    lambda: self.bs.texture_destroy(handle) or [])
