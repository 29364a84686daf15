"""Discovery parsing: NVML's answers (through an object with pynvml's functions, as nvidia-ml-py returns
them), the child's attribute JSON turned into cudaDeviceProp, and CUDA devices matched to NVML's by UUID.
The NVML object stands in for the driver only; what is tested is our parsing."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from gpushim.abi import device_attribute_ids
from gpushim.backends.cuda import discovery
from gpushim.backends.emulator.models import MODELS, device_attributes, device_props


class FakeNvmlError(Exception):
    pass


class FakeNvml:
    """pynvml's calls used by discovery, answering like nvidia-ml-py 12/13 on a 2-GPU H100 machine."""

    NVMLError = FakeNvmlError

    def __init__(self, gpus: list[dict], cuda: int = 12080, driver: str = "570.124.06", v2: bool = True) -> None:
        self.gpus = gpus
        self.cuda = cuda
        self.driver = driver
        self.inits = 0
        if not v2:
            self.nvmlSystemGetCudaDriverVersion_v2 = None  # type: ignore[assignment]

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.inits -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> dict:
        return self.gpus[i]

    def nvmlDeviceGetName(self, h: dict) -> str:
        return h["name"]

    def nvmlDeviceGetUUID(self, h: dict) -> str:
        return h["uuid"]

    def nvmlDeviceGetMemoryInfo(self, h: dict) -> SimpleNamespace:
        return SimpleNamespace(total=h["mem"], free=h["mem"] // 2, used=h["mem"] // 2)

    def nvmlDeviceGetCudaComputeCapability(self, h: dict) -> tuple[int, int]:
        return h["cc"]

    def nvmlDeviceGetPciInfo(self, h: dict) -> SimpleNamespace:
        return SimpleNamespace(domain=0, bus=h["bus"], device=0, busId=b"00000000:%02X:00.0" % h["bus"])

    def nvmlDeviceGetMigMode(self, h: dict) -> list[int]:
        if h.get("mig") is None:
            raise FakeNvmlError("Not Supported")
        return [h["mig"], h["mig"]]


UUID0 = "GPU-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"
UUID1 = "GPU-11111111-2222-3333-4444-555555555555"
GPUS = [
    {"name": "NVIDIA H100 80GB HBM3", "uuid": UUID0, "mem": 85_520_809_984, "cc": (9, 0), "bus": 0x1B, "mig": 0},
    {"name": "NVIDIA H100 80GB HBM3", "uuid": UUID1, "mem": 85_520_809_984, "cc": (9, 0), "bus": 0x3B, "mig": 1},
]


def test_nvml_snapshot() -> None:
    nvml = FakeNvml(GPUS)
    snap = discovery.nvml_snapshot(nvml)
    assert nvml.inits == 0  # shut down again
    assert snap.driver_version == "570.124.06" and snap.cuda_version == 12080
    assert [g.uuid for g in snap.gpus] == [UUID0, UUID1]
    g = snap.gpus[1]
    assert g.name == "NVIDIA H100 80GB HBM3" and g.memory_total == 85_520_809_984
    assert g.compute_capability == (9, 0) and g.pci_bus_id == "0000:3b:00.0" and g.mig_enabled is True
    assert snap.gpus[0].mig_enabled is False


def test_nvml_without_mig_or_v2() -> None:
    gpus = [dict(GPUS[0], mig=None, name=b"Tesla T4", cc=(7, 5))]
    snap = discovery.nvml_snapshot(FakeNvml(gpus, cuda=12020, driver="535.104.05", v2=False))
    assert snap.cuda_version == 12020
    assert snap.gpus[0].mig_enabled is None and snap.gpus[0].name == "Tesla T4"


def test_uuid_round_trip() -> None:
    raw = discovery.uuid_bytes(UUID0)
    assert len(raw) == 16 and raw.hex() == "0b1c2d3e4f5061728394a5b6c7d8e9f0"
    assert discovery.uuid_text(raw) == UUID0
    assert re.fullmatch(r"MIG-[0-9a-f-]{36}", discovery.uuid_text(raw, "MIG-"))
    with pytest.raises(ValueError):
        discovery.uuid_bytes("GPU-1234")


def _raw(model: str, ordinal: int, uuid: str, bus: str) -> dict:
    """The child's JSON for one device whose attributes are those the emulator derives for `model`."""
    m = MODELS[model]
    props = device_props(m, ordinal, m.total_mem)
    attrs = device_attributes(props)
    return {"ordinal": ordinal, "name": m.name, "uuid": discovery.uuid_bytes(uuid).hex(), "total_mem": m.total_mem,
            "pci_bus_id": bus, "attributes": {str(k): v for k, v in attrs.items()}}


def test_props_from_attributes_match_the_emulators_props() -> None:
    """Emulated H100 props -> cudaDevAttr values -> props again: every field the attributes carry survives."""
    m = MODELS["h100"]
    want = device_props(m, 0, m.total_mem)
    got = discovery.props_from_driver(_raw("h100", 0, UUID0, "0000:1B:00.0"))
    assert set(got) == set(want)
    derivable = {k for k in want if k not in ("uuid", "luid", "pciBusID")}
    covered_by_attrs = {"maxTexture1DMipmap", "maxTexture1DLinear", "maxTexture2DMipmap", "maxTexture2DLinear",
                        "maxTexture2DGather", "maxTexture3DAlt", "maxTextureCubemap", "maxTexture1DLayered",
                        "maxTexture2DLayered", "maxTextureCubemapLayered", "maxSurface3D", "maxSurface1DLayered",
                        "maxSurface2DLayered", "maxSurfaceCubemap", "maxSurfaceCubemapLayered",
                        "cooperativeMultiDeviceLaunch", "ipcEventSupported", "unifiedFunctionPointers"}
    # the emulator derives no attribute for these, so the round trip leaves them zero
    mismatched = {k: (got[k], want[k]) for k in derivable - covered_by_attrs if got[k] != want[k]}
    assert not mismatched
    assert got["name"] == m.name and got["totalGlobalMem"] == m.total_mem
    assert got["uuid"] == discovery.uuid_bytes(UUID0) and got["major"] == 9 and got["multiProcessorCount"] == 132


def test_props_from_array_attributes() -> None:
    raw = _raw("a100", 0, UUID0, "0000:1b:00.0")
    raw["attributes"].update({"45": 32768, "46": 16384, "70": 131072, "71": 65000, "72": 2097120, "77": 32768})
    p = discovery.props_from_driver(raw)
    assert p["maxTexture2DGather"] == [32768, 16384]
    assert p["maxTexture2DLinear"] == [131072, 65000, 2097120]
    assert p["maxTexture1DMipmap"] == 32768


def test_match_by_uuid_not_order() -> None:
    snap = discovery.nvml_snapshot(FakeNvml(GPUS))
    # CUDA enumerates the second NVML GPU first (CUDA_DEVICE_ORDER=FASTEST_FIRST, CUDA_VISIBLE_DEVICES=1,0)
    raws = [_raw("h100", 0, UUID1, "0000:3B:00.0"), _raw("h100", 1, UUID0, "0000:1B:00.0")]
    matched = discovery.match_nvml(raws, snap)
    assert [g.index for g in matched] == [1, 0]  # type: ignore[union-attr]
    infos = [discovery.device_info_from_driver(r, g) for r, g in zip(raws, matched, strict=True)]
    assert infos[0].extra["mig_enabled"] is True and infos[0].pci_bus_id == "0000:3b:00.0"
    assert infos[0].attributes[device_attribute_ids()["cudaDevAttrComputeCapabilityMajor"]] == 9
    # a device NVML does not list (MIG instance UUIDs differ) is matched by its PCI address
    raws[1]["uuid"] = "ff" * 16
    assert discovery.match_nvml(raws, snap)[1].index == 0  # type: ignore[union-attr]
    raws[1]["pci_bus_id"] = "0000:99:00.0"
    assert discovery.match_nvml(raws, snap)[1] is None


def test_runtime_attribute_numbers_are_the_drivers() -> None:
    """cudaDevAttr values are passed to cuDeviceGetAttribute unchanged: the enums must agree by meaning."""
    driver = pytest.importorskip("cuda.bindings.driver")
    by_value = {int(m): m.name for m in driver.CUdevice_attribute}

    def norm(s: str) -> str:
        s = re.sub(r"[^a-z0-9]", "", s.lower())
        for long, short in (("maximum", "max"), ("alternate", "alt"), ("memorypool", "mempool"), ("is", "")):
            s = s.replace(long, short)
        return s

    spot = {"cudaDevAttrMaxThreadsPerBlock": "MAX_THREADS_PER_BLOCK",
            "cudaDevAttrMultiProcessorCount": "MULTIPROCESSOR_COUNT",
            "cudaDevAttrComputeCapabilityMajor": "COMPUTE_CAPABILITY_MAJOR",
            "cudaDevAttrMaxSharedMemoryPerBlockOptin": "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
            "cudaDevAttrL2CacheSize": "L2_CACHE_SIZE", "cudaDevAttrClusterLaunch": "CLUSTER_LAUNCH",
            "cudaDevAttrMemoryPoolsSupported": "MEMORY_POOLS_SUPPORTED", "cudaDevAttrHostNumaId": "HOST_NUMA_ID"}
    ids = device_attribute_ids()
    for rt, drv in spot.items():
        assert norm(by_value[ids[rt]]) == norm("CU_DEVICE_ATTRIBUTE_" + drv)
    # every other name agrees once spelled alike, except reserved runtime slots and two spellings
    differ = [n for n, v in ids.items() if v in by_value and not n.startswith(("cudaDevAttrReserved", "cudaDevAttrMax"))
              and norm(n.removeprefix("cudaDevAttr")) != norm(by_value[v].removeprefix("CU_DEVICE_ATTRIBUTE_"))]
    assert sorted(differ) == ["cudaDevAttrHostRegisterReadOnlySupported", "cudaDevAttrIpcEventSupport"]
