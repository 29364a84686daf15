"""The feature scan's decisions checked against the real assemblers of older toolkits: PTX that the policy
re-labels for an 11.8 / 12.2 / 12.4 driver must assemble with that era's ptxas (what the driver's JIT is), and
PTX it rejects with 222 must really fail there once re-labelled.  Needs the 11.8 and 12.4 toolkits
(`python adapters/tools/toolkits.py install 11.8|12.4`); skipped without them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpushim.compat.elfscan import scan_elf
from gpushim.compat.policy import build_policy, relabel_ptx
from gpushim.compat.table import parse_version
from gpushim.cuda_errors import CudaError
from gpushim.fatbin import parse_fatbin

from .conftest import FIXTURES, fixture_names

TOOLKITS = Path.home() / ".cache" / "gpushim" / "toolkits"
#: the ptxas that stands in for each driver's JIT (12.4's accepts ISA 8.2 too)
PTXAS = {"11.8": TOOLKITS / "11.8" / "bin" / "ptxas", "12.2": TOOLKITS / "12.4" / "bin" / "ptxas",
         "12.4": TOOLKITS / "12.4" / "bin" / "ptxas"}
CLIENT = {"11.8": 11080, "12.4": 12040, "13.0": 13000}


def ptxas(driver: str, text: str, tmp: Path, arch: str = "sm_90") -> subprocess.CompletedProcess:
    exe = PTXAS[driver]
    if not exe.exists():
        pytest.skip(f"{exe} missing: python adapters/tools/toolkits.py install {exe.parents[1].name}")
    src = tmp / "k.ptx"
    src.write_text(text)
    return subprocess.run([str(exe), f"-arch={arch}", "-o", str(tmp / "k.cubin"), str(src)], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("driver", sorted(PTXAS))
@pytest.mark.parametrize("name", fixture_names(programs_only=False))
def test_relabelled_ptx_assembles_with_that_drivers_ptxas(name: str, driver: str, tmp_path: Path) -> None:
    if name.endswith("static_kernels"):
        pytest.skip("static cudart: never reaches gpushim")
    module = parse_fatbin(scan_elf(FIXTURES / name).fatbins[-1])
    policy = build_policy(CLIENT[name.split("/")[0]], parse_version(driver), [(9, 0)])
    try:
        choice = policy.choose_image(module, (9, 0))
    except CudaError as e:
        assert e.code in (209, 222)
        ptx = [i for i in module if i.kind == "ptx"]
        if e.code == 222:  # the rejection is real: that ptxas refuses the re-labelled module
            r = ptxas(driver, relabel_ptx(ptx[0].ptx_text, policy.driver_isa), tmp_path, f"sm_{ptx[0].arch}"
                      + ("a" if ptx[0].arch_name.endswith("a") else ""))
            assert r.returncode != 0, f"{name}: rejected with 222 but {PTXAS[driver]} assembles it"
        return
    if choice.ptx_text is None:
        return  # a cubin: nothing to assemble
    arch = "sm_90a" if choice.image.arch_name.endswith("a") else "sm_90"
    r = ptxas(driver, choice.ptx_text, tmp_path, arch)
    if name.endswith("bigparam") and not policy.driver_has("large_kernel_params"):
        # the image itself is fine to re-label, but its 6008-byte parameters are not: the policy rejects the
        # launch (801), and the old assembler refuses the module
        assert policy.check_kernel_params(6008).error == 801
        assert r.returncode != 0 and "parameter space" in r.stderr
        return
    assert r.returncode == 0, f"{name} for a {driver} driver ({choice.reason}):\n{r.stderr}"


def test_newer_instructions_are_really_newer(tmp_path: Path) -> None:
    """elect.sync (PTX ISA 8.0): the scan rejects it for an 11.8 driver, and ptxas 11.8 agrees."""
    text = """.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
\t.reg .b32 %r<3>;
\t.reg .pred %q<2>;
\t.reg .b64 %rd<3>;
\tld.param.u64 %rd1, [p];
\tcvta.to.global.u64 %rd2, %rd1;
\telect.sync %r1|%q1, -1;
\tst.global.u32 [%rd2], %r1;
\tret;
}
"""
    from gpushim.fatbin import FatbinImage

    img = FatbinImage("ptx", 90, (9, 0), "none", len(text), len(text), 0x11, text.encode())
    with pytest.raises(CudaError) as e:
        build_policy(13000, 11080, [(9, 0)]).choose_image([img], (9, 0))
    assert e.value.code == 222
    assert ptxas("11.8", relabel_ptx(text, (7, 8)), tmp_path).returncode != 0
    ok = build_policy(13000, 12040, [(9, 0)]).choose_image([img], (9, 0))
    r = ptxas("12.4", ok.ptx_text or "", tmp_path)
    assert r.returncode == 0, r.stderr
