"""Dynamic parallelism on the PTX engine (gpushim/ptx/devrt.py): the device runtime calls nvcc emits for a
launch in device code (CUDA Programming Guide, "CUDA Dynamic Parallelism"), their errors, and what is refused."""

from __future__ import annotations

import numpy as np
import pytest
from harness import Dev, compile_ptx

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx import PtxUnsupported, load_module
from gpushim.ptx.devrt import PARAM_KIND

RDC = ("-rdc=true",)


@pytest.fixture(scope="module")
def dev():
    return Dev(compile_ptx("devrt", "sm_75", RDC))


def _leftover(dev) -> list:
    return [a for a in dev.mem.allocations() if a.kind == PARAM_KIND]


def test_every_thread_launches_a_child(dev):
    out = dev.empty(4 * 64)
    stats = dev.launch("_Z11each_threadPi", 2, 32, out)
    assert (dev.get(out, np.int32, 64) == 3 * np.arange(64) + 1).all()
    assert stats.blocks == 2 + 64  # the parent's blocks and each child's
    assert not _leftover(dev)  # parameter buffers are freed once launched


def test_child_fault_fails_the_launch(dev):
    with pytest.raises(CudaError) as e:
        dev.launch("_Z15faulting_parentPi", 1, 1, 0x10)
    assert e.value.code == Err.ILLEGAL_ADDRESS
    assert "bad_child" in str(e.value)
    assert not _leftover(dev)


def test_device_streams_and_last_error(dev):
    out, err = dev.empty(4 * 4), dev.empty(4 * 8)
    dev.launch("_Z7streamsPiS_", 1, 1, out, err)
    got = dev.get(err, np.int32, 8).tolist()
    # created non-blocking: launches into it run; after cudaStreamDestroy, or into a handle never made, the
    # launch fails with cudaErrorInvalidResourceHandle (400); cudaPeekAtLastError does not reset the error,
    # cudaGetLastError does; a stream without cudaStreamNonBlocking is refused ("cudaStreamCreateWithFlags":
    # device-side streams must be non-blocking) with cudaErrorInvalidValue
    assert got == [0, 0, 0, 400, 400, 400, 0, 1]
    assert dev.get(out, np.int32, 3).tolist() == [7, 0, 0]


def test_device_malloc_and_free(dev):
    from gpushim.ptx.heap import HEAP_KIND

    out, err = dev.empty(4 * 40), dev.empty(4 * 3)
    dev.launch("_Z9heap_userPiiS_", 1, 1, out, 40, err)
    assert (dev.get(out, np.int32, 40) == np.arange(40) ** 2).all()
    assert dev.get(err, np.int32, 3).tolist() == [0, 2, 1]
    assert not [a for a in dev.mem.allocations() if a.kind == HEAP_KIND]  # the tail launch freed it


def test_device_memcpy_and_memset(dev):
    src, dst, out, err = dev.empty(64), dev.empty(64), dev.empty(12), dev.empty(16)
    dev.launch("_Z13device_copiesPiS_S_S_", 1, 1, src, dst, out, err)
    assert dev.get(out, np.int32, 2).tolist() == [136, 100]  # each runs in stream order with the launches
    assert dev.get(err, np.int32, 4).tolist() == [0, 0, 1, 1]  # global memory and device to device only
    with pytest.raises(CudaError) as e:
        dev.launch("_Z15device_bad_copyPi", 1, 1, dst)
    assert e.value.code == Err.ILLEGAL_ADDRESS and "cudaMemcpyAsync in device code" in str(e.value)


def test_explicit_parameter_buffer_and_launch(dev):
    out, err = dev.empty(16), dev.empty(16)
    dev.launch("_Z15explicit_launchPiS_", 1, 1, out, err)
    assert dev.get(out, np.int32, 4).tolist() == [0, 0, 0, 42]
    # a buffer launches once (then cudaErrorInvalidValue), must hold the kernel's parameters, and the
    # function must be a kernel (cudaErrorInvalidDeviceFunction)
    assert dev.get(err, np.int32, 4).tolist() == [0, 1, 1, 98]
    assert not _leftover(dev)


def test_device_events(dev):
    out, err = dev.empty(8), dev.empty(24)
    dev.launch("_Z6eventsPiS_", 1, 1, out, err)
    assert dev.get(out, np.int32, 2).tolist() == [5, 5]
    # device-side events must be created with cudaEventDisableTiming (Programming Guide, dynamic
    # parallelism, "Events"): cudaErrorInvalidValue otherwise; a destroyed event is an invalid handle
    assert dev.get(err, np.int32, 6).tolist() == [0, 0, 0, 0, 400, 1]


def test_device_ordinal():
    from gpushim.ptx import devrt

    dev = Dev(compile_ptx("devrt", "sm_75", RDC))
    out, err = dev.empty(8), dev.empty(8)
    dev.launch("_Z6whoamiPiS_", 1, 1, out, err)
    assert dev.get(err, np.int32, 2).tolist() == [801, 801]  # a memory no backend described
    devrt.set_device(dev.mem, 1, 2)
    dev.launch("_Z6whoamiPiS_", 1, 1, out, err)
    assert dev.get(out, np.int32, 2).tolist() == [1, 2] and dev.get(err, np.int32, 2).tolist() == [0, 0]


def test_unsupported_device_runtime_function_is_refused_at_load():
    ptx = compile_ptx("devrt_unsupported", "sm_75", RDC)
    with pytest.raises(PtxUnsupported) as e:
        load_module(ptx)
    assert "cudaDeviceGetAttribute" in str(e.value)
    mod = load_module(ptx, strict=False)
    assert "cudaDeviceGetAttribute" in mod.unsupported["_Z16device_attributePi"]


def test_rdc_link_keeps_each_units_internal_names():
    """Two units' PTX with the same internal names (nvcc's printf strings $str, a non-visible .func) linked as
    the emulator links relocatable device code (gpushim/ptx/rdc.py): each unit keeps its own."""
    from gpushim.ptx.rdc import link_units

    unit = """.version 8.0
.target sm_75
.address_size 64
.global .align 1 .b8 $str[2] = {%d, 0};
.func (.param .b32 r) helper()
{
.reg .b32 %%r<2>;
mov.u32 %%r1, %d;
st.param.b32 [r], %%r1;
ret;
}
.visible .entry %s(.param .u64 out)
{
.reg .b32 %%r<3>;
.reg .b64 %%rd<4>;
ld.param.u64 %%rd1, [out];
mov.u64 %%rd2, $str;
ld.global.u8 %%r1, [%%rd2];
{ .param .b32 rv; call (rv), helper, (); ld.param.b32 %%r2, [rv]; }
add.u32 %%r1, %%r1, %%r2;
st.global.u32 [%%rd1], %%r1;
ret;
}
"""
    linked = link_units([unit % (1, 10, "k0"), unit % (2, 20, "k1")])
    d = Dev(linked)
    out = d.empty(8)
    d.launch("k0", 1, 1, out)
    d.launch("k1", 1, 1, out + 4)
    assert d.get(out, np.int32, 2).tolist() == [11, 22]


def test_child_the_engine_cannot_run_fails_the_launch_naming_it(engine):
    from gpushim.backends.emulator.memory import DeviceMemory

    mod = load_module(compile_ptx("devrt_unsupported", "sm_75", RDC), strict=False)
    mod.engine = engine
    assert "_Z9odd_childPy" in mod.unsupported and "_Z18launches_odd_childPy" not in mod.unsupported
    mem = DeviceMemory(1 << 24)
    out = mem.alloc(8)
    with pytest.raises(CudaError) as e:
        mod.launch("_Z18launches_odd_childPy", (1, 1, 1), (1, 1, 1), 0, out.to_bytes(8, "little"), mem, {},
                   lambda b: None)
    assert e.value.code == Err.NOT_SUPPORTED
    assert "launched from device code" in str(e.value) and "stacksave" in str(e.value)
    assert not [a for a in mem.allocations() if a.kind == PARAM_KIND]
