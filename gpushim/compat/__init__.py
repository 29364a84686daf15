"""Compatibility analysis of CUDA applications (``gpushim compat-check``)."""
