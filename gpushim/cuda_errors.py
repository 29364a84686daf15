"""cudaError_t codes the server side names, and the exception that carries one.

Values are the runtime API's (driver_types.h); they never changed between 11.x and 13.x, only grew.
The full per-version tables (names, strings, which version knows which code) live in adapters/.
"""

from __future__ import annotations

from enum import IntEnum


class Err(IntEnum):
    SUCCESS = 0
    INVALID_VALUE = 1
    MEMORY_ALLOCATION = 2
    INITIALIZATION_ERROR = 3
    CUDART_UNLOADING = 4
    INVALID_CONFIGURATION = 9
    INVALID_PITCH_VALUE = 12
    INVALID_SYMBOL = 13
    INVALID_HOST_POINTER = 16
    INVALID_DEVICE_POINTER = 17
    INVALID_MEMCPY_DIRECTION = 21
    INSUFFICIENT_DRIVER = 35
    DEVICES_UNAVAILABLE = 46
    NO_DEVICE = 100
    INVALID_DEVICE = 101
    DEVICE_NOT_LICENSED = 102
    INVALID_KERNEL_IMAGE = 200
    INVALID_CONTEXT = 201
    NO_KERNEL_IMAGE_FOR_DEVICE = 209
    UNSUPPORTED_PTX_VERSION = 222
    INVALID_SOURCE = 300
    FILE_NOT_FOUND = 301
    INVALID_RESOURCE_HANDLE = 400
    ILLEGAL_STATE = 401
    SYMBOL_NOT_FOUND = 500
    NOT_READY = 600
    ILLEGAL_ADDRESS = 700
    LAUNCH_OUT_OF_RESOURCES = 701
    LAUNCH_TIMEOUT = 702
    PEER_ACCESS_UNSUPPORTED = 704
    HOST_MEMORY_ALREADY_REGISTERED = 712
    HOST_MEMORY_NOT_REGISTERED = 713
    HARDWARE_STACK_ERROR = 714
    ILLEGAL_INSTRUCTION = 715
    MISALIGNED_ADDRESS = 716
    INVALID_ADDRESS_SPACE = 717
    INVALID_PC = 718
    LAUNCH_FAILURE = 719
    COOPERATIVE_LAUNCH_TOO_LARGE = 720
    ASSERT = 710
    NOT_PERMITTED = 800
    NOT_SUPPORTED = 801
    STREAM_CAPTURE_UNSUPPORTED = 900
    INVALID_CLUSTER_SIZE = 912
    UNKNOWN = 999


# Errors after which the context is unusable: every later call returns the same code (CUDA's "sticky" errors).
STICKY = frozenset(
    {
        Err.ILLEGAL_ADDRESS,
        Err.LAUNCH_TIMEOUT,
        Err.HARDWARE_STACK_ERROR,
        Err.ILLEGAL_INSTRUCTION,
        Err.MISALIGNED_ADDRESS,
        Err.INVALID_ADDRESS_SPACE,
        Err.INVALID_PC,
        Err.LAUNCH_FAILURE,
        Err.ASSERT,
    }
)


class CudaError(Exception):
    """A call failed with a cudaError_t; `message` says why, for logs and for the client's stderr."""

    def __init__(self, code: int, message: str = "", noted: bool = False) -> None:
        super().__init__(f"{Err(code).name if code in Err._value2member_map_ else code}: {message}")
        self.code = int(code)
        self.message = message
        # the client prints the reason even for a code it would otherwise take as an ordinary API result
        # (gpushim.server.session.NOTED): a server limit, say, which a person must act on
        self.noted = noted
