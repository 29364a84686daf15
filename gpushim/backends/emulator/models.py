"""GPU models the emulator can present: the cudaDeviceProp fields of every runtime version, and the
cudaDeviceAttr values derived from them. Figures follow NVIDIA's published specifications and what
deviceQuery prints on those boards."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from gpushim.abi import device_attribute_ids
from gpushim.backends.base import DeviceInfo

GiB = 1 << 30


@dataclass(frozen=True)
class GpuModel:
    key: str
    name: str
    major: int
    minor: int
    total_mem: int
    sms: int
    clock_khz: int
    mem_clock_khz: int
    bus_width: int
    l2: int
    smem_per_sm: int
    smem_optin: int
    threads_per_sm: int
    blocks_per_sm: int
    async_engines: int = 2
    ecc: int = 1
    priority_range: tuple[int, int] = (0, -5)


MODELS: dict[str, GpuModel] = {
    m.key: m
    for m in (
        GpuModel("h100", "NVIDIA H100 80GB HBM3", 9, 0, 85_520_809_984, 132, 1_980_000, 2_619_000, 5120,
                 50 * 1024 * 1024, 233_472, 232_448, 2048, 32, async_engines=5),
        GpuModel("h200", "NVIDIA H200", 9, 0, 150_754_820_096, 132, 1_980_000, 3_201_000, 6144,
                 60 * 1024 * 1024, 233_472, 232_448, 2048, 32, async_engines=5),
        GpuModel("a100", "NVIDIA A100-SXM4-40GB", 8, 0, 42_298_834_944, 108, 1_410_000, 1_215_000, 5120,
                 40 * 1024 * 1024, 167_936, 166_912, 2048, 32, async_engines=3),
        GpuModel("l4", "NVIDIA L4", 8, 9, 23_661_969_408, 58, 2_040_000, 6_251_000, 192,
                 48 * 1024 * 1024, 102_400, 101_376, 1536, 24, async_engines=2),
        # Blackwell, compute capability 12.0: the oldest device that loads compute_120 PTX (CuPy's CUB module
        # carries no other). 188 SMs, 96 GB GDDR7 on a 512-bit bus, 128 MB L2; CC 12.0 limits (CUDA C++
        # Programming Guide, "Compute Capabilities"): 100 KB shared memory per SM, 99 KB per block, 1536
        # threads and 32 blocks per SM. totalGlobalMem is the 96 GB less what the driver keeps, approximately.
        GpuModel("rtxpro6000", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 12, 0, 101_970_000_000, 188,
                 2_617_000, 14_001_000, 512, 128 * 1024 * 1024, 102_400, 101_376, 1536, 32, ecc=0),
        GpuModel("t4", "Tesla T4", 7, 5, 15_655_829_504, 40, 1_590_000, 5_001_000, 256,
                 4 * 1024 * 1024, 65_536, 65_536, 1024, 16, async_engines=3),
    )
}
DEFAULT_MODEL = "h100"


def find_model(name: str) -> GpuModel:
    key = name.lower().replace("nvidia", "").replace("-", "").replace(" ", "")
    for m in MODELS.values():
        if key in (m.key, m.name.lower().replace("nvidia", "").replace("-", "").replace(" ", "")):
            return m
    raise KeyError(f"unknown GPU model '{name}'; known: {', '.join(sorted(MODELS))}")


def device_props(m: GpuModel, ordinal: int, capacity: int) -> dict[str, Any]:
    """Every cudaDeviceProp field of 11.x, 12.x and 13.x; the shim writes those its caller's ABI has."""
    uuid = hashlib.sha256(f"gpushim-emulated-{m.key}-{ordinal}".encode()).digest()[:16]
    return {
        "name": m.name,
        "uuid": uuid,
        "luid": b"\0" * 8,
        "luidDeviceNodeMask": 0,
        "totalGlobalMem": capacity,
        "sharedMemPerBlock": 49_152,
        "regsPerBlock": 65_536,
        "warpSize": 32,
        "memPitch": 2_147_483_647,
        "maxThreadsPerBlock": 1024,
        "maxThreadsDim": [1024, 1024, 64],
        "maxGridSize": [2_147_483_647, 65_535, 65_535],
        "clockRate": m.clock_khz,
        "totalConstMem": 65_536,
        "major": m.major,
        "minor": m.minor,
        "textureAlignment": 512,
        "texturePitchAlignment": 32,
        "deviceOverlap": 1,
        "multiProcessorCount": m.sms,
        "kernelExecTimeoutEnabled": 0,
        "integrated": 0,
        "canMapHostMemory": 1,
        "computeMode": 0,
        "maxTexture1D": 131_072,
        "maxTexture1DMipmap": 32_768,
        "maxTexture1DLinear": 268_435_456,
        "maxTexture2D": [131_072, 65_536],
        "maxTexture2DMipmap": [32_768, 32_768],
        "maxTexture2DLinear": [131_072, 65_000, 2_097_120],
        "maxTexture2DGather": [32_768, 32_768],
        "maxTexture3D": [16_384, 16_384, 16_384],
        "maxTexture3DAlt": [8192, 8192, 32_768],
        "maxTextureCubemap": 32_768,
        "maxTexture1DLayered": [32_768, 2048],
        "maxTexture2DLayered": [32_768, 32_768, 2048],
        "maxTextureCubemapLayered": [32_768, 2046],
        "maxSurface1D": 32_768,
        "maxSurface2D": [131_072, 65_536],
        "maxSurface3D": [16_384, 16_384, 16_384],
        "maxSurface1DLayered": [32_768, 2048],
        "maxSurface2DLayered": [32_768, 32_768, 2048],
        "maxSurfaceCubemap": 32_768,
        "maxSurfaceCubemapLayered": [32_768, 2046],
        "surfaceAlignment": 512,
        "concurrentKernels": 1,
        "ECCEnabled": m.ecc,
        "pciBusID": 0x10 + ordinal,
        "pciDeviceID": 0,
        "pciDomainID": 0,
        "tccDriver": 0,
        "asyncEngineCount": m.async_engines,
        "unifiedAddressing": 1,
        "memoryClockRate": m.mem_clock_khz,
        "memoryBusWidth": m.bus_width,
        "l2CacheSize": m.l2,
        "persistingL2CacheMaxSize": m.l2 * 5 // 8,
        "maxThreadsPerMultiProcessor": m.threads_per_sm,
        "streamPrioritiesSupported": 1,
        "globalL1CacheSupported": 1,
        "localL1CacheSupported": 1,
        "sharedMemPerMultiprocessor": m.smem_per_sm,
        "regsPerMultiprocessor": 65_536,
        "managedMemory": 1,
        "isMultiGpuBoard": 0,
        "multiGpuBoardGroupID": ordinal,
        "hostNativeAtomicSupported": 0,
        "singleToDoublePrecisionPerfRatio": 2,
        "pageableMemoryAccess": 0,
        "concurrentManagedAccess": 1,
        "computePreemptionSupported": 1,
        # registered memory has a distinct device address (shim/api_registered.c)
        "canUseHostPointerForRegisteredMem": 0,
        "cooperativeLaunch": 1,
        "cooperativeMultiDeviceLaunch": 1,
        "sharedMemPerBlockOptin": m.smem_optin,
        "pageableMemoryAccessUsesHostPageTables": 0,
        "directManagedMemAccessFromHost": 0,
        "maxBlocksPerMultiProcessor": m.blocks_per_sm,
        "accessPolicyMaxWindowSize": 134_213_632,
        "reservedSharedMemPerBlock": 1024,
        "hostRegisterSupported": 1,
        "sparseCudaArraySupported": 1,
        "hostRegisterReadOnlySupported": 1,
        "timelineSemaphoreInteropSupported": 1,
        "memoryPoolsSupported": 1,
        "gpuDirectRDMASupported": 0,
        "gpuDirectRDMAFlushWritesOptions": 0,
        "gpuDirectRDMAWritesOrdering": 0,
        "memoryPoolSupportedHandleTypes": 1,
        "deferredMappingCudaArraySupported": 1,
        "ipcEventSupported": 1,
        "clusterLaunch": 1 if m.major >= 9 else 0,
        "unifiedFunctionPointers": 1,
        "deviceNumaConfig": 0,
        "deviceNumaId": -1,
        "mpsEnabled": 0,
        "hostNumaId": -1,
        "gpuPciDeviceID": 0,
        "gpuPciSubsystemID": 0,
        "hostNumaMultinodeIpcSupported": 0,
    }


# cudaDevAttr names whose property is not found by the generic name match below.
_ATTR_TO_PROP: dict[str, str | tuple[str, int]] = {
    "MaxBlockDimX": ("maxThreadsDim", 0), "MaxBlockDimY": ("maxThreadsDim", 1), "MaxBlockDimZ": ("maxThreadsDim", 2),
    "MaxGridDimX": ("maxGridSize", 0), "MaxGridDimY": ("maxGridSize", 1), "MaxGridDimZ": ("maxGridSize", 2),
    "MaxSharedMemoryPerBlock": "sharedMemPerBlock", "TotalConstantMemory": "totalConstMem",
    "MaxPitch": "memPitch", "MaxRegistersPerBlock": "regsPerBlock", "GpuOverlap": "deviceOverlap",
    "KernelExecTimeout": "kernelExecTimeoutEnabled", "EccEnabled": "ECCEnabled", "PciBusId": "pciBusID",
    "PciDeviceId": "pciDeviceID", "PciDomainId": "pciDomainID", "GlobalMemoryBusWidth": "memoryBusWidth",
    "ComputeCapabilityMajor": "major", "ComputeCapabilityMinor": "minor",
    "MaxSharedMemoryPerMultiprocessor": "sharedMemPerMultiprocessor",
    "MaxRegistersPerMultiprocessor": "regsPerMultiprocessor", "MaxSharedMemoryPerBlockOptin": "sharedMemPerBlockOptin",
    "MaxBlocksPerMultiprocessor": "maxBlocksPerMultiProcessor",
    "ReservedSharedMemoryPerBlock": "reservedSharedMemPerBlock",
    "MaxPersistingL2CacheSize": "persistingL2CacheMaxSize", "MaxAccessPolicyWindowSize": "accessPolicyMaxWindowSize",
    "MaxTexture1DWidth": "maxTexture1D", "MaxTexture2DWidth": ("maxTexture2D", 0),
    "MaxTexture2DHeight": ("maxTexture2D", 1), "MaxTexture3DWidth": ("maxTexture3D", 0),
    "MaxTexture3DHeight": ("maxTexture3D", 1), "MaxTexture3DDepth": ("maxTexture3D", 2),
    "MaxSurface1DWidth": "maxSurface1D", "MaxSurface2DWidth": ("maxSurface2D", 0),
    "MaxSurface2DHeight": ("maxSurface2D", 1), "MemoryPoolsSupported": "memoryPoolsSupported",
    "ClusterLaunch": "clusterLaunch", "HostRegisterSupported": "hostRegisterSupported",
    "MemoryPoolSupportedHandleTypes": "memoryPoolSupportedHandleTypes", "NumaConfig": "deviceNumaConfig",
    "NumaId": "deviceNumaId", "HostNumaId": "hostNumaId", "MpsEnabled": "mpsEnabled",
    # texture and surface limits (the static CUDA runtime reads every one to fill cudaDeviceProp)
    "MaxTexture1DMipmappedWidth": "maxTexture1DMipmap", "MaxTexture1DLinearWidth": "maxTexture1DLinear",
    "MaxTexture2DMipmappedWidth": ("maxTexture2DMipmap", 0), "MaxTexture2DMipmappedHeight": ("maxTexture2DMipmap", 1),
    "MaxTexture2DLinearWidth": ("maxTexture2DLinear", 0), "MaxTexture2DLinearHeight": ("maxTexture2DLinear", 1),
    "MaxTexture2DLinearPitch": ("maxTexture2DLinear", 2), "MaxTexture2DGatherWidth": ("maxTexture2DGather", 0),
    "MaxTexture2DGatherHeight": ("maxTexture2DGather", 1), "MaxTexture3DWidthAlt": ("maxTexture3DAlt", 0),
    "MaxTexture3DHeightAlt": ("maxTexture3DAlt", 1), "MaxTexture3DDepthAlt": ("maxTexture3DAlt", 2),
    "MaxTexture1DLayeredWidth": ("maxTexture1DLayered", 0), "MaxTexture1DLayeredLayers": ("maxTexture1DLayered", 1),
    "MaxTexture2DLayeredWidth": ("maxTexture2DLayered", 0), "MaxTexture2DLayeredHeight": ("maxTexture2DLayered", 1),
    "MaxTexture2DLayeredLayers": ("maxTexture2DLayered", 2), "MaxTextureCubemapWidth": "maxTextureCubemap",
    "MaxTextureCubemapLayeredWidth": ("maxTextureCubemapLayered", 0),
    "MaxTextureCubemapLayeredLayers": ("maxTextureCubemapLayered", 1),
    "MaxSurface3DWidth": ("maxSurface3D", 0), "MaxSurface3DHeight": ("maxSurface3D", 1),
    "MaxSurface3DDepth": ("maxSurface3D", 2), "MaxSurface1DLayeredWidth": ("maxSurface1DLayered", 0),
    "MaxSurface1DLayeredLayers": ("maxSurface1DLayered", 1), "MaxSurface2DLayeredWidth": ("maxSurface2DLayered", 0),
    "MaxSurface2DLayeredHeight": ("maxSurface2DLayered", 1), "MaxSurface2DLayeredLayers": ("maxSurface2DLayered", 2),
    "MaxSurfaceCubemapWidth": "maxSurfaceCubemap", "MaxSurfaceCubemapLayeredWidth": ("maxSurfaceCubemapLayered", 0),
    "MaxSurfaceCubemapLayeredLayers": ("maxSurfaceCubemapLayered", 1), "IpcEventSupport": "ipcEventSupported",
}

# Attributes with no cudaDeviceProp field: what the emulated device has (no remote-write flush, interop or host
# memory pools; four memory synchronisation domains as on Hopper; reserved attributes read 0 as on real drivers).
_ATTR_FIXED: dict[str, int] = {
    "CanFlushRemoteWrites": 0, "MemSyncDomainCount": 4, "D3D12CigSupported": 0, "VulkanCigSupported": 0,
    "HostNumaMemoryPoolsSupported": 0, "HostMemoryPoolsSupported": 0, "OnlyPartialHostNativeAtomicSupported": 0,
}


def device_attributes(props: dict[str, Any]) -> dict[int, int]:
    """cudaDeviceAttr value -> int for every attribute derivable from the properties."""
    by_lower = {k.lower(): k for k in props}
    out: dict[int, int] = {}
    for name, value in device_attribute_ids().items():
        short = name.removeprefix("cudaDevAttr")
        if short in _ATTR_FIXED or (short.startswith("Reserved") and short[8:].isdigit()):
            out[value] = _ATTR_FIXED.get(short, 0)
            continue
        target = _ATTR_TO_PROP.get(short) or by_lower.get(short.lower())
        if isinstance(target, tuple):
            v = props[target[0]][target[1]]
        elif target and isinstance(props.get(target), int):
            v = props[target]
        else:
            continue
        out[value] = int(v)
    return out


def make_device(m: GpuModel, ordinal: int, capacity: int) -> DeviceInfo:
    props = device_props(m, ordinal, capacity)
    return DeviceInfo(
        ordinal=ordinal,
        name=m.name,
        props=props,
        attributes=device_attributes(props),
        uuid=props["uuid"],
        pci_bus_id=f"0000:{props['pciBusID']:02x}:00.0",
        priority_range=m.priority_range,
    )
