"""gpushim: run unmodified CUDA applications against remote or differently-versioned GPUs."""

__version__ = "0.1.0"
