"""CUDA arrays, texture and surface objects and the profiler calls end to end: tests/programs/textures.cu checks
each result against a host reference computed with the rules of the CUDA C++ Programming Guide (appendix
"Texture Fetching": address modes, point and linear filtering with 9-bit fixed-point weights, normalized
coordinates and read modes; "Cubemap Textures"; "Surface Memory") and reports "name=ok"."""

from __future__ import annotations

import pytest

from .conftest import kv

CHECKS = {
    "array2d": ["array_info", "array_roundtrip", "array_to_array", "array_async", "tex_get_desc"]
    + [f"tex2d_{m}_{f}{n}" for m in ("wrap", "clamp", "mirror", "border") for f in ("point", "linear")
       for n in ("", "_norm")],
    "uchar4": ["uchar4_normalized_float"],
    "linear": ["tex1Dfetch_linear", "pitch2d_linear"],
    "3d": ["memcpy3d_array_roundtrip", "tex3d", "tex2d_layered", "layered_info", "cubemap_faces"],
    "surface": ["surface_read_write", "surface_get_desc"],
    "errors": ["errors"],
}


# Runs on the cuda backend too (make gpu-check): objects there are the driver's, arrays mirrored as CUarrays
# (gpushim/backends/cuda/textures.py), and the host references are CUDA's documented rules.
@pytest.mark.parametrize("part", list(CHECKS))
def test_textures(server, part):
    r = server.run("textures", part)
    assert r.returncode == 0, r.stdout + r.stderr
    v = kv(r.stdout)
    for name in CHECKS[part]:
        assert v.get(name) == "ok", (name, r.stdout)

