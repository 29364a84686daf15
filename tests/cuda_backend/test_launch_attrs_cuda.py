"""Launch attributes on the cuda backend without a GPU: LAUNCH_EX's attributes (gpushim/backends/launch_attrs.py)
become cuda.bindings' CUlaunchConfig for cuLaunchKernelEx (the stand-in driver first passes them to the real
bindings, which type-check them), each value where cuda.h's CUlaunchAttributeValue has it; a launch without
attributes stays cuLaunchKernel. cuTensorMapEncodeTiled's descriptor comes from the driver."""

from __future__ import annotations

import hashlib
import struct

import pytest

from gpushim.backends import launch_attrs as la
from gpushim.backends import tensormap as tm
from tests.cuda_backend.test_params import MIXED
from tests.cuda_backend.test_session_logic import make_session, pytestmark  # noqa: F401 - the driver skip


def test_attributes_reach_cuLaunchKernelEx(fatbin: bytes) -> None:
    s, drv, _ = make_session(layouts={"mixed": MIXED})
    key = hashlib.sha256(fatbin).digest()
    s.load_module(key, fatbin)
    buf = bytes(range(72))
    hit = struct.unpack("<I", struct.pack("<f", 0.25))[0]
    flat = [la.CLUSTER_DIMENSION, 2, 1, 1, la.PRIORITY, 0xFFFF_FFFE, 0, 0,  # priority -2
            la.PROGRAMMATIC_STREAM_SERIALIZATION, 1, 0, 0, la.COOPERATIVE, 1, 0, 0,
            la.MEM_SYNC_DOMAIN_MAP, 0, 1, 0, la.MEM_SYNC_DOMAIN, 1, 0, 0,
            la.ACCESS_POLICY_WINDOW, 0x7F00_0000_1000, 4096, hit | 1 << 32 | 2 << 48,
            la.PREFERRED_CLUSTER_DIMENSION, 4, 1, 1, la.PREFERRED_SHARED_MEMORY_CARVEOUT, 50, 0, 0]
    s.launch(0, key, "mixed", [4, 1, 1], [64, 1, 1], 0, None, buf, la.parse(flat))
    s.launch(0, key, "mixed", [4, 1, 1], [64, 1, 1], 0, None, buf, la.LaunchAttrs())
    assert drv.calls.count("cuLaunchKernelEx") == 1 and drv.calls.count("cuLaunchKernel") == 1
    ex, plain = drv.launches
    assert ex["grid"] == (4, 1, 1) and ex["block"] == (64, 1, 1) and "attrs" not in plain
    assert ex["values"] == [buf[o : o + n] for o, n in MIXED]
    got = dict(ex["attrs"])
    assert [i for i, _ in ex["attrs"]] == [4, 8, 6, 2, 9, 10, 1, 11, 14]
    c = got[la.CLUSTER_DIMENSION].clusterDim
    assert (c.x, c.y, c.z) == (2, 1, 1)
    p = got[la.PREFERRED_CLUSTER_DIMENSION].preferredClusterDim
    assert (p.x, p.y, p.z) == (4, 1, 1)
    assert got[la.PRIORITY].priority == -2
    assert got[la.PROGRAMMATIC_STREAM_SERIALIZATION].programmaticStreamSerializationAllowed == 1
    assert got[la.COOPERATIVE].cooperative == 1
    m = got[la.MEM_SYNC_DOMAIN_MAP].memSyncDomainMap
    assert (m.default_, m.remote) == (0, 1)
    assert int(got[la.MEM_SYNC_DOMAIN].memSyncDomain) == 1
    w = got[la.ACCESS_POLICY_WINDOW].accessPolicyWindow
    assert int(w.base_ptr) == 0x7F00_0000_1000 and w.num_bytes == 4096 and w.hitRatio == pytest.approx(0.25)
    assert int(w.hitProp) == 1 and int(w.missProp) == 2
    assert got[la.PREFERRED_SHARED_MEMORY_CARVEOUT].sharedMemCarveout == 50
    assert "cuFuncSetAttribute" not in drv.calls
    # a 16-block cluster the application allowed: the backend opts the real function in first
    wide = la.parse([la.CLUSTER_DIMENSION, 16, 1, 1])
    wide.non_portable = True
    s.launch(0, key, "mixed", [16, 1, 1], [64, 1, 1], 0, None, buf, wide)
    assert drv.calls[-2:] == ["cuFuncSetAttribute", "cuLaunchKernelEx"]


def test_tensor_map_encoded_by_the_driver() -> None:
    s, drv, _ = make_session()
    p = s.malloc(0, 1 << 16)
    fields = [7, 2, p, 64, 64, 256, 32, 32, 1, 1, 0, 0, 0, 0]  # float32, rank 2, box 32x32
    out = s.tensor_map_encode(0, tm.parse(fields))
    assert drv.tensor_maps == [(7, 2, p, [64, 64], [256], [32, 32], [1, 1], 0, 0, 0, 0)]
    assert len(out) == 128 and out[:16] == p.to_bytes(8, "little") + (2).to_bytes(8, "little")
    moved = s.tensor_map_replace_address(0, p + 4096, out)
    assert moved == (p + 4096).to_bytes(8, "little") + out[8:]


def test_function_attributes_reach_the_driver(fatbin: bytes) -> None:
    """FUNC_SET_ATTR (cudaFuncSetAttribute / cuFuncSetAttribute) sets every attribute on the real function, not
    only the non-portable-cluster flag the server itself checks; the driver's refusal is the caller's error, and
    a dynamic shared memory size the application set needs no opt-in of the backend's at launch."""
    import logging
    from types import SimpleNamespace

    from gpushim.cuda_errors import CudaError, Err
    from gpushim.server.ops_modules import ModuleOps

    s, drv, _ = make_session(layouts={"mixed": MIXED})
    key = hashlib.sha256(fatbin).digest()
    s.load_module(key, fatbin)
    # the session's operation, with this backend session under it
    ops = SimpleNamespace(bs=s, _ensure_module=lambda h: None, _dev=lambda d: d, log=logging.getLogger("t"))
    for attr, value in [(8, 100 << 10), (9, 50), (11, 2), (12, 1), (13, 1), (15, 1), (14, 1)]:
        assert ModuleOps.op_func_set_attr(ops, 0, key, "mixed", attr, value) == []  # type: ignore[arg-type]
    assert drv.func_attrs == [("mixed", 8, 100 << 10), ("mixed", 9, 50), ("mixed", 11, 2), ("mixed", 12, 1),
                              ("mixed", 13, 1), ("mixed", 15, 1), ("mixed", 14, 1)]
    assert ops.nonportable_clusters == {(key, "mixed")}  # type: ignore[attr-defined]
    with pytest.raises(CudaError) as ei:
        s.func_set_attr(0, key, "mixed", 99, 1)
    assert ei.value.code == Err.INVALID_VALUE
    drv.calls.clear()
    s.launch(0, key, "mixed", [1, 1, 1], [64, 1, 1], 80 << 10, None, bytes(72))  # within what was set
    assert drv.calls == ["cuLaunchKernel"]
