"""Tensor cores end to end: tests/programs/tensor_cores.cu (built with -arch=sm_80) runs wmma GEMMs for f16
(f32 and f16 accumulate), bf16, tf32, f64 and s8, and an mma.sync + ldmatrix kernel under the shim on the
emulator; the program compares each result bit for bit with its host reference of the arithmetic documented in
gpushim/ptx/ops_mma.py and prints "name=ok"."""

from __future__ import annotations

import pytest

from .conftest import BIN, emulator_only, kv

CHECKS = {
    "f16": ["wmma_f16_f32", "wmma_f16_f16"],
    "bf16": ["wmma_bf16"],
    "tf32": ["wmma_tf32"],
    "f64": ["wmma_f64"],
    "s8": ["wmma_s8"],
    "mma": ["mma_ldmatrix"],
}


@emulator_only
@pytest.mark.parametrize("part", list(CHECKS))
def test_tensor_cores(server, part):
    r = server.run("tensor_cores", part)
    assert r.returncode == 0, r.stdout + r.stderr
    v = kv(r.stdout)
    for name in CHECKS[part]:
        assert v.get(name) == "ok", (name, r.stdout)


@emulator_only
def test_tensor_cores_partial_warp_fails(server):
    """wmma needs the whole warp (PTX ISA, "wmma.load": all threads of the warp must execute it); the emulator
    fails such a launch with cudaErrorIllegalInstruction, and the server keeps serving."""
    r = server.run("tensor_cores", "partial")
    v = kv(r.stdout)
    assert r.returncode == 0 and v.get("partial_warp") == "ok", r.stdout + r.stderr
    r = server.run("tensor_cores", "s8")
    assert r.returncode == 0 and kv(r.stdout).get("wmma_s8") == "ok", r.stdout + r.stderr


def test_tensor_cores_built_for_sm80(built):
    """The Makefile builds the program for sm_80 with PTX (compute_80), the PTX the emulator runs, and that PTX
    holds the instructions under test."""
    from gpushim.fatbin import fatbins_in_elf, parse_fatbin

    images = [im for fb in fatbins_in_elf(BIN / "tensor_cores") for im in parse_fatbin(fb)]
    ptx = [im for im in images if im.kind == "ptx"]
    assert [im.arch_name for im in ptx] == ["compute_80"], [im.arch_name for im in images]
    text = ptx[0].ptx_text
    for op in ("wmma.mma.sync", "wmma.load.a", "wmma.store.d", "mma.sync.aligned.m16n8k16", "ldmatrix.sync"):
        assert op in text, op
