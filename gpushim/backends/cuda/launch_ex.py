"""cuLaunchKernelEx's configuration from LAUNCH_EX's attributes (gpushim/backends/launch_attrs.py), built
with cuda.bindings.driver's CUlaunchConfig / CUlaunchAttribute (field names as in cuda.h's
CUlaunchAttributeValue). The two event attributes never get here: the session records those events."""

from __future__ import annotations

from typing import Any

from gpushim.backends import launch_attrs as la


def _attribute(cu: Any, a: la.Attr) -> Any:
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID(a.id)
    v = attr.value
    if a.id in la.SCALAR:
        setattr(v, la.SCALAR[a.id], a.signed if a.id == la.PRIORITY else a.a)
    elif a.id in (la.CLUSTER_DIMENSION, la.PREFERRED_CLUSTER_DIMENSION):
        dims = v.clusterDim if a.id == la.CLUSTER_DIMENSION else v.preferredClusterDim
        dims.x, dims.y, dims.z = a.a, a.b, a.c
    elif a.id == la.ACCESS_POLICY_WINDOW:
        w = v.accessPolicyWindow
        w.base_ptr, w.num_bytes, w.hitRatio = a.a, a.b, a.hit_ratio
        w.hitProp = cu.CUaccessProperty((a.c >> 32) & 0xFFFF)
        w.missProp = cu.CUaccessProperty((a.c >> 48) & 0xFFFF)
    elif a.id == la.MEM_SYNC_DOMAIN_MAP:
        v.memSyncDomainMap.default_, v.memSyncDomainMap.remote = a.a, a.b
    else:  # parse() admits no other id
        raise AssertionError(f"launch attribute {a.id}")
    return attr


def launch_config(cu: Any, attrs: la.LaunchAttrs, grid: list[int], block: list[int], shared: int,
                  stream: Any) -> Any:
    cfg = cu.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
    cfg.sharedMemBytes = shared
    cfg.hStream = stream
    cfg.attrs = [_attribute(cu, a) for a in attrs.attrs]
    cfg.numAttrs = len(attrs.attrs)
    return cfg
