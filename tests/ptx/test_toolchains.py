"""PTX from other toolkits: the fat binaries of tests/fixtures (built with nvcc 11.8, 12.4 and 13.0, PTX ISA 7.8,
8.4 and 9.0, comments stripped by fatbinary) load and run."""

import struct
from pathlib import Path

import numpy as np
import pytest
from harness import Dev

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bin"


def _ptx(path: Path) -> str:
    from gpushim.fatbin.container import parse_fatbin
    from gpushim.fatbin.elf import fatbins_in_elf

    for fb in fatbins_in_elf(str(path)):
        for img in parse_fatbin(fb):
            if img.kind == "ptx":
                return img.ptx_text
    pytest.skip(f"no PTX in {path}")


@pytest.mark.parametrize("version", ["11.8", "12.4", "13.0"])
def test_fixture_kernels(version, rng):
    path = FIXTURES / version / "kernels"
    if not path.exists():
        pytest.skip(f"{path} not built")
    d = Dev(_ptx(path))
    n = 1000
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    pc = d.empty(4 * n)
    d.launch("_Z4vaddPKfS0_Pfi", (n + 127) // 128, 128, d.array(a), d.array(b), pc, n)
    assert np.array_equal(d.get(pc, np.float32, n), a + b)
    info = d.mod.kernels["_Z11with_struct6ParamsPf"]
    assert [(p.offset, p.size) for p in info.params] == [(0, 32), (32, 8)]
    params = struct.pack("<ifd3i4x", n, 0.5, 100.0, 1, 2, 3)
    d.launch("_Z11with_struct6ParamsPf", (n + 255) // 256, 256, params, pc)
    i = np.arange(n, dtype=np.float32)
    assert np.array_equal(d.get(pc, np.float32, n), np.float32(0.5) * i + np.float32(100.0) + np.float32(6))
    x = rng.integers(-1000, 1000, n, dtype=np.int32)
    ps = d.array(np.zeros(1, np.int32))
    d.launch("_Z9block_sumPKiPii", (n + 255) // 256, 256, d.array(x), ps, n, shared=256 * 4)
    assert d.get(ps, np.int32, 1)[0] == x.sum()


@pytest.mark.parametrize("version", ["12.4", "13.0"])
def test_fixture_big_parameter(version):
    path = FIXTURES / version / "bigparam"
    if not path.exists():
        pytest.skip(f"{path} not built")
    d = Dev(_ptx(path))
    v = (np.arange(1500) % 7).astype(np.int32)
    out = d.array(np.zeros(1, np.int32))
    assert d.mod.kernels["_Z7big_sum3BigPi"].param_bytes == 6008
    d.launch("_Z7big_sum3BigPi", 1, 64, v.tobytes(), out)
    assert d.get(out, np.int32, 1)[0] == v.sum()
