import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

from harness import Dev, compile_ptx  # noqa: E402


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
