import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

import harness  # noqa: E402
from harness import Dev, compile_ptx  # noqa: E402

# Every test runs on the interpreter (the reference) and with "diff": each kernel the compiling engine supports
# runs on both engines and the launch fails unless device memory and outcome are bit-identical
# (gpushim/ptx/jit/diff.py); kernels the JIT does not support fall back to the interpreter (the summary lists
# them). PTX_TEST_ENGINES=interp,jit,diff adds a pass on the JIT alone (its own memory checked by the tests).
os.environ.setdefault("GPUSHIM_PTX_JIT_CACHE", "off")  # test_jit.py tests the disk cache in a temporary folder
# the JIT's tier 2 (check pass and unchecked, vectorised code) at each kernel's first launch, so that "diff"
# compares it with the interpreter; test_jit_tiers.py also runs tier 1 alone
os.environ.setdefault("GPUSHIM_PTX_JIT_TIER2", "now")
ENGINES = [e for e in os.environ.get("PTX_TEST_ENGINES", "interp,diff").split(",") if e]


@pytest.fixture(params=ENGINES, autouse=True)
def engine(request):
    harness.ENGINE["name"] = request.param
    yield request.param
    harness.ENGINE["name"] = "auto"


def pytest_terminal_summary(terminalreporter):
    if not harness.LAUNCHED:
        return
    jit = sorted({k for k, how in harness.LAUNCHED if how == "jit"})
    fb = sorted({k for k, how in harness.LAUNCHED if how == "fallback"})
    terminalreporter.write_line(
        f"PTX JIT: {len(jit)} kernels compiled, {len(fb)} on the interpreter (fallback): {', '.join(fb)}"
    )
    from gpushim.ptx.jit.diff import stats

    if stats["compared"]:
        terminalreporter.write_line(
            f"PTX engines compared on {stats['compared']} launches (diff): {stats['differ']} differed"
        )


@pytest.fixture
def rng():
    import numpy as np

    return np.random.default_rng()


@pytest.fixture(scope="module")
def dev_for():
    cache = {}

    def get(name: str, arch: str = "sm_75") -> Dev:
        d = Dev(compile_ptx(name, arch))
        cache[(name, arch)] = d
        return d

    return get
