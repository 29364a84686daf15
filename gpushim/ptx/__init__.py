"""PTX engine of the emulator backend: parses PTX as nvcc 11.8-13.x emits it and runs kernels on the CPU
with CUDA semantics, vectorised over the threads of batches of whole blocks with numpy.

    mod = load_module(ptx_text)
    mod.kernels["vectorAdd"].params        # parameter layout
    stats = mod.launch("vectorAdd", grid, block, shared_bytes, params, memory, symbols, output)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpushim.ptx.errors import PtxError, PtxUnsupported

if TYPE_CHECKING:
    from gpushim.ptx.module import GlobalVar, KernelInfo, LaunchStats, ParamInfo, PtxModule, load_module


def __getattr__(name: str) -> Any:
    """The engine (gpushim.ptx.module and all it imports) loads when first used, not with its light submodules
    (texdesc, heap: a server imports those before it listens)."""
    if name in ("GlobalVar", "KernelInfo", "LaunchStats", "ParamInfo", "PtxModule", "load_module"):
        from gpushim.ptx import module

        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "load_module",
    "PtxModule",
    "KernelInfo",
    "ParamInfo",
    "GlobalVar",
    "LaunchStats",
    "PtxError",
    "PtxUnsupported",
]
