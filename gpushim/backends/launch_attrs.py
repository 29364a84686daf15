"""Launch attributes of cuLaunchKernelEx / cudaLaunchKernelEx as the LAUNCH_EX operation carries them.

On the wire each attribute is four unsigned integers [id, a, b, c] (shim/gs_launch_attrs.c writes them from
the 72-byte CUlaunchAttribute; the runtime's cudaLaunchAttribute has the same ids and layout):

  id  CU_LAUNCH_ATTRIBUTE_...              a, b, c
  1   ACCESS_POLICY_WINDOW                 base_ptr, num_bytes, hitRatio's float bits | hitProp << 32 | missProp << 48
  2   COOPERATIVE                          value
  3   SYNCHRONIZATION_POLICY               value
  4   CLUSTER_DIMENSION                    x, y, z
  5   CLUSTER_SCHEDULING_POLICY_PREFERENCE value
  6   PROGRAMMATIC_STREAM_SERIALIZATION    value
  7   PROGRAMMATIC_EVENT                   event (a session handle), flags, triggerAtBlockStart
  8   PRIORITY                             value as a 32-bit two's complement int
  9   MEM_SYNC_DOMAIN_MAP                  default_, remote
  10  MEM_SYNC_DOMAIN                      value
  11  PREFERRED_CLUSTER_DIMENSION          x, y, z
  12  LAUNCH_COMPLETION_EVENT              event, flags
  14  PREFERRED_SHARED_MEMORY_CARVEOUT     value
  16  NVLINK_UTIL_CENTRIC_SCHEDULING       value
  17  PORTABLE_CLUSTER_SIZE_MODE           value
  18  SHARED_MEMORY_MODE                   value

(13, DEVICE_UPDATABLE_KERNEL_NODE, is graphs-only: CUDA refuses it on a launch, and so does the shim.)

The session records the two events itself, after the launch on its stream: an event recorded when the
kernel has completed satisfies both attributes' guarantees (a programmatic event may trigger earlier on a
GPU, never later than completion). Every other attribute goes to the backend: the cuda backend passes them
to cuLaunchKernelEx; the emulator checks the cluster shape as CUDA does and ignores the rest, which change
scheduling and caching on a GPU, not results (its kernels of a stream run one after another, so a
programmatic dependent launch's griddepcontrol.wait is met when its grid starts).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from gpushim.cuda_errors import CudaError, Err

ACCESS_POLICY_WINDOW, COOPERATIVE, SYNCHRONIZATION_POLICY, CLUSTER_DIMENSION = 1, 2, 3, 4
CLUSTER_SCHEDULING_POLICY_PREFERENCE, PROGRAMMATIC_STREAM_SERIALIZATION, PROGRAMMATIC_EVENT = 5, 6, 7
PRIORITY, MEM_SYNC_DOMAIN_MAP, MEM_SYNC_DOMAIN, PREFERRED_CLUSTER_DIMENSION = 8, 9, 10, 11
LAUNCH_COMPLETION_EVENT, PREFERRED_SHARED_MEMORY_CARVEOUT, NVLINK_UTIL_CENTRIC_SCHEDULING = 12, 14, 16
PORTABLE_CLUSTER_SIZE_MODE, SHARED_MEMORY_MODE = 17, 18

# attribute id -> cuda.bindings' CUlaunchAttributeValue field of a single integer value
SCALAR = {COOPERATIVE: "cooperative", SYNCHRONIZATION_POLICY: "syncPolicy",
          CLUSTER_SCHEDULING_POLICY_PREFERENCE: "clusterSchedulingPolicyPreference",
          PROGRAMMATIC_STREAM_SERIALIZATION: "programmaticStreamSerializationAllowed", PRIORITY: "priority",
          MEM_SYNC_DOMAIN: "memSyncDomain", PREFERRED_SHARED_MEMORY_CARVEOUT: "sharedMemCarveout",
          NVLINK_UTIL_CENTRIC_SCHEDULING: "nvlinkUtilCentricScheduling",
          PORTABLE_CLUSTER_SIZE_MODE: "portableClusterSizeMode", SHARED_MEMORY_MODE: "sharedMemoryMode"}
EVENTS = {PROGRAMMATIC_EVENT, LAUNCH_COMPLETION_EVENT}
KNOWN = set(SCALAR) | EVENTS | {ACCESS_POLICY_WINDOW, CLUSTER_DIMENSION, MEM_SYNC_DOMAIN_MAP,
                                PREFERRED_CLUSTER_DIMENSION}
# the largest cluster every GPU with clusters runs (CUDA Programming Guide, "Thread Block Clusters": "a
# maximum of 8 thread blocks in a cluster is supported as a portable cluster size"); kernels that allow a
# non-portable size may use up to 16 on compute capability 9.0
PORTABLE_CLUSTER, NON_PORTABLE_CLUSTER = 8, 16
FUNC_ATTR_NON_PORTABLE_CLUSTER = 14  # CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (the runtime's is 14 too)


@dataclass(frozen=True)
class Attr:
    id: int
    a: int
    b: int = 0
    c: int = 0

    @property
    def signed(self) -> int:
        """a as the 32-bit int it was (priority)."""
        return struct.unpack("<i", struct.pack("<I", self.a & 0xFFFF_FFFF))[0]

    @property
    def hit_ratio(self) -> float:
        return struct.unpack("<f", struct.pack("<I", self.c & 0xFFFF_FFFF))[0]


@dataclass
class LaunchAttrs:
    attrs: list[Attr] = field(default_factory=list)
    # the application allowed the kernel a non-portable cluster size (cudaFuncSetAttribute, attribute 14)
    non_portable: bool = False

    def get(self, id_: int) -> Attr | None:
        """The last attribute with this id (CUDA: a later entry of the same id wins)."""
        found = None
        for a in self.attrs:
            if a.id == id_:
                found = a
        return found

    @property
    def cluster(self) -> tuple[int, int, int] | None:
        a = self.get(CLUSTER_DIMENSION)
        return (a.a, a.b, a.c) if a else None

    def without_events(self) -> LaunchAttrs:
        return LaunchAttrs([a for a in self.attrs if a.id not in EVENTS], self.non_portable)


def parse(flat: list[int]) -> LaunchAttrs:
    """LAUNCH_EX's attrs argument (the schema has checked it is a list of unsigned 64-bit integers)."""
    if len(flat) % 4:
        raise CudaError(Err.INVALID_VALUE, f"LAUNCH_EX: attrs holds {len(flat)} integers, not 4 per attribute")
    out = []
    for i in range(0, len(flat), 4):
        id_, a, b, c = flat[i:i + 4]
        if id_ not in KNOWN:
            raise CudaError(Err.INVALID_VALUE, f"launch attribute {id_} is not one gpushim knows")
        if id_ in (CLUSTER_DIMENSION, PREFERRED_CLUSTER_DIMENSION) and max(a, b, c) > 0xFFFF_FFFF:
            raise CudaError(Err.INVALID_VALUE, f"launch attribute {id_}: cluster dimensions {a, b, c} out of range")
        if id_ in SCALAR and a > 0xFFFF_FFFF:
            raise CudaError(Err.INVALID_VALUE, f"launch attribute {id_}: value {a} is not a 32-bit integer")
        if id_ in (COOPERATIVE, PROGRAMMATIC_STREAM_SERIALIZATION) and a > 1:
            raise CudaError(Err.INVALID_VALUE, f"launch attribute {id_}: value {a} is not 0 or 1")
        out.append(Attr(id_, a, b, c))
    return LaunchAttrs(out)


def check_cluster(attrs: LaunchAttrs | None, grid: list[int], cluster_launch: bool,
                  fn_attrs: dict[str, Any]) -> None:
    """CUDA's rules for a launch's cluster shape (CUDA Programming Guide, "Thread Block Clusters"; cuda.h,
    CUDA_ERROR_INVALID_CLUSTER_SIZE "a kernel launch error due to cluster misconfiguration"): each
    dimension at least 1 and dividing the grid's, at most 8 blocks (16 where the kernel allows a
    non-portable size), equal to the kernel's required cluster dimensions where it has them, and only on
    a device that launches clusters."""
    dims = attrs.cluster if attrs else None
    req = (fn_attrs.get("requiredClusterWidth", 0), fn_attrs.get("requiredClusterHeight", 0),
           fn_attrs.get("requiredClusterDepth", 0))
    if dims is None:
        return
    if not cluster_launch:
        raise CudaError(Err.NOT_SUPPORTED, "this device does not launch thread block clusters (compute "
                                           "capability 9.0 and newer do)")
    if min(dims) < 1:
        raise CudaError(Err.INVALID_CLUSTER_SIZE, f"cluster dimensions {dims}: each must be at least 1")
    if any(g % d for g, d in zip(grid, dims, strict=True)):
        raise CudaError(Err.INVALID_CLUSTER_SIZE, f"grid {list(grid)} is not a multiple of the cluster "
                                                  f"dimensions {list(dims)}")
    allowed = (attrs is not None and attrs.non_portable) or fn_attrs.get("nonPortableClusterSizeAllowed")
    limit = NON_PORTABLE_CLUSTER if allowed else PORTABLE_CLUSTER
    if dims[0] * dims[1] * dims[2] > limit:
        raise CudaError(Err.INVALID_CLUSTER_SIZE, f"a cluster of {dims[0] * dims[1] * dims[2]} blocks exceeds "
                                                  f"the {limit} this kernel may have")
    if req[0] > 0 and tuple(req) != tuple(dims):
        raise CudaError(Err.INVALID_CLUSTER_SIZE, f"cluster dimensions {list(dims)} differ from the kernel's "
                                                  f"required {list(req)}")
