"""The cuda backend: real NVIDIA GPUs through cuda-python's driver API (cuda.bindings.driver), hardware
discovery through NVML. Importing this package initialises nothing; CUDA is initialised only in a
session's worker process (CudaBackend.open_session) and in the short-lived discovery child."""

from gpushim.backends.cuda.backend import CudaBackend, CudaSession, CudaUnavailable

__all__ = ["CudaBackend", "CudaSession", "CudaUnavailable"]
