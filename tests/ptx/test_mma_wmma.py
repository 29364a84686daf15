"""wmma (warp matrix multiply-accumulate) on the interpreter: nvcc-emitted GEMMs for every shape and type nvcc
emits for sm_70-sm_90 (f16 with f16/f32 accumulate, bf16, tf32, f64, s8/u8 with and without .satfinite), row-
and column-major A/B/C, global and shared memory, element-wise code on fragments, checked bit for bit against a
host reference of the arithmetic documented in gpushim/ptx/ops_mma.py (PTX ISA, "Warp Level Matrix Multiply-
Accumulate Instructions": the fragment layout is unspecified, so only whole-matrix results are checked)."""

import numpy as np
import pytest
from mma_refs import gemm as reference
from mma_refs import tf32, tf32_rna

from gpushim.cuda_errors import CudaError, Err

M = N = K = 32


@pytest.fixture(scope="module")
def wm(dev_for):
    return dev_for("mma_wmma", "sm_80")


def run(wm, kern, a, b, c, tk, acc, *, acol=False, bcol=False, ccol=False, loadc=True, sat=False):
    """Lay A, B, C out as the kernel reads them, run it (one warp per tile), compare C to the reference."""
    ctype = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "s32": np.int32}[acc]
    pa = wm.array(a.T.copy() if acol else a)
    pb = wm.array(b.T.copy() if bcol else b)
    pc = wm.array((c.T.copy() if ccol else c).astype(ctype))
    tiles = {"h32x8": (32, 8), "h8x32": (8, 32), "bf32x8": (32, 8), "bf8x32": (8, 32), "u8_32x8": (32, 8),
             "s8_8x32": (8, 32), "f64": (8, 8)}  # fmt: skip
    tm, tn = next((v for kk, v in tiles.items() if kern.startswith(kk)), (16, 16))
    warps = (M // tm) * (N // tn)
    wm.launch(kern, warps // 2, 64, pa, pb, pc, M, N, K, int(loadc), int(ccol), int(sat))
    got = wm.get(pc, ctype, M * N).reshape((N, M) if ccol else (M, N))
    got = got.T if ccol else got
    exp = reference(a, b, c if loadc else np.zeros_like(c), tk, acc, sat)
    if acc == "s32":
        np.testing.assert_array_equal(got.astype(np.int64), exp)
    else:
        g = got.astype(ctype)
        e = exp.astype(ctype)
        assert np.array_equal(g.view(f"u{g.itemsize}"), e.view(f"u{e.itemsize}")), (kern, np.abs(g - e).max())
    return got


@pytest.mark.parametrize(
    "kern,acc,acol,bcol,ccol",
    [
        ("h16_rc_f32", "f32", False, True, False),
        ("h16_rr_f16", "f16", False, False, True),
        ("h32x8_cr_f32", "f32", True, False, False),
        ("h8x32_rc_f16", "f16", False, True, True),
    ],
)
def test_wmma_f16(wm, rng, kern, acc, acol, bcol, ccol):
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = rng.standard_normal((M, N)).astype(np.float16 if acc == "f16" else np.float32)
    got = run(wm, kern, a, b, c, 16, acc, acol=acol, bcol=bcol, ccol=ccol)
    # the f16 accumulator is rounded to f16 after every mma, not once at the end: that must be visible
    if acc == "f16":
        once = (c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16)
        assert not np.array_equal(got, once)


@pytest.mark.parametrize("kern,acol,bcol", [("bf16_rc", False, True), ("bf32x8_rr", False, False),
                                            ("bf8x32_cr", True, False)])  # fmt: skip
def test_wmma_bf16(wm, rng, kern, acol, bcol):
    f = rng.standard_normal((M + N, K)).astype(np.float32)
    bf = (f.view(np.uint32) & 0xFFFF0000).view(np.float32)  # exact bf16 values
    a, b = bf[:M], bf[M:].T.copy()
    bits_a = (a.view(np.uint32) >> 16).astype(np.uint16)
    bits_b = (b.view(np.uint32) >> 16).astype(np.uint16)
    tm, tn = {"bf16_rc": (16, 16), "bf32x8_rr": (32, 8), "bf8x32_cr": (8, 32)}[kern]
    pa = wm.array(bits_a.T.copy() if acol else bits_a)
    pb = wm.array(bits_b.T.copy() if bcol else bits_b)
    c = rng.standard_normal((M, N)).astype(np.float32)
    pc = wm.array(c)
    wm.launch(kern, (M // tm) * (N // tn) // 2, 64, pa, pb, pc, M, N, K, 1, 0, 0)
    got = wm.get(pc, np.float32, M * N).reshape(M, N)
    exp = reference(a, b, c, 16, "f32").astype(np.float32)
    assert np.array_equal(got.view(np.uint32), exp.view(np.uint32))


def test_wmma_tf32(wm, rng):
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = rng.standard_normal((M, N)).astype(np.float32)
    # converted with __float_to_tf32 (cvt.rna.tf32.f32) in the kernel
    pa, pb, pc = wm.array(a), wm.array(b.T.copy()), wm.array(c)
    wm.launch("tf32_rc", 2, 64, pa, pb, pc, M, N, K, 1, 0, 0)
    got = wm.get(pc, np.float32, M * N).reshape(M, N)
    exp = reference(tf32_rna(a), tf32_rna(b), c, 8, "f32").astype(np.float32)
    assert np.array_equal(got.view(np.uint32), exp.view(np.uint32))
    # raw f32 values: the low 13 mantissa bits are ignored
    run(wm, "tf32_raw_cr", tf32(a), tf32(b), c, 8, "f32", acol=True, loadc=False)
    pa2, pb2, pc2 = wm.array(a.T.copy()), wm.array(b), wm.array(c)
    wm.launch("tf32_raw_cr", 2, 64, pa2, pb2, pc2, M, N, K, 0, 0, 0)
    got2 = wm.get(pc2, np.float32, M * N).reshape(M, N)
    exp2 = reference(tf32(a), tf32(b), np.zeros_like(c), 8, "f32").astype(np.float32)
    assert np.array_equal(got2.view(np.uint32), exp2.view(np.uint32))


@pytest.mark.parametrize("kern,acol", [("f64_rr", False), ("f64_cr", True)])
def test_wmma_f64(wm, rng, kern, acol):
    a = rng.standard_normal((M, K)) * 3
    b = rng.standard_normal((K, N)) * 3
    c = rng.standard_normal((M, N))
    run(wm, kern, a, b, c, 4, "f64", acol=acol)


@pytest.mark.parametrize(
    "kern,lo,hi,acol,bcol",
    [("s8_rc", -128, 128, False, True), ("u8_32x8_rr", 0, 256, False, False), ("s8_8x32_cr", -128, 128, True, False)],
)
def test_wmma_int8(wm, rng, kern, lo, hi, acol, bcol):
    dt = np.int8 if lo < 0 else np.uint8
    a = rng.integers(lo, hi, (M, K)).astype(dt)
    b = rng.integers(lo, hi, (K, N)).astype(dt)
    c = rng.integers(-(2**31), 2**31, (M, N)).astype(np.int32)
    c[0, :] = 2**31 - 1  # wraps without .satfinite, clamps with it
    c[1, :] = -(2**31)
    run(wm, kern, a, b, c, 16, "s32", acol=acol, bcol=bcol, sat=False)
    got = run(wm, kern, a, b, c, 16, "s32", acol=acol, bcol=bcol, sat=True)
    assert (got == 2**31 - 1).any() or (got == -(2**31)).any()


def test_wmma_fragment_elementwise_and_shared(wm, rng):
    """frag.x[i] code (the mapping is unspecified, but element-wise operations must act on every element)."""
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 16)).astype(np.float16)
    pc = wm.empty(16 * 16 * 4)
    wm.launch("frag_elementwise", 1, 32, wm.array(a), wm.array(b), pc, np.float32(-1.5))
    got = wm.get(pc, np.float32, 256).reshape(16, 16)
    a1 = (a.astype(np.float32) + 1).astype(np.float16)  # __hadd rounds to f16
    d = reference(a1, b, np.full((16, 16), 0.5), 16, "f32").astype(np.float32) * np.float32(-1.5)
    assert np.array_equal(got.view(np.uint32), d.view(np.uint32))


def test_wmma_partial_warp_fails(dev_for):
    wm = dev_for("mma_wmma", "sm_80")
    pa = wm.array(np.zeros(256, np.float16))
    pc = wm.empty(1024)
    with pytest.raises(CudaError) as e:
        wm.launch("partial_warp", 1, 32, pa, pc)
    assert e.value.code == Err.ILLEGAL_INSTRUCTION and "all 32 threads" in str(e.value)


def test_wmma_out_of_bounds_load_faults(wm):
    pa = wm.array(np.zeros(16, np.float16))  # 16 elements; the 16x16 load reads 256
    pc = wm.empty(4 * M * N)
    with pytest.raises(CudaError) as e:
        wm.launch("h16_rc_f32", 1, 32, pa, pa, pc, 16, 16, 16, 0, 0, 0)
    assert e.value.code == Err.ILLEGAL_ADDRESS and "wmma.load" in str(e.value)


def test_jit_compiles_wmma_and_falls_back_on_the_rest(wm):
    """The compiling engine runs wmma with f16/bf16/tf32/s8/u8 sources (gpushim/ptx/jit/ops_mma.py); kernels with other
    tensor-core forms run on the interpreter, with the reason."""
    from gpushim.ptx.jit.kernel import fallback_reason

    for kern in ("h16_rc_f32", "h16_rr_f16", "bf16_rc", "s8_rc"):
        assert wm.mod.jit_kernel(kern) is not None, fallback_reason(wm.mod.source_hash, kern)
    for kern in ("f64_rr", "s4_gemm", "b1_xor_gemm"):
        assert wm.mod.jit_kernel(kern) is None
        reason = fallback_reason(wm.mod.source_hash, kern)
        assert reason and "wmma" in reason, reason


@pytest.mark.parametrize(
    "shape,typ,which,rows,cols,elems",
    [("m16n16k16", "f16", "a", 16, 16, 16), ("m16n16k16", "f16", "b", 16, 16, 16), ("m16n16k16", "f32", "c", 16, 16, 8),
     ("m32n8k16", "f16", "a", 32, 16, 16), ("m32n8k16", "f16", "b", 16, 8, 16), ("m32n8k16", "f16", "c", 32, 8, 8),
     ("m8n32k16", "f16", "a", 8, 16, 16), ("m8n32k16", "f16", "b", 16, 32, 16), ("m8n32k16", "s32", "c", 8, 32, 8),
     ("m16n16k8", "tf32", "a", 16, 8, 4), ("m16n16k8", "tf32", "b", 8, 16, 4), ("m8n8k4", "f64", "c", 8, 8, 2),
     ("m16n16k16", "s8", "b", 16, 16, 8), ("m32n8k16", "u8", "a", 32, 16, 16), ("m8n32k16", "bf16", "a", 8, 16, 4)],
)  # fmt: skip
def test_wmma_fragments_cover_every_element_equally(shape, typ, which, rows, cols, elems):
    from gpushim.ptx.mma_frag import wmma_layout

    r, c = wmma_layout(shape, typ, which, rows, cols, elems)
    count = np.zeros((rows, cols), int)
    np.add.at(count, (r, c), 1)
    assert count.min() == count.max() == 32 * elems // (rows * cols)


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_wmma_ptx_for_other_targets(dev_for, rng, arch):
    """nvcc emits the same wmma instructions for sm_75 (f16, s8/u8) and sm_90 as for sm_80 (nvcc 13 has no sm_70)."""
    wm = dev_for("mma_wmma", arch)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = rng.standard_normal((M, N)).astype(np.float32)
    run(wm, "h16_rc_f32", a, b, c, 16, "f32", bcol=True)
    a8 = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b8 = rng.integers(-128, 128, (K, N)).astype(np.int8)
    run(wm, "s8_rc", a8, b8, rng.integers(-1000, 1000, (M, N)).astype(np.int32), 16, "s32", bcol=True, sat=True)


def _pack_bits(x: np.ndarray, bits: int) -> np.ndarray:
    """Rows of sub-byte elements packed little-endian (element 0 in the lowest bits of byte 0)."""
    if bits == 1:
        return np.packbits(x.astype(np.uint8), axis=-1, bitorder="little")
    n = (x.astype(np.int64) & 15).astype(np.uint8)
    return n[..., 0::2] | (n[..., 1::2] << 4)


@pytest.mark.parametrize("kern,lo,hi", [("s4_gemm", -8, 8), ("u4_gemm", 0, 16)])
def test_wmma_sub_byte_4bit(wm, rng, kern, lo, hi):
    """s4/u4 wmma (m8n8k32, wmma::experimental::precision): exact integer sums."""
    m, n, k = 16, 16, 64
    a = rng.integers(lo, hi, (m, k))
    b = rng.integers(lo, hi, (k, n))
    c = rng.integers(-1000, 1000, (m, n)).astype(np.int32)
    pc = wm.array(c)
    wm.launch(kern, 2, 64, wm.array(_pack_bits(a, 4)), wm.array(_pack_bits(b.T, 4)), pc, m, n, k)
    np.testing.assert_array_equal(wm.get(pc, np.int32, m * n).reshape(m, n), c + a @ b)


@pytest.mark.parametrize("op", ["xor", "and"])
def test_wmma_single_bit(wm, rng, op):
    """b1 wmma (m8n8k128): popc(row of A XOR/AND column of B) + C (PTX ISA, "mma": single-bit)."""
    m, n, k = 16, 16, 256
    a = rng.integers(0, 2, (m, k))
    b = rng.integers(0, 2, (k, n))
    c = rng.integers(-1000, 1000, (m, n)).astype(np.int32)
    pc = wm.array(c)
    wm.launch(f"b1_{op}_gemm", 2, 64, wm.array(_pack_bits(a, 1)), wm.array(_pack_bits(b.T, 1)), pc, m, n, k)
    f = np.bitwise_xor if op == "xor" else np.bitwise_and
    exp = c + f(a[:, None, :], b.T[None, :, :]).sum(axis=2)
    np.testing.assert_array_equal(wm.get(pc, np.int32, m * n).reshape(m, n), exp)
