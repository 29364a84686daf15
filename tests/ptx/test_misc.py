"""Constant memory, dynamic shared memory, device calls, local arrays, divergence, printf, errors."""

import numpy as np
import pytest

from gpushim.cuda_errors import CudaError, Err


@pytest.fixture
def misc(dev_for):
    return dev_for("misc")


def test_constant_memory_and_globals(misc, rng):
    n = 1000
    x = rng.uniform(-1, 1, n).astype(np.float32)
    coef = rng.uniform(-1, 1, 16).astype(np.float32)
    assert misc.mod.globals["c_coef"].space == "const" and misc.mod.globals["c_coef"].size == 64
    assert misc.mod.globals["c_init"].init == np.array([3, 1, 4, 1], np.int32).tobytes()
    misc.mem.write(misc.symbols["c_coef"], coef.tobytes())  # cudaMemcpyToSymbol
    px, py = misc.array(x), misc.empty(4 * n)
    misc.launch("constPoly", (n + 127) // 128, 128, px, py, n)
    got = misc.get(py, np.float32, n)
    acc = np.zeros(n, np.float32)
    p = np.ones(n, np.float32)
    for k in range(16):
        acc = (p.astype(np.float64) * coef[k] + acc).astype(np.float32) if k else (acc + coef[0] * p)
        p = p * x
    ref = acc + np.array([3, 1, 4, 1], np.float32)[np.arange(n) & 3]
    ref = np.arange(1, 9, dtype=np.float32)[np.arange(n) & 7] + ref
    assert np.allclose(got, ref, rtol=1e-5, atol=1e-5)
    assert misc.get(misc.symbols["g_counter"], np.int32, 1)[0] == n


def test_dynamic_shared_memory(misc, rng):
    n = 1000
    x = rng.integers(0, 1 << 20, n, dtype=np.int32)
    pi, po = misc.array(x), misc.empty(4 * n)
    misc.launch("dynShared", (n + 199) // 200, 200, pi, po, n, shared=200 * 4)
    got = misc.get(po, np.int32, n)
    xp = np.zeros(1000, np.int32)
    xp[:n] = x
    ref = xp.reshape(-1, 200)[:, ::-1].ravel()[:n]
    assert np.array_equal(got, ref)


def test_device_function_calls(misc, rng):
    n = 777
    x = rng.uniform(-2, 2, n).astype(np.float32)
    px, po = misc.array(x), misc.empty(8 * n)
    misc.launch("devCalls", (n + 63) // 64, 64, px, po, n)
    got = misc.get(po, np.float64, n)
    i = np.arange(n)
    k = (i & 3) + 1
    sq = np.array([np.prod(np.full(kk, xx, np.float32), dtype=np.float32) for xx, kk in zip(x, k, strict=True)])
    pair = ((x * 2) + i.astype(np.float32)).astype(np.float64) + (x.astype(np.float64) + 0.5)
    assert np.allclose(got, sq.astype(np.float64) + pair, rtol=1e-6)


def test_per_thread_local_arrays(misc, rng):
    n = 500
    x = rng.integers(0, 1000, n, dtype=np.int32)
    pi, po = misc.array(x), misc.empty(4 * n)
    misc.launch("localArr", (n + 127) // 128, 128, pi, po, n)
    got = misc.get(po, np.int32, n)
    ref = []
    for i in range(n):
        a = [int(x[i]) * k + (k ^ i) for k in range(24)]
        ref.append(sum(a[(k * 7 + int(x[i])) % 24] * (k + 1) for k in range(24)))
    assert np.array_equal(got, np.array(ref, np.int64).astype(np.int32))


def test_data_dependent_divergent_loops(misc, rng):
    n = 3000
    x = rng.integers(1, 10_000, n, dtype=np.int32)
    pi, po = misc.array(x), misc.empty(4 * n)
    misc.launch("divergent", (n + 255) // 256, 256, pi, po, n)
    got = misc.get(po, np.int32, n)
    ref = []
    for i, v in enumerate(x.tolist()):
        steps = 0
        while v != 1 and steps < 1000:
            v = 3 * v + 1 if v & 1 else v >> 1
            steps += 1
        if steps & 1:
            for k in range(i & 7):
                steps += k * v
        else:
            steps = -steps
        ref.append(steps)
    assert np.array_equal(got, np.array(ref, np.int64).astype(np.int32))


def test_printf_formats(misc):
    misc.out.clear()
    misc.launch("printer", 2, 4, 6)
    lines = misc.text().splitlines()
    exp = []
    for i in range(6):
        b, t = divmod(i, 4)
        c_fmt = "t%d b%d v=%d u=%u x=%x f=%.3f e=%e s=%s c=%c l=%d %5d|%-4d|"
        vals = (t, b, i * 3 - 7, (i - 2) & 0xFFFFFFFF, i * 255, i * 0.25, i * 1e10, "hey", chr(65 + i), i << 40, i, i)
        exp.append(c_fmt % vals)
    assert lines == exp


def test_out_of_bounds_is_illegal_address(misc):
    p = misc.empty(64)
    misc.launch("oob", 1, 16, p, 1)  # in bounds
    with pytest.raises(CudaError) as e:
        misc.launch("oob", 1, 16, p, 5)
    assert e.value.code == Err.ILLEGAL_ADDRESS
    with pytest.raises(CudaError) as e:
        misc.launch("oob", 1, 4, 0, 1)  # null pointer
    assert e.value.code == Err.ILLEGAL_ADDRESS


def test_misaligned_access(misc):
    p = misc.empty(256)
    with pytest.raises(CudaError) as e:
        misc.launch("misaligned", 1, 8, p)
    assert e.value.code == Err.MISALIGNED_ADDRESS


def test_trap_is_launch_failure(misc):
    x = np.arange(32, dtype=np.int32)
    with pytest.raises(CudaError) as e:
        misc.launch("trapper", 1, 32, misc.array(x))
    assert e.value.code == Err.LAUNCH_FAILURE
    misc.launch("trapper", 1, 7, misc.array(x))  # thread 7 absent: no trap


def test_assert_prints_and_fails(misc):
    x = np.zeros(64, np.int32)
    misc.launch("asserter", 2, 32, misc.array(x))
    x[37] = 500
    misc.out.clear()
    with pytest.raises(CudaError) as e:
        misc.launch("asserter", 2, 32, misc.array(x))
    assert e.value.code == Err.ASSERT
    text = misc.text()
    assert "block: [1,0,0], thread: [5,0,0] Assertion `in[i] < 100` failed." in text
    assert text.startswith("misc.cu:") or "misc.cu:" in text


def test_watchdog_launch_timeout(misc):
    flag = misc.array(np.zeros(1, np.int32))
    misc.mod.watchdog_s = 0.5
    try:
        with pytest.raises(CudaError) as e:
            misc.launch("spin", 1, 32, flag)
        assert e.value.code == Err.LAUNCH_TIMEOUT
    finally:
        misc.mod.watchdog_s = 120.0


def test_launch_configuration_errors(misc):
    p = misc.empty(64)
    for grid, block in (((0, 1, 1), (1, 1, 1)), ((1, 1, 1), (2048, 1, 1)), ((1, 1, 1), (32, 32, 2))):
        with pytest.raises(CudaError) as e:
            misc.launch_raw("oob", grid, block, 0, misc.pack("oob", p, 1), misc.mem, misc.symbols, misc.out.append)
        assert e.value.code == Err.INVALID_CONFIGURATION
    with pytest.raises(CudaError) as e:
        misc.launch_raw("dynShared", (1, 1, 1), (32, 1, 1), 1 << 20, bytes(20), misc.mem, misc.symbols, print)
    assert e.value.code == Err.INVALID_CONFIGURATION
    with pytest.raises(CudaError) as e:
        misc.launch_raw("oob", (1, 1, 1), (1, 1, 1), 0, bytes(3), misc.mem, misc.symbols, print)
    assert e.value.code == Err.INVALID_VALUE


def test_kernel_info(misc):
    k = misc.mod.kernels["devCalls"]
    assert [(p.offset, p.size, p.align) for p in k.params] == [(0, 8, 8), (8, 8, 8), (16, 4, 4)]
    assert k.param_bytes == 20
    assert misc.mod.ptx_version >= (7, 0) and misc.mod.target == "sm_75"


def test_launch_bounds(misc):
    p = misc.empty(4 * 256)
    misc.launch("bounded", 1, 128, p)
    with pytest.raises(CudaError) as e:
        misc.launch("bounded", 1, 256, p)
    assert e.value.code == Err.LAUNCH_OUT_OF_RESOURCES
