"""Is a real NVIDIA GPU usable here? Asked without initialising CUDA (the supervisor must not): NVML for
the devices, and whether the driver library can be loaded."""

from __future__ import annotations

import ctypes


def probe_cuda() -> tuple[bool, str]:
    """(usable, reason in words)."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False, "no NVIDIA driver (libcuda.so.1 not found)"
    try:
        import pynvml
    except ImportError:
        return False, "the NVIDIA driver is present but nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
        try:
            n = pynvml.nvmlDeviceGetCount()
            driver = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError as e:
        return False, f"NVML cannot reach the driver: {e}"
    if n == 0:
        return False, f"driver {driver} sees no GPU"
    return True, f"{n} GPU(s) on driver {driver}"
