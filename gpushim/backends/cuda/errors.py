"""CUresult (the driver API's errors) -> cudaError_t (the runtime's): two different enums.

Most codes share their number with the runtime code of the same meaning (cudaErrorMemoryAllocation is
CUDA_ERROR_OUT_OF_MEMORY, 2; cudaErrorDeviceUninitialized is CUDA_ERROR_INVALID_CONTEXT, 201). The few
driver codes the runtime lacks are mapped by meaning, each with its reason. The table is keyed by name
(from cuda.bindings.driver.CUresult, 13.x) and carries the driver's number too, so it is usable without
cuda-python; tests/cuda_backend checks it against the installed enum and against the runtime 13.0 codes
in adapters/cudart/13.0/errors.json. Calls whose driver code means something narrower for one runtime
function (a kernel or symbol not found in its module) are mapped where they are made, in backend.py.
"""

from __future__ import annotations

from gpushim.cuda_errors import CudaError, Err

# name: (CUresult value, cudaError_t value)
CURESULT: dict[str, tuple[int, int]] = {
    "CUDA_SUCCESS": (0, 0),  # cudaSuccess
    "CUDA_ERROR_INVALID_VALUE": (1, 1),  # cudaErrorInvalidValue
    "CUDA_ERROR_OUT_OF_MEMORY": (2, 2),  # cudaErrorMemoryAllocation
    "CUDA_ERROR_NOT_INITIALIZED": (3, 3),  # cudaErrorInitializationError
    "CUDA_ERROR_DEINITIALIZED": (4, 4),  # cudaErrorCudartUnloading
    "CUDA_ERROR_PROFILER_DISABLED": (5, 5),  # cudaErrorProfilerDisabled
    "CUDA_ERROR_PROFILER_NOT_INITIALIZED": (6, 6),  # cudaErrorProfilerNotInitialized
    "CUDA_ERROR_PROFILER_ALREADY_STARTED": (7, 7),  # cudaErrorProfilerAlreadyStarted
    "CUDA_ERROR_PROFILER_ALREADY_STOPPED": (8, 8),  # cudaErrorProfilerAlreadyStopped
    "CUDA_ERROR_STUB_LIBRARY": (34, 34),  # cudaErrorStubLibrary
    "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER": (36, 36),  # cudaErrorCallRequiresNewerDriver
    "CUDA_ERROR_DEVICE_UNAVAILABLE": (46, 46),  # cudaErrorDevicesUnavailable
    "CUDA_ERROR_MULTICAST_RESOURCE_FULL": (47, 2),  # cudaErrorMemoryAllocation: a resource ran out
    "CUDA_ERROR_NO_DEVICE": (100, 100),  # cudaErrorNoDevice
    "CUDA_ERROR_INVALID_DEVICE": (101, 101),  # cudaErrorInvalidDevice
    "CUDA_ERROR_DEVICE_NOT_LICENSED": (102, 102),  # cudaErrorDeviceNotLicensed
    "CUDA_ERROR_INVALID_IMAGE": (200, 200),  # cudaErrorInvalidKernelImage
    "CUDA_ERROR_INVALID_CONTEXT": (201, 201),  # cudaErrorDeviceUninitialized
    "CUDA_ERROR_CONTEXT_ALREADY_CURRENT": (202, 1),  # cudaErrorInvalidValue: deprecated, never returned since 3.2
    "CUDA_ERROR_MAP_FAILED": (205, 205),  # cudaErrorMapBufferObjectFailed
    "CUDA_ERROR_UNMAP_FAILED": (206, 206),  # cudaErrorUnmapBufferObjectFailed
    "CUDA_ERROR_ARRAY_IS_MAPPED": (207, 207),  # cudaErrorArrayIsMapped
    "CUDA_ERROR_ALREADY_MAPPED": (208, 208),  # cudaErrorAlreadyMapped
    "CUDA_ERROR_NO_BINARY_FOR_GPU": (209, 209),  # cudaErrorNoKernelImageForDevice
    "CUDA_ERROR_ALREADY_ACQUIRED": (210, 210),  # cudaErrorAlreadyAcquired
    "CUDA_ERROR_NOT_MAPPED": (211, 211),  # cudaErrorNotMapped
    "CUDA_ERROR_NOT_MAPPED_AS_ARRAY": (212, 212),  # cudaErrorNotMappedAsArray
    "CUDA_ERROR_NOT_MAPPED_AS_POINTER": (213, 213),  # cudaErrorNotMappedAsPointer
    "CUDA_ERROR_ECC_UNCORRECTABLE": (214, 214),  # cudaErrorECCUncorrectable
    "CUDA_ERROR_UNSUPPORTED_LIMIT": (215, 215),  # cudaErrorUnsupportedLimit
    "CUDA_ERROR_CONTEXT_ALREADY_IN_USE": (216, 216),  # cudaErrorDeviceAlreadyInUse
    "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED": (217, 217),  # cudaErrorPeerAccessUnsupported
    "CUDA_ERROR_INVALID_PTX": (218, 218),  # cudaErrorInvalidPtx
    "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT": (219, 219),  # cudaErrorInvalidGraphicsContext
    "CUDA_ERROR_NVLINK_UNCORRECTABLE": (220, 220),  # cudaErrorNvlinkUncorrectable
    "CUDA_ERROR_JIT_COMPILER_NOT_FOUND": (221, 221),  # cudaErrorJitCompilerNotFound
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": (222, 222),  # cudaErrorUnsupportedPtxVersion
    "CUDA_ERROR_JIT_COMPILATION_DISABLED": (223, 223),  # cudaErrorJitCompilationDisabled
    "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY": (224, 224),  # cudaErrorUnsupportedExecAffinity
    "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC": (225, 225),  # cudaErrorUnsupportedDevSideSync
    "CUDA_ERROR_CONTAINED": (226, 226),  # cudaErrorContained
    "CUDA_ERROR_INSUFFICIENT_LOADER_VERSION": (227, 35),  # cudaErrorInsufficientDriver: the driver's loader is too old
    "CUDA_ERROR_INVALID_SOURCE": (300, 300),  # cudaErrorInvalidSource
    "CUDA_ERROR_FILE_NOT_FOUND": (301, 301),  # cudaErrorFileNotFound
    "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND": (302, 302),  # cudaErrorSharedObjectSymbolNotFound
    "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED": (303, 303),  # cudaErrorSharedObjectInitFailed
    "CUDA_ERROR_OPERATING_SYSTEM": (304, 304),  # cudaErrorOperatingSystem
    "CUDA_ERROR_INVALID_HANDLE": (400, 400),  # cudaErrorInvalidResourceHandle
    "CUDA_ERROR_ILLEGAL_STATE": (401, 401),  # cudaErrorIllegalState
    "CUDA_ERROR_LOSSY_QUERY": (402, 402),  # cudaErrorLossyQuery
    "CUDA_ERROR_NOT_FOUND": (500, 500),  # cudaErrorSymbolNotFound
    "CUDA_ERROR_NOT_READY": (600, 600),  # cudaErrorNotReady
    "CUDA_ERROR_ILLEGAL_ADDRESS": (700, 700),  # cudaErrorIllegalAddress
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": (701, 701),  # cudaErrorLaunchOutOfResources
    "CUDA_ERROR_LAUNCH_TIMEOUT": (702, 702),  # cudaErrorLaunchTimeout
    "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING": (703, 703),  # cudaErrorLaunchIncompatibleTexturing
    "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED": (704, 704),  # cudaErrorPeerAccessAlreadyEnabled
    "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED": (705, 705),  # cudaErrorPeerAccessNotEnabled
    "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE": (708, 708),  # cudaErrorSetOnActiveProcess
    "CUDA_ERROR_CONTEXT_IS_DESTROYED": (709, 709),  # cudaErrorContextIsDestroyed
    "CUDA_ERROR_ASSERT": (710, 710),  # cudaErrorAssert
    "CUDA_ERROR_TOO_MANY_PEERS": (711, 711),  # cudaErrorTooManyPeers
    "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED": (712, 712),  # cudaErrorHostMemoryAlreadyRegistered
    "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED": (713, 713),  # cudaErrorHostMemoryNotRegistered
    "CUDA_ERROR_HARDWARE_STACK_ERROR": (714, 714),  # cudaErrorHardwareStackError
    "CUDA_ERROR_ILLEGAL_INSTRUCTION": (715, 715),  # cudaErrorIllegalInstruction
    "CUDA_ERROR_MISALIGNED_ADDRESS": (716, 716),  # cudaErrorMisalignedAddress
    "CUDA_ERROR_INVALID_ADDRESS_SPACE": (717, 717),  # cudaErrorInvalidAddressSpace
    "CUDA_ERROR_INVALID_PC": (718, 718),  # cudaErrorInvalidPc
    "CUDA_ERROR_LAUNCH_FAILED": (719, 719),  # cudaErrorLaunchFailure
    "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE": (720, 720),  # cudaErrorCooperativeLaunchTooLarge
    "CUDA_ERROR_TENSOR_MEMORY_LEAK": (721, 721),  # cudaErrorTensorMemoryLeak
    "CUDA_ERROR_NOT_PERMITTED": (800, 800),  # cudaErrorNotPermitted
    "CUDA_ERROR_NOT_SUPPORTED": (801, 801),  # cudaErrorNotSupported
    "CUDA_ERROR_SYSTEM_NOT_READY": (802, 802),  # cudaErrorSystemNotReady
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": (803, 803),  # cudaErrorSystemDriverMismatch
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": (804, 804),  # cudaErrorCompatNotSupportedOnDevice
    "CUDA_ERROR_MPS_CONNECTION_FAILED": (805, 805),  # cudaErrorMpsConnectionFailed
    "CUDA_ERROR_MPS_RPC_FAILURE": (806, 806),  # cudaErrorMpsRpcFailure
    "CUDA_ERROR_MPS_SERVER_NOT_READY": (807, 807),  # cudaErrorMpsServerNotReady
    "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED": (808, 808),  # cudaErrorMpsMaxClientsReached
    "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED": (809, 809),  # cudaErrorMpsMaxConnectionsReached
    "CUDA_ERROR_MPS_CLIENT_TERMINATED": (810, 810),  # cudaErrorMpsClientTerminated
    "CUDA_ERROR_CDP_NOT_SUPPORTED": (811, 811),  # cudaErrorCdpNotSupported
    "CUDA_ERROR_CDP_VERSION_MISMATCH": (812, 812),  # cudaErrorCdpVersionMismatch
    "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED": (900, 900),  # cudaErrorStreamCaptureUnsupported
    "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED": (901, 901),  # cudaErrorStreamCaptureInvalidated
    "CUDA_ERROR_STREAM_CAPTURE_MERGE": (902, 902),  # cudaErrorStreamCaptureMerge
    "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED": (903, 903),  # cudaErrorStreamCaptureUnmatched
    "CUDA_ERROR_STREAM_CAPTURE_UNJOINED": (904, 904),  # cudaErrorStreamCaptureUnjoined
    "CUDA_ERROR_STREAM_CAPTURE_ISOLATION": (905, 905),  # cudaErrorStreamCaptureIsolation
    "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT": (906, 906),  # cudaErrorStreamCaptureImplicit
    "CUDA_ERROR_CAPTURED_EVENT": (907, 907),  # cudaErrorCapturedEvent
    "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD": (908, 908),  # cudaErrorStreamCaptureWrongThread
    "CUDA_ERROR_TIMEOUT": (909, 909),  # cudaErrorTimeout
    "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE": (910, 910),  # cudaErrorGraphExecUpdateFailure
    "CUDA_ERROR_EXTERNAL_DEVICE": (911, 911),  # cudaErrorExternalDevice
    "CUDA_ERROR_INVALID_CLUSTER_SIZE": (912, 912),  # cudaErrorInvalidClusterSize
    "CUDA_ERROR_FUNCTION_NOT_LOADED": (913, 913),  # cudaErrorFunctionNotLoaded
    "CUDA_ERROR_INVALID_RESOURCE_TYPE": (914, 914),  # cudaErrorInvalidResourceType
    "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION": (915, 915),  # cudaErrorInvalidResourceConfiguration
    "CUDA_ERROR_KEY_ROTATION": (916, 999),  # cudaErrorUnknown: the runtime has no such code
    "CUDA_ERROR_STREAM_DETACHED": (917, 400),  # cudaErrorInvalidResourceHandle: the stream can no longer be used
    "CUDA_ERROR_GRAPH_RECAPTURE_FAILURE": (918, 901),  # cudaErrorStreamCaptureInvalidated: the capture failed
    "CUDA_ERROR_FABRIC_NOT_READY": (919, 802),  # cudaErrorSystemNotReady: the system is not ready
    "CUDA_ERROR_UNKNOWN": (999, 999),  # cudaErrorUnknown
}

BY_VALUE: dict[int, tuple[str, int]] = {v: (name, rt) for name, (v, rt) in CURESULT.items()}


def runtime_error(result: int) -> int:
    """The cudaError_t for a CUresult value; codes newer than this table become cudaErrorUnknown."""
    hit = BY_VALUE.get(int(result))
    return hit[1] if hit else int(Err.UNKNOWN)


def result_name(result: int) -> str:
    hit = BY_VALUE.get(int(result))
    return hit[0] if hit else f"CUresult {int(result)}"


def cuda_error(result: int, what: str) -> CudaError:
    """The CudaError a failed driver call raises: the runtime code, and the driver's name in the message."""
    return CudaError(runtime_error(result), f"{what}: {result_name(result)}")


def check(res: tuple, what: str) -> object:
    """Unpacks a cuda-python result tuple `(CUresult, *values)`: raises the CudaError of a failure, returns
    None, the single value, or the tuple of values."""
    err = int(res[0])
    if err != 0:
        raise cuda_error(err, what)
    if len(res) == 1:
        return None
    return res[1] if len(res) == 2 else tuple(res[1:])
