"""CudaSession's own logic, run through the real cuda-python bindings (which type-check every argument)
onto a stand-in for libcuda (fake_driver.py): copies through pinned staging, 2D copies, bounds checks,
host-function hand-over between the driver's thread and the worker's, idle checks that never block,
parameter layouts and packing, symbols, reset. What a real GPU does is checked by tools/gpu_check.sh."""

from __future__ import annotations

import ctypes
import hashlib
import os
import select
import time

import pytest

pytest.importorskip("cuda.bindings.driver")


def _driver_present() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


# The stand-in relies on the bindings failing to load libcuda; with a real driver they would run its calls
# on bogus handles. There the end-to-end suite on the cuda backend covers this (tests/cuda_backend/test_gpu_e2e).
pytestmark = pytest.mark.skipif(_driver_present(), reason="an NVIDIA driver is present: run the e2e suite instead")

from gpushim.backends.cuda.backend import CudaBackend, CudaSession  # noqa: E402
from gpushim.backends.cuda.staging import CHUNK, POOL_MAX  # noqa: E402
from gpushim.cuda_errors import CudaError, Err  # noqa: E402
from tests.cuda_backend.fake_driver import FakeDriver  # noqa: E402
from tests.cuda_backend.test_discovery import GPUS, UUID0, UUID1, FakeNvml, _raw  # noqa: E402
from tests.cuda_backend.test_params import MIXED  # noqa: E402


def make_session(**fake: object) -> tuple[CudaSession, FakeDriver, bytearray]:
    raws = [_raw("h100", 0, UUID0, "0000:1B:00.0"), _raw("h100", 1, UUID1, "0000:3B:00.0")]
    be = CudaBackend(nvml=FakeNvml(GPUS), driver_devices={"driver_version": 12080, "devices": raws})
    drv = FakeDriver(**fake)  # type: ignore[arg-type]
    out = bytearray()
    return CudaSession(be, out.extend, driver=drv, capture_printf=False), drv, out


def test_memory_round_trip_through_staging() -> None:
    s, drv, _ = make_session()
    data = os.urandom(3 * CHUNK + 12345)
    p = s.malloc(0, len(data))
    assert s.pointer_info(p + 10) == (2, 0, p, len(data))
    assert s.pointer_info(p - 1)[0] == 0
    for _ in range(3):
        s.write(None, p, data)
        s.write(None, p, memoryview(data))
    assert len(s.staging.buffers) <= POOL_MAX
    assert s.read(None, p, len(data)) == data
    assert s.read(None, p + 7, 100) == data[7:107]
    q = s.malloc(0, 64)
    s.memset(None, q, 0x1AB, 64)
    s.copy(None, p, q, 32)
    assert s.read(None, p, 40) == b"\xab" * 32 + data[32:40]
    assert s.allocations() == [(0, p, len(data)), (0, q, 64)]
    assert s.mem_info(0) == (1 << 30, 2 << 30)
    with pytest.raises(CudaError) as ei:
        s.write(None, q + 60, b"x" * 8)
    assert ei.value.code == Err.INVALID_VALUE and "past the end" in ei.value.message
    with pytest.raises(CudaError):
        s.read(None, 0x1234, 4)
    s.free(q)
    with pytest.raises(CudaError):
        s.free(q)
    assert "cuMemFree" in drv.calls and s.malloc(0, 0) != 0  # cudaMalloc(0) still gives a distinct pointer


def test_shared_pinned_memory_copies() -> None:
    """cudaMemcpyAsync from/to the client's pinned memory (a shared mapping): through staging, in stream order."""
    s, drv, _ = make_session()
    shared = bytearray(os.urandom(1 << 16))
    p = s.malloc(0, len(shared))
    st = s.stream_create(0, 0, 0)
    s.write_shared(st, p, memoryview(shared)[100:60100])
    back = bytearray(60000)
    s.read_into(st, p, memoryview(back))
    assert back == shared[100:60100]
    assert drv.calls.count("cuLaunchHostFunc") == 2 and not s.hub.calls
    assert s.take_async_error() is None


def test_2d_copies() -> None:
    s, _, _ = make_session()
    p, pitch = s.malloc_pitch(0, 100, 7)
    assert pitch >= 100 and pitch % 512 == 0
    rows = bytes(range(100)) * 7
    s.write_2d(None, p, pitch, 100, 7, rows)
    assert s.read_2d(None, p, pitch, 100, 7) == rows
    s.memset_2d(None, p, pitch, 0xEE, 10, 7)
    got = s.read_2d(None, p, pitch, 100, 7)
    assert all(got[y * 100 : y * 100 + 10] == b"\xee" * 10 for y in range(7))
    q, qpitch = s.malloc_pitch(0, 100, 7)
    s.copy_2d(None, q, qpitch, p, pitch, 100, 7)
    assert s.read_2d(None, q, qpitch, 100, 7) == got
    with pytest.raises(CudaError) as ei:
        s.write_2d(None, p, pitch, pitch + 1, 1, bytes(pitch + 1))
    assert ei.value.code == Err.INVALID_PITCH_VALUE
    assert s.malloc_pitch(0, 0, 5) == (0, 512)


def _wait_for(cond, timeout: float = 5.0) -> None:  # noqa: ANN001
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def test_host_function_hand_over() -> None:
    s, drv, _ = make_session()
    st = s.stream_create(0, 0, -9)
    assert st.priority == -5  # clamped to the device's range
    assert s.backend.devices()[0].priority_range == (0, -5)
    other = s.stream_create(0, 1, 0)  # cudaStreamNonBlocking
    notified: list[str] = []
    done = s.host_func(st, lambda: notified.append("st"))
    # the driver's thread reached the function: the worker's select wakes on wakeup_fd, tick() notifies
    _wait_for(lambda: select.select([s.wakeup_fd], [], [], 0)[0] != [])
    assert s.tick(False) is None and notified == ["st"]
    assert not s.stream_idle(st) and not s.device_idle(0)
    assert s.stream_idle(other)
    assert s.tick(True) == 0.0  # a reply waits: spin first
    done()
    _wait_for(lambda: s.stream_idle(st))
    assert s.device_idle(0)
    assert all(not t.is_alive() for t in drv.threads)


def test_blocking_stream_waits_for_a_held_legacy_stream() -> None:
    s, drv, _ = make_session()
    blocking = s.stream_create(0, 0, 0)
    nonblocking = s.stream_create(0, 1, 0)
    got: list[int] = []
    done = s.host_func(s.default_stream(0), lambda: got.append(1))
    _wait_for(lambda: (s.tick(False), got)[1] == [1])
    # a copy queued on `blocking` now would wait behind the legacy stream: not idle, so no read blocks
    assert not s.stream_idle(blocking)
    assert s.stream_idle(nonblocking)
    done()
    _wait_for(lambda: s.stream_idle(blocking))


@pytest.mark.parametrize("mem_ops", [True, False])
def test_close_releases_held_host_functions(mem_ops: bool) -> None:
    """With stream memory operations the stream waits on a signal and the driver's thread is free at once;
    without them the callback itself holds the stream. Either way close() lets every stream go."""
    s, drv, _ = make_session(mem_ops=mem_ops)
    st = s.stream_create(0, 0, 0)
    got: list[int] = []
    s.host_func(st, lambda: got.append(1))
    _wait_for(lambda: (s.tick(False), got)[1] == [1])
    assert not s.stream_idle(st)
    assert s.stream_mem_ops is mem_ops
    assert any(t.is_alive() for t in drv.threads) is not mem_ops  # a blocked callback only without mem ops
    s.close()
    for t in drv.threads:
        t.join(5)
    assert all(not t.is_alive() for t in drv.threads)
    assert not drv._held(st.handle)


def test_host_functions_in_order_on_one_stream() -> None:
    """Three host functions queued back to back: each notifies only when the one before it is done."""
    s, drv, _ = make_session()
    st = s.stream_create(0, 0, 0)
    seen: list[int] = []
    dones = [s.host_func(st, lambda i=i: seen.append(i)) for i in range(3)]
    for i in range(3):
        _wait_for(lambda i=i: (s.tick(False), seen)[1] == list(range(i + 1)))
        assert not s.stream_idle(st)
        dones[i]()
    assert s.stream_idle(st) and st.signal is not None and st.signal_target >= 3


def test_events() -> None:
    s, _, _ = make_session()
    st = s.stream_create(0, 0, 0)
    a, b = s.event_create(0, 0), s.event_create(0, 0)
    s.event_record(a, st)
    s.stream_wait_event(s.default_stream(0), a)
    s.event_record(b, s.default_stream(0))
    assert s.event_idle(b) and s.event_elapsed_ms(a, b) == 0.25
    s.event_destroy(a)
    s.stream_destroy(st)
    assert s.device_idle(0)


@pytest.mark.parametrize("param_info", [True, False])
def test_kernels(fatbin: bytes, param_info: bool) -> None:
    layouts = {"mixed": MIXED, "nothing": [], "_Z5scaleIfEvPT_S0_j": [(0, 8), (8, 4), (12, 4)]}
    s, drv, _ = make_session(layouts=layouts, param_info=param_info)
    key = hashlib.sha256(fatbin).digest()
    s.load_module(key, fatbin)
    assert s.has_module(key)
    params, nbytes, attrs = s.function_info(0, key, "mixed")
    assert params == [list(x) for x in MIXED] and nbytes >= 66
    assert attrs["maxThreadsPerBlock"] == 1024 and set(attrs) >= {"numRegs", "sharedSizeBytes", "ptxVersion"}
    assert ("cuFuncGetParamInfo" in drv.calls) == param_info or not param_info
    buf = bytes(range(72))
    st = s.stream_create(0, 0, 0)
    s.launch(0, key, "mixed", [2, 1, 1], [128, 1, 1], 0, st, buf)
    s.launch(0, key, "nothing", [1, 1, 1], [1, 1, 1], 64 * 1024, None, b"")  # opts in above 48 KiB
    first, second = drv.launches
    assert first["values"] == [buf[o : o + n] for o, n in MIXED] and first["grid"] == (2, 1, 1)
    assert first["stream"] == int(st.handle) and second["stream"] == 1 and second["shared"] == 64 * 1024
    assert "cuFuncSetAttribute" in drv.calls
    with pytest.raises(CudaError) as ei:
        s.launch(0, key, "mixed", [1, 1, 1], [2048, 1, 1], 0, None, buf)
    assert ei.value.code == Err.INVALID_CONFIGURATION
    with pytest.raises(CudaError) as ei:
        s.launch(0, key, "mixed", [1, 1, 1], [1, 1, 1], 0, None, buf[:40])
    assert ei.value.code == Err.INVALID_VALUE
    with pytest.raises(CudaError) as ei:
        s.function_info(0, key, "no_such_kernel")
    assert ei.value.code == 98
    ptr, size = s.symbol_info(0, key, "counter")
    s.write(None, ptr, b"\1\0\0\0")  # cudaMemcpyToSymbol lands on the variable
    assert s.read(None, ptr, 4) == b"\1\0\0\0" and size == 4
    with pytest.raises(CudaError) as ei:
        s.symbol_info(0, key, "nope")
    assert ei.value.code == Err.INVALID_SYMBOL
    # a second device loads the module in its own context
    s.function_info(1, key, "mixed")
    assert set(s.modules[key].handles) == {0, 1}
    s.reset_device(0)
    assert set(s.modules[key].handles) == {1} and s.allocations() == []
