"""The CUresult -> cudaError_t table: complete against the installed cuda-python enum, and every target
a code the runtime knows (adapters/cudart/13.0/errors.json, generated from the real libcudart)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpushim.backends.cuda.errors import BY_VALUE, CURESULT, check, cuda_error, result_name, runtime_error
from gpushim.cuda_errors import STICKY, CudaError, Err

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = {e["code"]: e["name"] for e in json.loads((ROOT / "adapters/cudart/13.0/errors.json").read_text())["errors"]}


def test_every_curesult_member_is_in_the_table_with_its_value() -> None:
    driver = pytest.importorskip("cuda.bindings.driver")
    members = {m.name: int(m) for m in driver.CUresult}
    missing = sorted(set(members) - set(CURESULT))
    assert not missing, f"CUresult members without a cudaError_t: {missing}"
    wrong = {n: (members[n], CURESULT[n][0]) for n in members if CURESULT[n][0] != members[n]}
    assert not wrong


def test_every_target_is_a_runtime_code() -> None:
    unknown = {name: rt for name, (_, rt) in CURESULT.items() if rt not in RUNTIME}
    assert not unknown


def test_values_are_unique() -> None:
    assert len(BY_VALUE) == len(CURESULT)


@pytest.mark.parametrize(("driver", "runtime"), [
    ("CUDA_SUCCESS", "cudaSuccess"),
    ("CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation"),
    ("CUDA_ERROR_NOT_INITIALIZED", "cudaErrorInitializationError"),
    ("CUDA_ERROR_INVALID_IMAGE", "cudaErrorInvalidKernelImage"),
    ("CUDA_ERROR_INVALID_CONTEXT", "cudaErrorDeviceUninitialized"),
    ("CUDA_ERROR_NO_BINARY_FOR_GPU", "cudaErrorNoKernelImageForDevice"),
    ("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "cudaErrorUnsupportedPtxVersion"),
    ("CUDA_ERROR_INVALID_HANDLE", "cudaErrorInvalidResourceHandle"),
    ("CUDA_ERROR_NOT_FOUND", "cudaErrorSymbolNotFound"),
    ("CUDA_ERROR_NOT_READY", "cudaErrorNotReady"),
    ("CUDA_ERROR_ILLEGAL_ADDRESS", "cudaErrorIllegalAddress"),
    ("CUDA_ERROR_LAUNCH_FAILED", "cudaErrorLaunchFailure"),
    ("CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "cudaErrorSetOnActiveProcess"),
    ("CUDA_ERROR_CONTEXT_ALREADY_IN_USE", "cudaErrorDeviceAlreadyInUse"),
    ("CUDA_ERROR_INSUFFICIENT_LOADER_VERSION", "cudaErrorInsufficientDriver"),
    ("CUDA_ERROR_MULTICAST_RESOURCE_FULL", "cudaErrorMemoryAllocation"),
    ("CUDA_ERROR_UNKNOWN", "cudaErrorUnknown"),
])
def test_mapped_by_meaning(driver: str, runtime: str) -> None:
    assert RUNTIME[CURESULT[driver][1]] == runtime


def test_kernel_faults_stay_sticky() -> None:
    for name in ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_MISALIGNED_ADDRESS",
                 "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_ASSERT", "CUDA_ERROR_HARDWARE_STACK_ERROR"):
        assert CURESULT[name][1] in STICKY


def test_unknown_and_helpers() -> None:
    assert runtime_error(123456) == Err.UNKNOWN
    assert result_name(123456) == "CUresult 123456"
    e = cuda_error(2, "cuMemAlloc")
    assert e.code == Err.MEMORY_ALLOCATION and "CUDA_ERROR_OUT_OF_MEMORY" in e.message
    assert check((0,), "x") is None
    assert check((0, 5), "x") == 5
    assert check((0, 5, 6), "x") == (5, 6)
    with pytest.raises(CudaError) as ei:
        check((201, None), "cuCtxSetCurrent")
    assert ei.value.code == 201 and "CUDA_ERROR_INVALID_CONTEXT" in ei.value.message
