"""Hardware discovery for the cuda backend, without initialising CUDA in the calling process.

Two sources, each where it is allowed:
- NVML (nvidia-ml-py) in the supervisor: GPUs, names, UUIDs, memory, compute capability, PCI addresses,
  driver version, the CUDA driver API version and MIG mode. NVML never creates a CUDA context.
- The driver itself, in a short-lived child process (`python -m gpushim.backends.cuda.discovery`): CUDA's
  own device order and every cuDeviceGetAttribute value, which cudaDeviceProp needs and NVML lacks
  (multiprocessors, shared memory and thread limits, texture limits...). The supervisor must never
  initialise CUDA (its workers are forked from it, and a forked CUDA context is unusable), so reading
  attributes there would need a worker anyway; a child that exits after printing JSON costs one CUDA
  initialisation at server start and makes `gpushim devices`, STATUS and every session see the same exact
  properties. CUDA's ordinals (what a worker passes to cuDeviceGet) are the server's ordinals; NVML's
  facts are matched to them by UUID (NVML enumerates in PCI order and ignores CUDA_VISIBLE_DEVICES).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from gpushim.abi import device_attribute_ids
from gpushim.backends.base import DeviceInfo

CHILD_TIMEOUT_S = 120.0


# -- NVML ------------------------------------------------------------------------------------------------
@dataclass
class NvmlGpu:
    index: int
    name: str
    uuid: str  # "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (or "MIG-..." for a MIG instance)
    memory_total: int
    compute_capability: tuple[int, int]
    pci_bus_id: str  # "0000:3b:00.0"
    mig_enabled: bool | None  # None: the GPU has no MIG support
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class NvmlSnapshot:
    driver_version: str  # e.g. "570.124.06"
    cuda_version: int  # CUDA driver API version, e.g. 12080
    gpus: list[NvmlGpu]


def _text(v: Any) -> str:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).split(b"\0", 1)[0].decode(errors="replace")
    return str(v).split("\0", 1)[0]


def uuid_bytes(text: str) -> bytes:
    """'GPU-12345678-9abc-def0-1234-56789abcdef0' -> the 16 bytes CUDA reports (cuDeviceGetUuid)."""
    hexpart = text.split("-", 1)[1] if text[:4] in ("GPU-", "MIG-") else text
    raw = bytes.fromhex(hexpart.replace("-", ""))
    if len(raw) != 16:
        raise ValueError(f"not a GPU UUID: {text!r}")
    return raw


def uuid_text(raw: bytes, prefix: str = "GPU-") -> str:
    h = raw.hex()
    return f"{prefix}{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def nvml_snapshot(nvml: Any = None) -> NvmlSnapshot:
    """What NVML says about this machine. `nvml` is the pynvml module (tests pass an object with the same
    functions); raises the module's NVMLError when the driver cannot be reached."""
    if nvml is None:
        import pynvml as nvml  # nvidia-ml-py
    nvml.nvmlInit()
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        v2 = getattr(nvml, "nvmlSystemGetCudaDriverVersion_v2", None)  # absent from old nvidia-ml-py
        try:
            cuda_version = int(v2()) if callable(v2) else int(nvml.nvmlSystemGetCudaDriverVersion())
        except nvml.NVMLError:
            cuda_version = int(nvml.nvmlSystemGetCudaDriverVersion())
        gpus = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            pci = nvml.nvmlDeviceGetPciInfo(h)
            bus_id = f"{int(pci.domain):04x}:{int(pci.bus):02x}:{int(pci.device):02x}.0"
            try:
                mig: bool | None = bool(nvml.nvmlDeviceGetMigMode(h)[0])
            except nvml.NVMLError:
                mig = None  # NVML_ERROR_NOT_SUPPORTED: no MIG on this GPU
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(h)
            gpus.append(NvmlGpu(
                index=i,
                name=_text(nvml.nvmlDeviceGetName(h)),
                uuid=_text(nvml.nvmlDeviceGetUUID(h)),
                memory_total=int(nvml.nvmlDeviceGetMemoryInfo(h).total),
                compute_capability=(int(major), int(minor)),
                pci_bus_id=bus_id,
                mig_enabled=mig,
            ))
        return NvmlSnapshot(driver, cuda_version, gpus)
    finally:
        nvml.nvmlShutdown()


# -- the driver, in a child process -----------------------------------------------------------------------
def _driver_devices() -> dict[str, Any]:
    """Runs in the child: initialises CUDA and reads every device's identity and attributes."""
    from cuda.bindings import driver as cu

    def ok(res: tuple, what: str) -> Any:
        err = res[0]
        if int(err) != 0:
            raise RuntimeError(f"{what} failed: {getattr(err, 'name', int(err))}")
        return res[1] if len(res) == 2 else res[1:]

    ok(cu.cuInit(0), "cuInit")
    version = int(ok(cu.cuDriverGetVersion(), "cuDriverGetVersion"))
    known = {int(m) for m in cu.CUdevice_attribute}
    devices = []
    for ordinal in range(int(ok(cu.cuDeviceGetCount(), "cuDeviceGetCount"))):
        dev = ok(cu.cuDeviceGet(ordinal), "cuDeviceGet")
        attrs: dict[str, int] = {}
        for name, value in device_attribute_ids().items():
            if value not in known or name == "cudaDevAttrMax":
                continue
            err, v = cu.cuDeviceGetAttribute(cu.CUdevice_attribute(value), dev)
            if int(err) == 0:  # an attribute newer than this driver answers CUDA_ERROR_INVALID_VALUE
                attrs[str(value)] = int(v)
        devices.append({
            "ordinal": ordinal,
            "name": _text(ok(cu.cuDeviceGetName(256, dev), "cuDeviceGetName")),
            "uuid": bytes(ok(cu.cuDeviceGetUuid(dev), "cuDeviceGetUuid").bytes).hex(),
            "total_mem": int(ok(cu.cuDeviceTotalMem(dev), "cuDeviceTotalMem")),
            "pci_bus_id": _text(ok(cu.cuDeviceGetPCIBusId(64, dev), "cuDeviceGetPCIBusId")),
            "attributes": attrs,
        })
    return {"driver_version": version, "devices": devices}


def read_driver_devices(timeout: float = CHILD_TIMEOUT_S) -> dict[str, Any]:
    """The child's answer: {"driver_version": 12080, "devices": [...]}. Raises RuntimeError with the
    child's own message when CUDA cannot be initialised."""
    try:
        proc = subprocess.run([sys.executable, "-m", "gpushim.backends.cuda.discovery"], capture_output=True,
                              text=True, timeout=timeout, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"reading the GPUs' attributes took longer than {timeout:.0f} s") from None
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines() if ln.strip()]
        raise RuntimeError(lines[-1] if lines else f"the discovery process exited with {proc.returncode}")
    return json.loads(proc.stdout)


# -- cudaDeviceProp from attributes ------------------------------------------------------------------------
# Properties made of several attributes (cudaDevAttr values; they equal the CU_DEVICE_ATTRIBUTE_* values).
_ARRAY_PROPS: dict[str, list[int]] = {
    "maxThreadsDim": [2, 3, 4],
    "maxGridSize": [5, 6, 7],
    "maxTexture2D": [22, 23],
    "maxTexture3D": [24, 25, 26],
    "maxTexture2DLayered": [27, 28, 29],
    "maxTexture1DLayered": [42, 43],
    "maxTexture2DGather": [45, 46],
    "maxTexture3DAlt": [47, 48, 49],
    "maxTextureCubemapLayered": [53, 54],
    "maxSurface2D": [56, 57],
    "maxSurface3D": [58, 59, 60],
    "maxSurface1DLayered": [61, 62],
    "maxSurface2DLayered": [63, 64, 65],
    "maxSurfaceCubemapLayered": [67, 68],
    "maxTexture2DLinear": [70, 71, 72],
    "maxTexture2DMipmap": [73, 74],
}
# Scalar properties whose attribute the emulator's name matching does not find.
_SCALAR_PROPS: dict[str, int] = {
    "maxTexture1DMipmap": 77,
    "maxTexture1DLinear": 69,
    "maxTextureCubemap": 52,
    "maxSurfaceCubemap": 66,
    "cooperativeMultiDeviceLaunch": 96,
    "ipcEventSupported": 125,
    "unifiedFunctionPointers": 129,
}


def _scalar_prop_attributes(template: dict[str, Any]) -> dict[str, int]:
    """prop -> cudaDevAttr value for every scalar property with an attribute of its own, by the emulator's
    mapping (gpushim.backends.emulator.models) so both backends fill cudaDeviceProp the same way."""
    from gpushim.backends.emulator.models import _ATTR_TO_PROP

    by_lower = {k.lower(): k for k in template}
    out: dict[str, int] = {}
    for name, value in device_attribute_ids().items():
        short = name.removeprefix("cudaDevAttr")
        target = _ATTR_TO_PROP.get(short) or by_lower.get(short.lower())
        if isinstance(target, str) and isinstance(template.get(target), int):
            out.setdefault(target, value)
    out.update(_SCALAR_PROPS)
    return out


def props_template() -> dict[str, Any]:
    """Every cudaDeviceProp field any runtime version has, zeroed, with the emulator's shapes."""
    from gpushim.backends.emulator.models import MODELS, device_props

    t = device_props(next(iter(MODELS.values())), 0, 0)
    return {k: ([0] * len(v) if isinstance(v, list) else b"\0" * len(v) if isinstance(v, bytes)
                else "" if isinstance(v, str) else 0) for k, v in t.items()}


def props_from_driver(raw: dict[str, Any]) -> dict[str, Any]:
    """cudaDeviceProp fields from one device of the child's answer."""
    attrs = {int(k): int(v) for k, v in raw["attributes"].items()}
    props = props_template()
    for prop, attr in _scalar_prop_attributes(props).items():
        if attr in attrs:
            props[prop] = attrs[attr]
    for prop, ids in _ARRAY_PROPS.items():
        props[prop] = [attrs.get(a, 0) for a in ids]
    props["name"] = raw["name"]
    props["uuid"] = bytes.fromhex(raw["uuid"])
    props["totalGlobalMem"] = int(raw["total_mem"])
    props["luid"] = b"\0" * 8  # Windows only
    props["luidDeviceNodeMask"] = 0
    props["deviceOverlap"] = attrs.get(15, 1)
    return props


def device_info_from_driver(raw: dict[str, Any], nvml_gpu: NvmlGpu | None) -> DeviceInfo:
    props = props_from_driver(raw)
    attrs = {int(k): int(v) for k, v in raw["attributes"].items()}
    extra: dict[str, Any] = {}
    if nvml_gpu is not None:
        extra = {"nvml_index": nvml_gpu.index, "mig_enabled": nvml_gpu.mig_enabled, "nvml_name": nvml_gpu.name}
    return DeviceInfo(
        ordinal=int(raw["ordinal"]),
        name=raw["name"],
        props=props,
        attributes=attrs,
        uuid=props["uuid"],
        pci_bus_id=raw["pci_bus_id"].lower(),
        # cuCtxGetStreamPriorityRange needs a context; the worker reads it when it opens one.
        priority_range=(0, -5) if attrs.get(78, 1) else (0, 0),
        extra=extra,
    )


def match_nvml(raw_devices: list[dict[str, Any]], snap: NvmlSnapshot | None) -> list[NvmlGpu | None]:
    """NVML's entry for each CUDA device, by UUID (then by PCI address); None where there is none."""
    if snap is None:
        return [None] * len(raw_devices)
    by_uuid = {}
    for g in snap.gpus:
        try:
            by_uuid[uuid_bytes(g.uuid)] = g
        except ValueError:
            pass
    by_bus = {g.pci_bus_id: g for g in snap.gpus}
    out: list[NvmlGpu | None] = []
    for raw in raw_devices:
        g = by_uuid.get(bytes.fromhex(raw["uuid"])) or by_bus.get(_norm_bus(raw["pci_bus_id"]))
        out.append(g)
    return out


def _norm_bus(bus: str) -> str:
    """'00000000:3B:00.0' or '0000:3b:00.0' -> '0000:3b:00.0'."""
    parts = bus.lower().split(":")
    if len(parts) == 3:
        parts[0] = f"{int(parts[0], 16):04x}"
    return ":".join(parts)


def main() -> int:
    try:
        print(json.dumps(_driver_devices()))
    except Exception as e:  # the parent shows the last line of stderr
        print(f"CUDA could not be initialised: {e.__class__.__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
