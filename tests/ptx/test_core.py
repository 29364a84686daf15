"""Core kernels against numpy references on fresh random inputs."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def basic(dev_for):
    return dev_for("basic")


@pytest.fixture(scope="module")
def linalg(dev_for):
    return dev_for("linalg")


def test_vector_add(basic, rng):
    n = 50_000 + int(rng.integers(0, 1000))
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    pa, pb, pc = basic.array(a), basic.array(b), basic.empty(4 * n)
    st = basic.launch("vectorAdd", (n + 255) // 256, 256, pa, pb, pc, n)
    assert np.array_equal(basic.get(pc, np.float32, n), a + b)
    assert st.blocks == (n + 255) // 256 and st.thread_instructions > 10 * n and st.wall_s > 0


def test_saxpy_grid_stride(basic, rng):
    n = 70_001
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    a = np.float32(rng.standard_normal())
    px, py = basic.array(x), basic.array(y)
    basic.launch("saxpy", 40, 128, n, a, px, py)  # 5120 threads: ~14 iterations each
    ref = (x.astype(np.float64) * a + y).astype(np.float32)  # fma: exact product, one rounding (f64 then f32)
    assert np.array_equal(basic.get(py, np.float32, n), ref)


def test_block_reduction_shared_syncthreads(basic, rng):
    n = 100_000
    x = rng.random(n, dtype=np.float32)
    nb = (n + 511) // 512
    pin, pout = basic.array(x), basic.empty(4 * nb)
    basic.launch("reduceSum", nb, 256, pin, pout, n)
    got = basic.get(pout, np.float32, nb)
    xp = np.zeros(nb * 512, np.float32)
    xp[:n] = x
    s = xp.reshape(nb, 2, 256)
    v = s[:, 0, :] + s[:, 1, :]  # first add (f32), then the tree in the kernel's order
    step = 128
    while step:
        v = v[:, :step] + v[:, step : 2 * step] if v.shape[1] > step else v
        step //= 2
    assert np.array_equal(got, v[:, 0])


def test_printf_order_and_formats(basic):
    basic.out.clear()
    basic.launch("hello", 2, 3, 7)
    lines = basic.text().splitlines()
    assert lines == [f"hello from block {b} thread {t} x=7 f=10.500000 s=str" for b in range(2) for t in range(3)]


def test_tiled_matmul(linalg, rng):
    n = 64
    a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    pa, pb, pc = linalg.array(a), linalg.array(b), linalg.empty(4 * n * n)
    linalg.launch("matmul", (n // 16, n // 16), (16, 16), pa, pb, pc, n)
    got = linalg.get(pc, np.float32, n * n).reshape(n, n)
    # exact reference: fma chain in k order, each step rounded to f32 (f64 product exact, one double rounding)
    acc = np.zeros((n, n), np.float32)
    for k in range(n):
        acc = (a[:, k : k + 1].astype(np.float64) * b[k : k + 1, :] + acc).astype(np.float32)
    assert np.allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    assert np.mean(got == acc) > 0.999


def test_transpose_padding(linalg, rng):
    w, h = 96, 64
    x = rng.random((h, w), dtype=np.float32)
    pi, po = linalg.array(x), linalg.empty(4 * w * h)
    linalg.launch("transpose", (w // 32, h // 32), (32, 8), po, pi, w, h)
    assert np.array_equal(linalg.get(po, np.float32, w * h).reshape(w, h), x.T)


def test_prefix_scan(linalg, rng):
    n = 3000
    x = rng.integers(-100, 100, n, dtype=np.int32)
    pi, po = linalg.array(x), linalg.empty(4 * n)
    linalg.launch("scanBlock", (n + 511) // 512, 512, pi, po, n)
    got = linalg.get(po, np.int32, n)
    ref = np.concatenate([np.cumsum(x[i : i + 512]) for i in range(0, n, 512)]).astype(np.int32)
    assert np.array_equal(got, ref)


def test_f64_arithmetic(linalg, rng):
    n = 5000
    a = rng.standard_normal(n) * 10
    b = rng.standard_normal(n) * 3
    pa, pb, po = linalg.array(a), linalg.array(b), linalg.empty(8 * 6 * n)
    linalg.launch("f64ops", (n + 127) // 128, 128, pa, pb, po, n)
    got = linalg.get(po, np.float64, 6 * n).reshape(n, 6)
    from fractions import Fraction

    fma_ref = np.array([float(Fraction(x) * Fraction(y) - Fraction(x)) for x, y in zip(a, b, strict=True)])
    assert np.array_equal(got[:, 2], fma_ref)
    assert np.array_equal(got[:, 1], np.sqrt(np.abs(a)) - b)
    assert np.array_equal(got[:, 3], np.fmin(a, b) + np.fmax(a, b) * 0.5)
    ll = np.trunc(a * 1000.0)
    assert np.array_equal(got[:, 4], ll + b.astype(np.float32).astype(np.float64))
    assert np.array_equal(got[:, 5], np.where(a < b, a - b, b - a))
    assert np.allclose(got[:, 0], a * b + a / b, rtol=1e-15)
