"""tex/tld4/txq/suld/sust against scalar host references of CUDA's texture fetching rules (CUDA C++ Programming
Guide, appendix "Texture Fetching": address modes, nearest-point and linear filtering with 9-bit fixed-point
weights; "Cubemap Textures" for face selection)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpushim.cuda_errors import CudaError
from gpushim.ptx import texdesc as td

WRAP, CLAMP, MIRROR, BORDER = td.ADDR_WRAP, td.ADDR_CLAMP, td.ADDR_MIRROR, td.ADDR_BORDER


@pytest.fixture(scope="module")
def dev(dev_for):
    return dev_for("tex")


def make_tex(dev, data: np.ndarray, channels: int, *, restype=td.RES_ARRAY, flags=0, depth=1, height=None,
             addr=(CLAMP,) * 3, filt=td.FILTER_POINT, read=td.READ_ELEMENT, norm=0, border=(0.0,) * 4,
             surface=False):
    kind = {"f": td.KIND_FLOAT, "i": td.KIND_SIGNED, "u": td.KIND_UNSIGNED}[data.dtype.kind]
    bits = data.dtype.itemsize * 8
    flat = data.reshape(-1)
    width = data.shape[-2] if channels > 1 else data.shape[-1]
    rows = flat.size // (width * channels) // depth
    base = dev.array(flat)
    d = td.Desc(td.SURF_MAGIC if surface else td.TEX_MAGIC, restype, base, width * channels * data.itemsize, width,
                height or rows, depth, flags, channels, bits, kind, tuple(addr), filt, read, norm, 0, tuple(border))
    assert td.check(d) is None
    return dev.array(np.frombuffer(d.pack(), np.uint8)), base


def addr_index(i, n, mode, norm):
    if mode == BORDER:
        return (i, True) if 0 <= i < n else (0, False)
    if norm and mode == WRAP:
        return i % n, True
    if norm and mode == MIRROR:
        k = i % (2 * n)
        return (k if k < n else 2 * n - 1 - k), True
    return min(max(i, 0), n - 1), True


def w9(f):
    return np.float32(math.floor(f * 256 + 0.5) / 256)


def ref_2d(img, x, y, mode, filt, norm, border=0.0):
    """img[h, w] float32; one texel (scalar) result."""
    h, w = img.shape
    if norm:
        x, y = x * w, y * h

    def tap(i, j):
        ii, oki = addr_index(i, w, mode, norm)
        jj, okj = addr_index(j, h, mode, norm)
        return np.float32(img[jj, ii]) if oki and okj else np.float32(border)

    if filt == td.FILTER_POINT:
        return tap(math.floor(x), math.floor(y))
    xb, yb = x - 0.5, y - 0.5
    i, j = math.floor(xb), math.floor(yb)
    a, b = w9(xb - i), w9(yb - j)
    one = np.float32(1)
    return np.float32(((one - a) * (one - b)) * tap(i, j) + (a * (one - b)) * tap(i + 1, j)
                      + ((one - a) * b) * tap(i, j + 1) + (a * b) * tap(i + 1, j + 1))


@pytest.mark.parametrize("mode", [WRAP, CLAMP, MIRROR, BORDER])
@pytest.mark.parametrize("filt", [td.FILTER_POINT, td.FILTER_LINEAR])
@pytest.mark.parametrize("norm", [0, 1])
def test_2d_modes_filters(dev, rng, mode, filt, norm):
    h, w = 5, 7
    img = rng.standard_normal((h, w)).astype(np.float32)
    t, _ = make_tex(dev, img, 1, addr=(mode, mode, mode), filt=filt, norm=norm, border=(2.5, 0, 0, 1))
    n = 200
    span = (-1.5, 2.5) if norm else (-4.0, w + 4.0)
    xs = rng.uniform(*span, n).astype(np.float32)
    ys = rng.uniform(*span, n).astype(np.float32)
    out = dev.empty(16 * n)
    dev.launch("f2d", (n + 63) // 64, 64, t, dev.array(xs), dev.array(ys), out, n)
    got = dev.get(out, np.float32, 4 * n).reshape(n, 4)
    want = np.array([ref_2d(img, float(xs[i]), float(ys[i]), mode, filt, norm, 2.5) for i in range(n)], np.float32)
    np.testing.assert_allclose(got[:, 0], want, rtol=0, atol=2e-6)
    assert (got[:, 1:3] == 0).all() and (got[:, 3] == 1).all()  # missing channels read (0, 0, 1)


def test_linear_weight_is_9_bit(dev):
    # Two texels 0 and 1: a linear fetch at x returns the 9-bit weight of frac(x - 0.5), not frac itself.
    img = np.array([[0.0, 1.0]], np.float32)
    t, _ = make_tex(dev, img, 1, filt=td.FILTER_LINEAR)
    xs = np.array([0.5 + k / 1000 for k in range(0, 1000, 37)], np.float32)
    out = dev.empty(4 * xs.size)
    dev.launch("f1d", 1, xs.size, t, dev.array(xs), out, xs.size)
    got = dev.get(out, np.float32, xs.size)
    np.testing.assert_array_equal(got, [w9(float(x) - 0.5) for x in xs])
    assert len(set(got.tolist())) < xs.size or all(g * 256 == int(g * 256) for g in got)


def test_normalized_float_read_mode(dev, rng):
    img = rng.integers(0, 256, (3, 4, 4), dtype=np.uint8)  # uchar4 texels
    t, _ = make_tex(dev, img, 4, read=td.READ_NORMALIZED)
    ys, xs = np.meshgrid(np.arange(3) + 0.5, np.arange(4) + 0.5, indexing="ij")
    xs, ys = xs.ravel().astype(np.float32), ys.ravel().astype(np.float32)
    out = dev.empty(16 * xs.size)
    dev.launch("f2d", 1, xs.size, t, dev.array(xs), dev.array(ys), out, xs.size)
    got = dev.get(out, np.float32, 4 * xs.size).reshape(3, 4, 4)
    np.testing.assert_array_equal(got, (img / 255.0).astype(np.float32))
    s = rng.integers(-128, 128, (1, 4), dtype=np.int8)
    t, _ = make_tex(dev, s, 1, read=td.READ_NORMALIZED)
    xs = np.arange(4, dtype=np.float32) + 0.5
    out = dev.empty(16)
    dev.launch("f1d", 1, 4, t, dev.array(xs), out, 4)
    np.testing.assert_array_equal(dev.get(out, np.float32, 4), np.maximum(s[0] / 127.0, -1).astype(np.float32))


def test_element_read_mode_uchar4(dev, rng):
    img = rng.integers(0, 256, (2, 3, 4), dtype=np.uint8)
    t, _ = make_tex(dev, img, 4)
    ys, xs = np.meshgrid(np.arange(2) + 0.25, np.arange(3) + 0.75, indexing="ij")
    out = dev.empty(4 * 6)
    dev.launch("elem2d", 1, 6, t, dev.array(xs.ravel().astype(np.float32)), dev.array(ys.ravel().astype(np.float32)),
               out, 6)
    np.testing.assert_array_equal(dev.get(out, np.uint8, 24).reshape(2, 3, 4), img)


def test_1d_linear_fetch_out_of_range_is_zero(dev):
    data = np.arange(10, 20, dtype=np.int32)
    t, _ = make_tex(dev, data, 1, restype=td.RES_LINEAR)
    out = dev.empty(4 * 14)
    dev.launch("fetch", 1, 14, t, out, 14)
    np.testing.assert_array_equal(dev.get(out, np.int32, 14), [0, 0, *range(10, 20), 0, 0])


def test_3d_linear(dev, rng):
    vol = rng.standard_normal((3, 4, 5)).astype(np.float32)
    t, _ = make_tex(dev, vol, 1, depth=3, height=4, flags=td.FLAG_3D, filt=td.FILTER_LINEAR)
    n = 64
    xs, ys, zs = (rng.uniform(-1, s + 1, n).astype(np.float32) for s in (5, 4, 3))
    out = dev.empty(4 * n)
    dev.launch("f3d", 1, n, t, dev.array(xs), dev.array(ys), dev.array(zs), out, n)

    def ref(x, y, z):
        b = [x - 0.5, y - 0.5, z - 0.5]
        i = [math.floor(v) for v in b]
        wts = [w9(v - k) for v, k in zip(b, i, strict=True)]
        acc = np.float32(0)
        for c in range(8):
            wt = np.float32(1)
            idx = []
            for k in range(3):
                hi = (c >> k) & 1
                wt = wt * (wts[k] if hi else np.float32(1) - wts[k])
                idx.append(min(max(i[k] + hi, 0), (5, 4, 3)[k] - 1))
            acc = acc + wt * vol[idx[2], idx[1], idx[0]]
        return acc

    want = [ref(float(xs[j]), float(ys[j]), float(zs[j])) for j in range(n)]
    np.testing.assert_allclose(dev.get(out, np.float32, n), want, rtol=0, atol=3e-6)


def test_layered(dev, rng):
    lay = rng.standard_normal((4, 3, 5)).astype(np.float32)  # 4 layers of 3x5
    t, _ = make_tex(dev, lay, 1, depth=4, height=3, flags=td.FLAG_LAYERED)
    n = 40
    xs = rng.uniform(0, 5, n).astype(np.float32)
    ys = rng.uniform(0, 3, n).astype(np.float32)
    ls = rng.integers(0, 4, n).astype(np.int32)
    out = dev.empty(4 * n)
    dev.launch("fa2d", 1, n, t, dev.array(xs), dev.array(ys), dev.array(ls), out, n)
    np.testing.assert_array_equal(dev.get(out, np.float32, n),
                                  lay[ls, ys.astype(int), xs.astype(int)])
    one = rng.standard_normal((3, 6)).astype(np.float32)  # 3 layers of 6 texels
    t, _ = make_tex(dev, one, 1, depth=3, height=1, flags=td.FLAG_LAYERED)
    xs = rng.uniform(0, 6, n).astype(np.float32)
    ls = rng.integers(0, 3, n).astype(np.int32)
    dev.launch("fa1d", 1, n, t, dev.array(xs), dev.array(ls), out, n)
    np.testing.assert_array_equal(dev.get(out, np.float32, n), one[ls, xs.astype(int)])


def test_cubemap_faces(dev):
    # face f holds the value 10 * f + texel index; one direction per face, pointing at known texels
    w = 4
    faces = np.array([[[10 * f + y * w + x for x in range(w)] for y in range(w)] for f in range(6)], np.float32)
    t, _ = make_tex(dev, faces, 1, depth=6, height=w, flags=td.FLAG_CUBEMAP, norm=1)
    # (direction, face, s, t) per the guide's table: s/m, t/m of 0 hit the face's centre texel (2, 2)
    dirs = [(1, 0, 0, 0), (-1, 0, 0, 1), (0, 1, 0, 2), (0, -1, 0, 3), (0, 0, 1, 4), (0, 0, -1, 5),
            (1, 0.9, -0.9, 0)]  # +x with s = -z/|x| = 0.9 -> u = 0.95 (x texel 3), t = -y/|x| = -0.9 -> row 0
    xs, ys, zs = (np.array([d[k] for d in dirs], np.float32) for k in range(3))
    out = dev.empty(4 * len(dirs))
    dev.launch("fcube", 1, len(dirs), t, dev.array(xs), dev.array(ys), dev.array(zs), out, len(dirs))
    got = dev.get(out, np.float32, len(dirs))
    np.testing.assert_array_equal(got[:6], [10 * f + 2 * w + 2 for f in range(6)])
    assert got[6] == 0 * w + 3


def test_gather(dev, rng):
    img = rng.standard_normal((4, 4)).astype(np.float32)
    t, _ = make_tex(dev, img, 1)
    xs, ys = np.array([1.6, 0.2], np.float32), np.array([2.3, 3.9], np.float32)
    out = dev.empty(32)
    dev.launch("gather", 1, 2, t, dev.array(xs), dev.array(ys), out, 2)
    got = dev.get(out, np.float32, 8).reshape(2, 4)
    for k in range(2):
        i, j = math.floor(xs[k] - 0.5), math.floor(ys[k] - 0.5)
        c = lambda a, b: img[min(max(b, 0), 3), min(max(a, 0), 3)]  # noqa: E731
        # PTX ISA tld4: (u0, v1), (u1, v1), (u1, v0), (u0, v0)
        np.testing.assert_array_equal(got[k], [c(i, j + 1), c(i + 1, j + 1), c(i + 1, j), c(i, j)])


def test_txq(dev):
    vol = np.zeros((3, 4, 5), np.float32)
    t, _ = make_tex(dev, vol, 1, depth=3, height=4, flags=td.FLAG_3D)
    out = dev.empty(12)
    dev.launch("query", 1, 1, t, out)
    assert dev.get(out, np.int32, 3).tolist() == [5, 4, 3]


def test_surface_read_write(dev, rng):
    w, h = 37, 5
    img = rng.standard_normal((h, w)).astype(np.float32)
    s, _ = make_tex(dev, img, 1, surface=True)
    o, obase = make_tex(dev, np.zeros((h, w), np.float32), 1, surface=True)
    dev.launch("surf", (2, h), 32, s, o, w, h)
    np.testing.assert_array_equal(dev.get(obase, np.float32, w * h).reshape(h, w), img + 1)


def test_surface_boundary_modes(dev):
    data = np.arange(1, 6, dtype=np.int32)
    s, _ = make_tex(dev, data, 1, surface=True)
    out = dev.empty(4 * 16)
    dev.launch("surf_modes", 1, 8, s, out, 5)
    got = dev.get(out, np.int32, 16).reshape(8, 2)
    assert got[:, 0].tolist() == [1, 2, 3, 4, 5, 0, 0, 0]  # cudaBoundaryModeZero
    assert got[:, 1].tolist() == [1, 2, 3, 4, 5, 5, 5, 5]  # cudaBoundaryModeClamp
    with pytest.raises(CudaError, match="surface access out of range"):  # cudaBoundaryModeTrap
        dev.launch("surf_trap", 1, 8, s, out, 5)


def test_surface_layered_write(dev):
    w, h, layers = 6, 3, 2
    s, base = make_tex(dev, np.zeros((layers, h, w, 2), np.int16), 2, depth=layers, height=h, flags=td.FLAG_LAYERED,
                       surface=True)
    dev.launch("surf_layered", (h, layers), w, s, w, h, layers)
    got = dev.get(base, np.int16, layers * h * w * 2).reshape(layers, h, w, 2)
    for li in range(layers):
        for y in range(h):
            assert got[li, y, :, 0].tolist() == [x + 100 * y for x in range(w)]
            assert (got[li, y, :, 1] == li).all()


def test_bad_handles_fault(dev):
    img = np.zeros((2, 2), np.float32)
    t, base = make_tex(dev, img, 1)
    out = dev.empty(16)
    xs = dev.array(np.zeros(1, np.float32))
    with pytest.raises(CudaError, match="not a texture"):
        dev.launch("f2d", 1, 1, base, xs, xs, out, 1)  # plain memory, not a descriptor
    s, _ = make_tex(dev, img, 1, surface=True)
    with pytest.raises(CudaError, match="not a texture"):
        dev.launch("f2d", 1, 1, s, xs, xs, out, 1)  # a surface is not a texture
    dev.mem.free(base)
    with pytest.raises(CudaError, match="freed"):
        dev.launch("f2d", 1, 1, t, xs, xs, out, 1)


def test_surface_bytes(dev):
    w = 20
    s, base = make_tex(dev, np.zeros(w, np.uint8), 1, surface=True)
    out = dev.empty(w)
    dev.launch("surf_bytes", 1, w, s, out, w)
    assert dev.get(base, np.uint8, w).tolist() == [x * 3 + 1 for x in range(w)]
    assert dev.get(out, np.uint8, w).tolist() == [(w - 1 - x) * 3 + 1 for x in range(w)]


def test_half_texels_linear(dev, rng):
    # cudaChannelFormatKindFloat with 16-bit channels: texels are halves, read as f32
    img = rng.standard_normal((3, 4)).astype(np.float16)
    t, _ = make_tex(dev, img, 1, filt=td.FILTER_LINEAR)
    xs = np.array([0.5, 1.25, 3.9, 2.0], np.float32)
    ys = np.array([0.5, 1.75, 2.1, 0.2], np.float32)
    out = dev.empty(16 * 4)
    dev.launch("f2d", 1, 4, t, dev.array(xs), dev.array(ys), out, 4)
    f = img.astype(np.float32)
    want = [ref_2d(f, float(x), float(y), CLAMP, td.FILTER_LINEAR, 0) for x, y in zip(xs, ys, strict=True)]
    np.testing.assert_allclose(dev.get(out, np.float32, 16)[::4], want, rtol=0, atol=2e-6)
