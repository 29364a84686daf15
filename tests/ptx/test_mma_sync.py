"""mma.sync, ldmatrix, stmatrix and movmatrix on the interpreter, through nvcc inline asm
(tests/ptx/kernels/mma_sync.cu). Fragments are packed and unpacked here from the PTX ISA's figures ("Matrix
Fragments for mma.m16n8k16 / m16n8k8 / m16n8k4 / m16n8k32 / m8n8k4 / m8n8k16", "ldmatrix", "stmatrix",
"movmatrix"), independently of gpushim/ptx/mma_frag.py, and results are checked bit for bit against mma_refs."""

import numpy as np
import pytest
from mma_refs import mma, tf32

from gpushim.cuda_errors import CudaError, Err

WARPS = 2


@pytest.fixture(scope="module")
def ms(dev_for):
    return dev_for("mma_sync", "sm_90")


# (row, col) of element i of lane's fragment, per the ISA (g = groupID, t = threadID_in_group)
def pos_a(shape: str, kind: str, i: int, lane: int) -> tuple[int, int]:
    g, t = lane >> 2, lane % 4
    if kind == "16" and shape == "m16n8k16":
        return (g if i < 2 or 4 <= i < 6 else g + 8), (t * 2 + (i & 1) + (8 if i >= 4 else 0))
    if kind == "16" and shape == "m16n8k8":
        return (g if i < 2 else g + 8), t * 2 + (i & 1)
    if kind == "tf32" and shape == "m16n8k8":
        return (g if i in (0, 2) else g + 8), (t if i < 2 else t + 4)
    if kind == "tf32" and shape == "m16n8k4":
        return (g if i == 0 else g + 8), t
    if kind == "f64":
        return g, t
    if shape == "m16n8k32":
        return (g if i < 4 or 8 <= i < 12 else g + 8), (t * 4 + (i & 3) + (16 if i >= 8 else 0))
    if shape == "m16n8k16":
        return (g if i < 4 else g + 8), t * 4 + (i & 3)
    return g, t * 4 + i  # m8n8k16


def pos_b(shape: str, kind: str, i: int, lane: int) -> tuple[int, int]:
    g, t = lane >> 2, lane % 4
    if kind == "16" and shape == "m16n8k16":
        return t * 2 + (i & 1) + (8 if i >= 2 else 0), g
    if kind == "16":
        return t * 2 + i, g
    if kind == "tf32" and shape == "m16n8k8":
        return (t if i == 0 else t + 4), g
    if kind in ("tf32", "f64"):
        return t, g
    if shape == "m16n8k32":
        return t * 4 + (i & 3) + (16 if i >= 4 else 0), g
    return t * 4 + i, g


def pos_c(shape: str, i: int, lane: int) -> tuple[int, int]:
    g, t = lane >> 2, lane % 4
    if shape.startswith("m8n8"):
        return g, t * 2 + i
    return (g if i < 2 else g + 8), t * 2 + (i & 1)


def pack(mats: np.ndarray, pos, nelem: int, ebits: int) -> np.ndarray:
    """Matrices (warps, r, c) of unsigned element bits -> per-thread registers (warps*32, regs)."""
    per = max(1, 32 // ebits) if ebits < 64 else 1
    regs = np.zeros((mats.shape[0] * 32, nelem // per), np.uint64)
    for w in range(mats.shape[0]):
        for lane in range(32):
            for i in range(nelem):
                r, c = pos(i, lane)
                regs[w * 32 + lane, i // per] |= int(mats[w, r, c]) << ((i % per) * ebits)
    return regs


def unpack(regs: np.ndarray, pos, nelem: int, ebits: int, shape: tuple[int, int]) -> np.ndarray:
    per = max(1, 32 // ebits) if ebits < 64 else 1
    out = np.zeros((regs.shape[0] // 32, *shape), np.uint64)
    for w in range(out.shape[0]):
        for lane in range(32):
            for i in range(nelem):
                r, c = pos(i, lane)
                out[w, r, c] = (int(regs[w * 32 + lane, i // per]) >> ((i % per) * ebits)) & ((1 << ebits) - 1)
    return out


FLOAT_CASES = [  # kernel, shape, source type, accumulator type
    ("m16n8k16_f32_f16", "m16n8k16", "f16", "f32"),
    ("m16n8k16_f32_bf16", "m16n8k16", "bf16", "f32"),
    ("m16n8k16_f16_f16", "m16n8k16", "f16", "f16"),
    ("m16n8k8_f32_f16", "m16n8k8", "f16", "f32"),
    ("m16n8k8_f32_bf16", "m16n8k8", "bf16", "f32"),
    ("m16n8k8_f32_tf32", "m16n8k8", "tf32", "f32"),
    ("m16n8k4_f32_tf32", "m16n8k4", "tf32", "f32"),
]


def _dims(shape):
    m, rest = shape[1:].split("n")
    n, k = rest.split("k")
    return int(m), int(n), int(k)


def _random_values(rng, typ, shape):
    x = rng.standard_normal(shape).astype(np.float32) * 2
    if typ == "f16":
        v = x.astype(np.float16)
        return v.astype(np.float64), v.view(np.uint16)
    if typ == "bf16":
        bits = (x.view(np.uint32) >> 16).astype(np.uint16)
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64), bits
    if typ == "tf32":  # raw f32 bits: the instruction must ignore the low 13 mantissa bits
        return tf32(x).astype(np.float64), x.view(np.uint32)
    return x.astype(np.float64), x.view(np.uint32)


@pytest.mark.parametrize("kern,shape,typ,acc", FLOAT_CASES)
def test_mma_float(ms, rng, kern, shape, typ, acc):
    m, n, k = _dims(shape)
    kind = "16" if typ in ("f16", "bf16") else typ
    ebits = 32 if typ == "tf32" else 16
    av, ab = _random_values(rng, typ, (WARPS, m, k))
    bv, bb = _random_values(rng, typ, (WARPS, k, n))
    cv, cb = _random_values(rng, acc, (WARPS, m, n))
    cbits = 16 if acc == "f16" else 32
    ra = pack(ab, lambda i, lane: pos_a(shape, kind, i, lane), m * k // 32, ebits)
    rb = pack(bb, lambda i, lane: pos_b(shape, kind, i, lane), k * n // 32, ebits)
    rc = pack(cb, lambda i, lane: pos_c(shape, i, lane), m * n // 32, cbits)
    pd = ms.empty(WARPS * 32 * rc.shape[1] * 4)
    args = [ms.array(r.astype(np.uint32)) for r in (ra, rb, rc)]
    ms.launch(kern, 1, WARPS * 32, *args, pd)
    d = ms.get(pd, np.uint32, WARPS * 32 * rc.shape[1]).reshape(WARPS * 32, -1)
    got = unpack(d, lambda i, lane: pos_c(shape, i, lane), m * n // 32, cbits, (m, n))
    for w in range(WARPS):
        exp = mma(av[w], bv[w], cv[w], acc)
        ebits_t = np.float16 if acc == "f16" else np.float32
        exp_bits = exp.astype(ebits_t).view(np.uint16 if acc == "f16" else np.uint32)
        np.testing.assert_array_equal(got[w].astype(exp_bits.dtype), exp_bits, err_msg=f"{kern} warp {w}")


INT_CASES = [
    ("m16n8k32_s32_s8", "m16n8k32", "s8", "s8", False),
    ("m16n8k32_s32_u8s8_sat", "m16n8k32", "u8", "s8", True),
    ("m16n8k16_s32_s8", "m16n8k16", "s8", "s8", False),
    ("m8n8k16_s32_u8", "m8n8k16", "u8", "u8", False),
]


@pytest.mark.parametrize("kern,shape,ta,tb,sat", INT_CASES)
def test_mma_int8(ms, rng, kern, shape, ta, tb, sat):
    m, n, k = _dims(shape)

    def ints(t, shp):
        v = rng.integers(-128, 128, shp) if t == "s8" else rng.integers(0, 256, shp)
        return v, (v & 0xFF).astype(np.uint64)

    av, ab = ints(ta, (WARPS, m, k))
    bv, bb = ints(tb, (WARPS, k, n))
    cv = rng.integers(-(2**31), 2**31, (WARPS, m, n))
    cv[:, 0, :] = 2**31 - 1  # overflows: wraps, or clamps with .satfinite
    cv[:, 1, :] = -(2**31)
    cb = (cv & 0xFFFFFFFF).astype(np.uint64)
    ra = pack(ab, lambda i, lane: pos_a(shape, "8", i, lane), m * k // 32, 8)
    rb = pack(bb, lambda i, lane: pos_b(shape, "8", i, lane), k * n // 32, 8)
    rc = pack(cb, lambda i, lane: pos_c(shape, i, lane), m * n // 32, 32)
    pd = ms.empty(WARPS * 32 * rc.shape[1] * 4)
    ms.launch(kern, 1, WARPS * 32, *[ms.array(r.astype(np.uint32)) for r in (ra, rb, rc)], pd)
    d = ms.get(pd, np.uint32, WARPS * 32 * rc.shape[1]).reshape(WARPS * 32, -1)
    got = unpack(d, lambda i, lane: pos_c(shape, i, lane), m * n // 32, 32, (m, n)).astype(np.uint32).view(np.int32)
    for w in range(WARPS):
        np.testing.assert_array_equal(got[w], mma(av[w], bv[w], cv[w], "s32", sat))


@pytest.mark.parametrize("rnd", ["rn", "rz", "rm", "rp"])
def test_mma_f64(ms, rng, rnd):
    """f64 mma: fma per k with the instruction's rounding (PTX ISA, "mma": .rn default, .rz, .rm, .rp)."""
    shape = "m8n8k4"
    av, bv, cv = (rng.standard_normal((WARPS, *s)) * 3 for s in ((8, 4), (4, 8), (8, 8)))
    ra = pack(av.view(np.uint64), lambda i, lane: pos_a(shape, "f64", i, lane), 1, 64)
    rb = pack(bv.view(np.uint64), lambda i, lane: pos_b(shape, "f64", i, lane), 1, 64)
    rc = pack(cv.view(np.uint64), lambda i, lane: pos_c(shape, i, lane), 2, 64)
    pd = ms.empty(WARPS * 32 * 2 * 8)
    ms.launch("m8n8k4_f64" + ("" if rnd == "rn" else f"_{rnd}"), 1, WARPS * 32, *[ms.array(r) for r in (ra, rb, rc)],
              pd)  # fmt: skip
    d = ms.get(pd, np.uint64, WARPS * 32 * 2).reshape(WARPS * 32, 2)
    got = unpack(d, lambda i, lane: pos_c(shape, i, lane), 2, 64, (8, 8)).view(np.float64)
    for w in range(WARPS):
        np.testing.assert_array_equal(got[w], mma(av[w], bv[w], cv[w], "f64", rnd=rnd))
    if rnd != "rn":  # the rounding must be visible against round-to-nearest somewhere
        assert any(not np.array_equal(got[w], mma(av[w], bv[w], cv[w], "f64")) for w in range(WARPS))


@pytest.mark.parametrize("x", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix(ms, rng, x, trans):
    pitch = 24  # halves per padded shared-memory row (48 bytes, 16-byte aligned)
    blocks = 2
    src = rng.integers(0, 65536, blocks * 4 * x * 8 * pitch).astype(np.uint16)
    po = ms.empty(blocks * 128 * x * 4)
    ms.launch(f"ldm_x{x}" + ("_t" if trans else ""), blocks, 128, ms.array(src), po, pitch)
    out = ms.get(po, np.uint32, blocks * 128 * x).reshape(blocks * 4, 32, x)
    mats = src.reshape(blocks * 4, x, 8, pitch)[:, :, :, :8]
    for w in range(blocks * 4):
        for lane in range(32):
            g, t = lane >> 2, lane % 4
            for j in range(x):
                mt = mats[w, j].T if trans else mats[w, j]
                exp = int(mt[g, 2 * t]) | int(mt[g, 2 * t + 1]) << 16
                assert int(out[w, lane, j]) == exp, (w, lane, j)


def test_ldmatrix_out_of_bounds_faults(ms):
    with pytest.raises(CudaError) as e:
        ms.launch("ldm_oob", 1, 32, ms.empty(128))
    assert e.value.code == Err.ILLEGAL_ADDRESS and "ldmatrix" in str(e.value)


def test_movmatrix(ms, rng):
    mats = rng.integers(0, 65536, (WARPS, 8, 8)).astype(np.uint64)
    frag = pack(mats, lambda i, lane: (lane >> 2, (lane % 4) * 2 + i), 2, 16)
    pd = ms.empty(WARPS * 32 * 4)
    ms.launch("movm", 1, WARPS * 32, ms.array(frag.astype(np.uint32)), pd)
    d = ms.get(pd, np.uint32, WARPS * 32).reshape(-1, 1)
    got = unpack(d, lambda i, lane: (lane >> 2, (lane % 4) * 2 + i), 2, 16, (8, 8))
    np.testing.assert_array_equal(got, mats.transpose(0, 2, 1))


@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix(ms, rng, trans):
    mats = rng.integers(0, 65536, (4, 8, 8)).astype(np.uint64)
    regs = np.zeros((32, 4), np.uint64)
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for j in range(4):
            mt = mats[j].T if trans else mats[j]
            regs[lane, j] = int(mt[g, 2 * t]) | int(mt[g, 2 * t + 1]) << 16
    pd = ms.empty(512)
    ms.launch("stm_x4" + ("_t" if trans else ""), 1, 32, ms.array(regs.astype(np.uint32)), pd)
    np.testing.assert_array_equal(ms.get(pd, np.uint16, 256).reshape(4, 8, 8), mats)


# Volta's mma.m8n8k4 with f16 sources (PTX ISA, "Matrix Fragments for mma.m8n8k4 with .f16 floating point type"):
# quad pair q = lanes 4q..4q+3 (low group) and 16+4q..16+4q+3 (high group) computes its own 8x8x4 product.
def volta_pos(which: str, layout: str, i: int, lane: int) -> tuple[int, int]:
    hi = 4 if lane >= 16 else 0
    if which == "a":
        return (lane % 4 + hi, i) if layout == "row" else (i % 4 + hi, lane % 4)
    if which == "b":
        return (lane % 4, i + hi) if layout == "row" else (i, lane % 4 + hi)
    if which == "c16":
        return lane % 4 + hi, i
    x = (lane & 1) + (i & 2)
    return x + hi, (i & 4) + (lane & 2) + (i & 1)


def volta_pack(mats: np.ndarray, which: str, layout: str, nelem: int, ebits: int) -> np.ndarray:
    """mats (warps, 4 quad pairs, r, c) of element bits -> registers (warps*32, regs)."""
    per = 32 // ebits
    regs = np.zeros((mats.shape[0] * 32, nelem // per), np.uint64)
    for w in range(mats.shape[0]):
        for lane in range(32):
            q = (lane >> 2) & 3
            for i in range(nelem):
                r, c = volta_pos(which, layout, i, lane)
                regs[w * 32 + lane, i // per] |= int(mats[w, q, r, c]) << ((i % per) * ebits)
    return regs


@pytest.mark.parametrize(
    "kern,alay,blay,ctyp,dtyp",
    [("v884_rc_f32", "row", "col", "f32", "f32"), ("v884_cr_f16", "col", "row", "f16", "f16"),
     ("v884_rr_f32_f16c", "row", "row", "f16", "f32")],
)  # fmt: skip
def test_mma_m8n8k4_f16_quad_pairs(ms, rng, kern, alay, blay, ctyp, dtyp):
    a = rng.standard_normal((WARPS, 4, 8, 4)).astype(np.float16)
    b = rng.standard_normal((WARPS, 4, 4, 8)).astype(np.float16)
    c = rng.standard_normal((WARPS, 4, 8, 8)).astype(np.float16 if ctyp == "f16" else np.float32)
    cbits = 16 if ctyp == "f16" else 32
    ra = volta_pack(a.view(np.uint16), "a", alay, 4, 16)
    rb = volta_pack(b.view(np.uint16), "b", blay, 4, 16)
    rc = volta_pack(c.view(np.uint16 if ctyp == "f16" else np.uint32), "c16" if ctyp == "f16" else "c32", "", 8, cbits)
    nd = 4 if dtyp == "f16" else 8
    pd = ms.empty(WARPS * 32 * nd * 4)
    ms.launch(kern, 1, WARPS * 32, *[ms.array(r.astype(np.uint32)) for r in (ra, rb, rc)], pd)
    d = ms.get(pd, np.uint32, WARPS * 32 * nd).reshape(WARPS * 32, nd)
    dbits = 16 if dtyp == "f16" else 32
    got = np.zeros((WARPS, 4, 8, 8), np.uint64)
    for w in range(WARPS):
        for lane in range(32):
            q = (lane >> 2) & 3
            for i in range(8):
                r, col = volta_pos("c16" if dtyp == "f16" else "c32", "", i, lane)
                word = int(d[w * 32 + lane, i // (32 // dbits)])
                got[w, q, r, col] = (word >> ((i % (32 // dbits)) * dbits)) & ((1 << dbits) - 1)
    for w in range(WARPS):
        for q in range(4):
            exp = mma(a[w, q], b[w, q], c[w, q], dtyp)
            exp_bits = exp.astype(np.float16 if dtyp == "f16" else np.float32).view(f"u{dbits // 8}")
            np.testing.assert_array_equal(got[w, q].astype(exp_bits.dtype), exp_bits, err_msg=f"warp {w} pair {q}")


@pytest.mark.parametrize("shape,na,nb", [("m16n8k4", 2, 1), ("m16n8k8", 4, 2), ("m16n8k16", 8, 4)])
def test_mma_f64_sm90_shapes(ms, rng, shape, na, nb):
    """sm_90's f64 shapes (PTX ISA, "Matrix Fragments for mma.m16n8k4 / m16n8k8 / m16n8k16", .f64)."""
    m, n, k = _dims(shape)

    def pa(i, lane):
        g, t = lane >> 2, lane % 4
        if shape == "m16n8k16":
            return (g if i % 2 == 0 else g + 8), (i * 2 + t if i % 2 == 0 else i * 2 - 2 + t)
        if shape == "m16n8k8":
            return (g if i in (0, 2) else g + 8), (t if i < 2 else t + 4)
        return (g if i == 0 else g + 8), t

    def pb(i, lane):
        return lane % 4 + 4 * i, lane >> 2

    av, bv, cv = (rng.standard_normal((WARPS, *s)) for s in ((m, k), (k, n), (m, n)))
    ra = pack(av.view(np.uint64), pa, na, 64)
    rb = pack(bv.view(np.uint64), pb, nb, 64)
    rc = pack(cv.view(np.uint64), lambda i, lane: pos_c(shape, i, lane), 4, 64)
    pd = ms.empty(WARPS * 32 * 4 * 8)
    ms.launch(f"{shape}_f64", 1, WARPS * 32, *[ms.array(r) for r in (ra, rb, rc)], pd)
    d = ms.get(pd, np.uint64, WARPS * 32 * 4).reshape(WARPS * 32, 4)
    got = unpack(d, lambda i, lane: pos_c(shape, i, lane), 4, 64, (m, n)).view(np.float64)
    for w in range(WARPS):
        np.testing.assert_array_equal(got[w], mma(av[w], bv[w], cv[w], "f64"))


@pytest.mark.parametrize(
    "kern,shape,ta,tb,acc",
    [("m16n8k32_f32_e4m3e5m2", "m16n8k32", "e4m3", "e5m2", "f32"),
     ("m16n8k16_f16_e5m2", "m16n8k16", "e5m2", "e5m2", "f16")],
)  # fmt: skip
def test_mma_fp8(ms, rng, kern, shape, ta, tb, acc):
    """sm_89's fp8 mma: e4m3 (bias 7, no infinities) and e5m2 (bias 15) sources in the 8-bit layouts."""
    m, n, k = _dims(shape)

    def fp8(t, shp):
        codes = rng.integers(0, 256, shp).astype(np.uint64)
        nan = (codes & 0x7F) == 0x7F if t == "e4m3" else (codes & 0x7C) == 0x7C  # keep NaN/inf codes out
        codes[nan] &= 0xF0
        if t == "e5m2":  # exponents above 18 down by 16, so that f16 sums stay finite
            codes[((codes >> 2) & 0x1F) >= 19] &= ~np.uint64(0x40)
        exp_bits = 4 if t == "e4m3" else 5
        mb, bias = 7 - exp_bits, (1 << (exp_bits - 1)) - 1
        e, mant = (codes >> mb) & ((1 << exp_bits) - 1), codes & ((1 << mb) - 1)
        mag = np.where(e == 0, mant * 2.0 ** (1 - bias - mb), (1 + mant / (1 << mb)) * 2.0 ** (e.astype(int) - bias))
        return np.where(codes & 0x80, -mag, mag), codes

    av, ab = fp8(ta, (WARPS, m, k))
    bv, bb = fp8(tb, (WARPS, k, n))
    cbits = 16 if acc == "f16" else 32
    cv, cb = _random_values(rng, acc, (WARPS, m, n))
    ra = pack(ab, lambda i, lane: pos_a(shape, "8", i, lane), m * k // 32, 8)
    rb = pack(bb, lambda i, lane: pos_b(shape, "8", i, lane), k * n // 32, 8)
    rc = pack(cb, lambda i, lane: pos_c(shape, i, lane), m * n // 32, cbits)
    pd = ms.empty(WARPS * 32 * rc.shape[1] * 4)
    ms.launch(kern, 1, WARPS * 32, *[ms.array(r.astype(np.uint32)) for r in (ra, rb, rc)], pd)
    d = ms.get(pd, np.uint32, WARPS * 32 * rc.shape[1]).reshape(WARPS * 32, -1)
    got = unpack(d, lambda i, lane: pos_c(shape, i, lane), m * n // 32, cbits, (m, n))
    for w in range(WARPS):
        exp = mma(av[w], bv[w], cv[w], acc).astype(np.float16 if acc == "f16" else np.float32)
        np.testing.assert_array_equal(got[w].astype(exp.dtype.str.replace("f", "u")), exp.view(f"u{cbits // 8}"))


def pos_sub(shape: str, bits: int, which: str, i: int, lane: int) -> tuple[int, int]:
    """Sub-byte fragments (PTX ISA, "Matrix Fragments for mma.m8n8k32 / m16n8k32 / m16n8k64 / m8n8k128 /
    m16n8k128 / m16n8k256"); p = elements per 32-bit register."""
    g, t = lane >> 2, lane % 4
    p = 32 // bits
    if shape in ("m8n8k32", "m8n8k128"):
        return (g, t * p + i) if which == "a" else (t * p + i, g)
    if shape in ("m16n8k32", "m16n8k128"):  # A: two registers (rows g, g+8), B: one
        return (g if i < p else g + 8, t * p + i % p) if which == "a" else (t * p + i, g)
    if which == "a":  # m16n8k64 / m16n8k256: four A registers, two B registers
        return (g if i < p or 2 * p <= i < 3 * p else g + 8), t * p + i % p + (4 * p if i >= 2 * p else 0)
    return t * p + i % p + (4 * p if i >= p else 0), g


SUB_CASES = [  # kernel, shape, A type, B type, .satfinite, b1 operation
    ("m8n8k32_s4", "m8n8k32", "s4", "s4", False, None),
    ("m16n8k32_u4s4_sat", "m16n8k32", "u4", "s4", True, None),
    ("m16n8k64_s4", "m16n8k64", "s4", "s4", False, None),
    ("m8n8k128_b1_xor", "m8n8k128", "b1", "b1", False, "xor"),
    ("m16n8k128_b1_and", "m16n8k128", "b1", "b1", False, "and"),
    ("m16n8k256_b1_xor", "m16n8k256", "b1", "b1", False, "xor"),
]


@pytest.mark.parametrize("kern,shape,ta,tb,sat,op", SUB_CASES)
def test_mma_sub_byte(ms, rng, kern, shape, ta, tb, sat, op):
    m, n, k = _dims(shape)
    bits = 1 if ta == "b1" else 4
    rng_of = {"s4": (-8, 8), "u4": (0, 16), "b1": (0, 2)}
    av = rng.integers(*rng_of[ta], (WARPS, m, k))
    bv = rng.integers(*rng_of[tb], (WARPS, k, n))
    cv = rng.integers(-(2**31), 2**31, (WARPS, m, n))
    cv[:, 0, :] = 2**31 - 1
    ra = pack((av & ((1 << bits) - 1)).astype(np.uint64), lambda i, lane: pos_sub(shape, bits, "a", i, lane),
              m * k // 32, bits)  # fmt: skip
    rb = pack((bv & ((1 << bits) - 1)).astype(np.uint64), lambda i, lane: pos_sub(shape, bits, "b", i, lane),
              k * n // 32, bits)  # fmt: skip
    rc = pack((cv & 0xFFFFFFFF).astype(np.uint64), lambda i, lane: pos_c(shape, i, lane), m * n // 32, 32)
    pd = ms.empty(WARPS * 32 * rc.shape[1] * 4)
    ms.launch(kern, 1, WARPS * 32, *[ms.array(r.astype(np.uint32)) for r in (ra, rb, rc)], pd)
    d = ms.get(pd, np.uint32, WARPS * 32 * rc.shape[1]).reshape(WARPS * 32, -1)
    got = unpack(d, lambda i, lane: pos_c(shape, i, lane), m * n // 32, 32, (m, n)).astype(np.uint32).view(np.int32)
    for w in range(WARPS):
        if op is None:
            exp = mma(av[w], bv[w], cv[w], "s32", sat)
        else:
            f = np.bitwise_xor if op == "xor" else np.bitwise_and
            s = cv[w] + f(av[w][:, None, :], bv[w].T[None, :, :]).sum(axis=2)
            exp = ((s + 2**31) % 2**32) - 2**31
        np.testing.assert_array_equal(got[w], exp, err_msg=f"{kern} warp {w}")
