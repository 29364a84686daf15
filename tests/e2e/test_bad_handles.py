"""Destroyed and never-valid handles from the application (tests/programs/bad_handles.cu): each call returns the
error CUDA documents for the kind, the program runs to its end (no signal), and another client of the same
server is unaffected. CUDA leaves garbage handles undefined; the shim looks every handle up among the live ones
before reading through it (shim/gs_handles.c), so they get the same error as a destroyed one."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Server, kv
from tests.e2e.test_isolation import wait_line

INVALID_VALUE = 1  # cudaErrorInvalidValue / CUDA_ERROR_INVALID_VALUE
INVALID_DEVICE_FUNCTION = 98  # cudaErrorInvalidDeviceFunction
INVALID_HANDLE = 400  # cudaErrorInvalidResourceHandle / CUDA_ERROR_INVALID_HANDLE
INVALID_CONTEXT = 201  # CUDA_ERROR_INVALID_CONTEXT
CONTEXT_IS_DESTROYED = 709  # CUDA_ERROR_CONTEXT_IS_DESTROYED


def expected() -> dict[str, int]:
    want: dict[str, int] = {}
    # CUDA Runtime API, cudaStreamQuery / cudaStreamSynchronize / cudaMemsetAsync / cudaEventQuery /
    # cudaEventRecord / cudaEventSynchronize: cudaErrorInvalidResourceHandle
    for tag in ("destroyed", "garbage"):
        for call in ("stream_query", "stream_sync", "memset_async", "launch", "event_query", "event_record",
                     "event_sync"):
            want[f"rt_{call}_{tag}"] = INVALID_HANDLE
    # cudaGraphNodeGetType, cudaGraphAddEmptyNode, cudaGraphDestroy, cudaGraphLaunch, cudaGraphExecDestroy,
    # cudaUserObjectRelease, cudaMemPoolGetAttribute, cudaMemPoolDestroy, cudaFreeArray,
    # cudaDestroyTextureObject: cudaErrorInvalidValue
    for name in ("node_type_destroyed", "node_type_garbage", "node_type_junk", "add_node_garbage_dep",
                 "node_type_graph_destroyed", "graph_destroy_destroyed", "graph_destroy_garbage", "graph_add_garbage",
                 "exec_launch_destroyed", "exec_launch_garbage", "exec_destroy_garbage", "user_object_release_garbage",
                 "pool_attr_garbage", "pool_destroy_garbage", "array_free_garbage", "texobj_destroy_garbage"):
        want[f"rt_{name}"] = INVALID_VALUE
    # cudaLibraryGetKernel / cudaLibraryUnload: cudaErrorInvalidResourceHandle, for an unloaded library too
    for name in ("library_get_kernel_garbage", "library_unload_garbage", "library_get_kernel_destroyed",
                 "library_unload_destroyed"):
        want[f"rt_{name}"] = INVALID_HANDLE
    # cudaLaunchKernel with a kernel of an unloaded library (cudaLibraryEnumerateKernels: "The returned kernel
    # handle becomes invalid when the library is unloaded"): cudaErrorInvalidDeviceFunction
    want["rt_launch_kernel_destroyed"] = INVALID_DEVICE_FUNCTION
    want["rt_func_attributes_garbage"] = INVALID_DEVICE_FUNCTION  # cudaFuncGetAttributes
    # CUDA Driver API, cuCtxDestroy: "If ctx is current to other threads, then ctx will remain current to those
    # threads, and attempting to access ctx from those threads will result in the error
    # CUDA_ERROR_CONTEXT_IS_DESTROYED."
    want["drv_push_other_thread"] = 0
    # the stale entry is refused even when a new context took the destroyed one's address; cuCtxGetId: "a
    # unique ID for the context", so the new one has another
    want["drv_ctx_new_id_differs"] = 1
    for call in ("ctx_sync", "ctx_get_id", "mem_alloc"):
        want[f"drv_{call}_destroyed_other_thread"] = CONTEXT_IS_DESTROYED
    for tag in ("destroyed", "garbage", "junk"):
        # cuCtxPushCurrent, cuCtxSetCurrent, cuCtxGetApiVersion, cuCtxGetId, cuCtxGetDevice_v2,
        # cuCtxSynchronize_v2, cuCtxEnablePeerAccess: CUDA_ERROR_INVALID_CONTEXT
        for call in ("push", "set", "api_version", "get_id", "get_device", "sync", "enable_peer"):
            want[f"drv_ctx_{call}_{tag}"] = INVALID_CONTEXT
        # cuCtxDestroy lists CUDA_ERROR_INVALID_CONTEXT and CUDA_ERROR_INVALID_VALUE; CUresult's description of
        # CUDA_ERROR_INVALID_CONTEXT: "the context passed to an API call is not a valid handle (such as a
        # context that has had cuCtxDestroy() invoked on it)"
        want[f"drv_ctx_destroy_{tag}"] = INVALID_CONTEXT
        # cuModuleGetFunction, cuModuleGetGlobal, cuModuleUnload, cuFuncGetAttribute, cuLaunchKernel,
        # cuLinkAddData, cuLinkComplete, cuLinkDestroy: CUDA_ERROR_INVALID_HANDLE
        for call in ("module_get_function", "module_get_global", "module_unload", "func_attribute", "launch",
                     "link_add", "link_complete", "link_destroy"):
            want[f"drv_{call}_{tag}"] = INVALID_HANDLE
    # cuLibraryGetKernel, cuLibraryGetModule, cuLibraryUnload, cuKernelGetFunction, cuLaunchKernel (a kernel's
    # function once its library is unloaded), cuStreamQuery, cuEventQuery: CUDA_ERROR_INVALID_HANDLE
    for name in ("library_get_kernel_garbage", "library_get_kernel_junk", "library_unload_garbage",
                 "kernel_get_function_garbage", "stream_query_garbage", "event_query_garbage",
                 "library_get_kernel_destroyed", "library_get_module_destroyed", "library_unload_destroyed",
                 "kernel_get_function_destroyed", "launch_kernel_of_library_destroyed"):
        want[f"drv_{name}"] = INVALID_HANDLE
    # cuMemRelease, cuMemPoolGetAttribute, cuTexObjectDestroy, cuGraphNodeGetType: CUDA_ERROR_INVALID_VALUE
    for name in ("mem_release_garbage", "pool_attr_garbage", "texobj_destroy_garbage", "node_type_garbage"):
        want[f"drv_{name}"] = INVALID_VALUE
    return want


def test_bad_handles_get_errors_not_crashes(server: Server, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    other = server.start("hold", "4", "23", "300", str(stop))  # a second client of the same server
    try:
        wait_line(other, "ready", timeout=120)
        p = server.run("bad_handles", timeout=300)
        assert p.returncode == 0, f"bad_handles ended with {p.returncode}:\n{p.stdout}\n{p.stderr}"
        assert "bad handles done" in p.stdout
        got = kv(p.stdout)
        want = expected()
        wrong = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != str(v)}
        assert not wrong, f"(got, expected): {wrong}"
        assert got["after"] == "1"  # the client still runs kernels and copies afterwards
    finally:
        stop.touch()
    out, _ = other.communicate(timeout=120)
    assert other.returncode == 0 and "intact 23" in out, out
