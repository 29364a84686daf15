"""PTX engine of the emulator backend: parses PTX as nvcc 11.8-13.x emits it and runs kernels on the CPU
with CUDA semantics, vectorised over the threads of batches of whole blocks with numpy.

    mod = load_module(ptx_text)
    mod.kernels["vectorAdd"].params        # parameter layout
    stats = mod.launch("vectorAdd", grid, block, shared_bytes, params, memory, symbols, output)
"""

from gpushim.ptx.errors import PtxError, PtxUnsupported
from gpushim.ptx.module import GlobalVar, KernelInfo, LaunchStats, ParamInfo, PtxModule, load_module

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
