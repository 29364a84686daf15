"""Tensor-core instructions on the compiling engine (gpushim/ptx/jit/ops_mma.py): mma.sync with f16/bf16/tf32
sources and wmma.load/mma/store (f16/bf16) run compiled, bit-identical to the interpreter (the reference,
gpushim/ptx/ops_mma.py) on special values (NaN, infinities, subnormals, overflow), on tier 1 and tier 2; a partial
warp fails with the interpreter's error. The kernels are tests/ptx/kernels/mma_sync.cu and mma_wmma.cu (nvcc)."""

from __future__ import annotations

import numpy as np
import pytest
from harness import ENGINE, Dev, compile_ptx

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx.jit import kernel as jit_kernel

# mma.sync kernels (A, B, C registers per thread) the JIT compiles
MMA_SYNC = {"m16n8k16_f32_f16": (4, 2, 4), "m16n8k16_f32_bf16": (4, 2, 4), "m16n8k8_f32_tf32": (4, 2, 4),
            "m16n8k8_f32_f16": (2, 1, 4), "m16n8k8_f32_bf16": (2, 1, 4), "m16n8k4_f32_tf32": (2, 1, 4),
            "m16n8k16_f16_f16": (4, 2, 2)}  # fmt: skip
WMMA = ("h16_rc_f32", "h16_rr_f16", "h32x8_cr_f32", "h8x32_rc_f16", "bf16_rc", "bf32x8_rr", "bf8x32_cr",
        "frag_elementwise", "partial_warp", "tf32_rc", "tf32_raw_cr", "s8_rc", "u8_32x8_rr", "s8_8x32_cr")  # fmt: skip
# integer sources (exact sums; .satfinite clamps)
INT_SYNC = ("m16n8k32_s32_s8", "m16n8k32_s32_u8s8_sat", "m16n8k16_s32_s8", "m8n8k16_s32_u8")
# forms the JIT leaves to the interpreter (integer, f64, fp8, b1 sources; m8n8k4 f16; ldmatrix & co.)
FALLBACK = ("m16n8k32_u4s4_sat", "m8n8k4_f64", "m16n8k16_f16_e5m2", "m8n8k128_b1_xor", "v884_rc_f32", "ldm_x4", "movm")


@pytest.fixture
def tier(monkeypatch, request):
    monkeypatch.setenv("GPUSHIM_PTX_JIT_TIER2", request.param)
    jit_kernel._cache.clear()  # the policy applies when a kernel is compiled
    yield request.param
    jit_kernel._cache.clear()


TIERS = pytest.mark.parametrize("tier", ["now", "off"], indirect=True)  # tier 2 from the start; tier 1 only
DIFF = pytest.mark.parametrize("engine", ["diff"], indirect=True)


def _special_bits(rng, n: int, typ: str) -> np.ndarray:
    """Element bits of typ: mostly ordinary values, with NaNs, infinities, zeros of both signs, subnormals and the
    largest finite values (sums that overflow)"""
    if typ == "f16":
        pool = [0x7E00, 0x7C01, 0x7C00, 0xFC00, 0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF, 0xFBFF, 0x3C00]
        ordinary = rng.standard_normal(n).astype(np.float16).view(np.uint16)
    else:  # bf16 / tf32 / f32 (upper 16 bits for bf16)
        pool = [0x7FC00000, 0x7F800001, 0x7F800000, 0xFF800000, 0, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF,
                0xFF7FFFFF, 0x3F800000, 0x00001FFF]  # fmt: skip
        ordinary = rng.standard_normal(n).astype(np.float32).view(np.uint32)
        if typ == "bf16":
            pool = [p >> 16 for p in pool]
            ordinary = ordinary >> 16
    bits = ordinary.astype(np.uint32)
    pick = rng.random(n) < 0.08
    bits[pick] = rng.choice(np.array(pool, np.uint32), int(pick.sum()))
    return bits


def _regs(rng, threads: int, nregs: int, typ: str) -> np.ndarray:
    if typ in ("f16", "bf16"):
        h = _special_bits(rng, threads * nregs * 2, typ).reshape(-1, 2)
        return (h[:, 0] | (h[:, 1] << 16)).astype(np.uint32)
    return _special_bits(rng, threads * nregs, typ)


@pytest.mark.parametrize("engine", ["interp"], indirect=True)  # (once: it launches nothing)
@pytest.mark.parametrize("tier", ["off"], indirect=True)  # (tier 1 only: the compiles are what is tested)
def test_which_kernels_compile(engine, tier):
    ms = Dev(compile_ptx("mma_sync", "sm_90"))
    for k in (*MMA_SYNC, *INT_SYNC):
        assert ms.mod.jit_kernel(k) is not None, jit_kernel.fallback_reason(ms.mod.source_hash, k)
    for k in FALLBACK:
        assert ms.mod.jit_kernel(k) is None
        reason = jit_kernel.fallback_reason(ms.mod.source_hash, k) or ""
        assert any(w in reason for w in ("mma", "ldmatrix", "movmatrix")), reason
    wm = Dev(compile_ptx("mma_wmma", "sm_80"))
    for k in WMMA:
        assert wm.mod.jit_kernel(k) is not None, jit_kernel.fallback_reason(wm.mod.source_hash, k)


@DIFF
@TIERS
@pytest.mark.parametrize("kern", sorted(MMA_SYNC))
def test_mma_sync_special_values(engine, tier, kern, rng):
    """NaN, infinities, signed zeros, subnormals and overflowing sums: "diff" fails the launch unless device
    memory is bit-identical to the interpreter's (ops_mma.py's arithmetic: exact products, f64 sums, one
    rounding to f32 (then f16), canonical NaNs)"""
    ms = Dev(compile_ptx("mma_sync", "sm_90"))
    assert ms.mod.jit_kernel(kern) is not None
    na, nb, nc = MMA_SYNC[kern]
    src = "tf32" if "tf32" in kern else "bf16" if "bf16" in kern else "f16"
    acc = "f16" if kern.endswith("f16_f16") else "f32"
    threads = 128
    nd = nc
    pa, pb = ms.array(_regs(rng, threads, na, src)), ms.array(_regs(rng, threads, nb, src))
    pc, pd = ms.array(_regs(rng, threads, nc, acc)), ms.empty(4 * threads * nd)
    ms.launch(kern, 2, 64, pa, pb, pc, pd)
    d = ms.get(pd, np.uint32, threads * nd)
    if acc == "f32":  # a NaN result is the canonical one (the interpreter's rule, checked above by diff)
        nan = (d & 0x7FFFFFFF) > 0x7F800000
        assert nan.any() and (d[nan] == 0x7FFFFFFF).all()


def _error(engine: str, launch) -> CudaError:
    ENGINE["name"] = engine
    with pytest.raises(CudaError) as e:
        launch()
    return e.value


@TIERS
def test_partial_warp_fails_as_on_the_interpreter(tier):
    """A block of 48 threads: the second warp has 16 lanes. The interpreter fails the launch with
    ILLEGAL_INSTRUCTION naming the warp's first thread (mma_frag.warp_threads; PTX leaves it undefined); the
    JIT with the same error and message. wmma's partial_warp kernel: lanes 16..31 skip the wmma code."""
    ms = Dev(compile_ptx("mma_sync", "sm_90"))
    z = np.zeros(48 * 4, np.uint32)
    pa, pb, pc, pd = ms.array(z), ms.array(z), ms.array(z), ms.empty(4 * 48 * 4)
    errs = [_error(e, lambda: ms.launch("m16n8k16_f32_f16", 1, 48, pa, pb, pc, pd)) for e in ("interp", "jit")]
    assert ms.mod.jit_kernel("m16n8k16_f32_f16") is not None
    assert errs[0].code == errs[1].code == Err.ILLEGAL_INSTRUCTION
    assert str(errs[0]) == str(errs[1]) and "thread (32,0,0)" in str(errs[1]), errs
    wm = Dev(compile_ptx("mma_wmma", "sm_80"))
    pa, pc = wm.array(np.zeros(256, np.float16)), wm.empty(1024)
    errs = [_error(e, lambda: wm.launch("partial_warp", 1, 32, pa, pc)) for e in ("interp", "jit")]
    assert wm.mod.jit_kernel("partial_warp") is not None
    assert errs[0].code == errs[1].code == Err.ILLEGAL_INSTRUCTION
    assert str(errs[0]) == str(errs[1]) and "wmma.load" in str(errs[1]) and "all 32 threads" in str(errs[1])


@TIERS
def test_wmma_out_of_bounds_load_faults(tier):
    """A 16x16 f16 load from a 16-element allocation: ILLEGAL_ADDRESS on both engines (which lane's element is
    reported first differs: the interpreter checks element by element over the warp, the JIT lane by lane)"""
    wm = Dev(compile_ptx("mma_wmma", "sm_80"))
    pa, pc = wm.array(np.zeros(16, np.float16)), wm.empty(4 * 256)
    errs = [_error(e, lambda: wm.launch("h16_rc_f32", 1, 32, pa, pa, pc, 16, 16, 16, 0, 0, 0))
            for e in ("interp", "jit")]  # fmt: skip
    assert wm.mod.jit_kernel("h16_rc_f32") is not None
    assert errs[0].code == errs[1].code == Err.ILLEGAL_ADDRESS
    assert "wmma.load.a" in str(errs[1]) and "out of bounds" in str(errs[1]), errs


@TIERS
def test_wmma_out_of_bounds_second_load_names_it(tier):
    """The loads of A and B share one function of their form in the JIT (wmma_track.py): a fault at the load of
    B names the load of B and its line, as the interpreter does (the address and thread may differ, above)"""
    wm = Dev(compile_ptx("mma_wmma", "sm_80"))
    pa, pb, pc = wm.array(np.zeros(256, np.float16)), wm.array(np.zeros(16, np.float16)), wm.empty(4 * 256)
    errs = [_error(e, lambda: wm.launch("h16_rc_f32", 1, 32, pa, pb, pc, 16, 16, 16, 0, 0, 0))
            for e in ("interp", "jit")]  # fmt: skip
    assert wm.mod.jit_kernel("h16_rc_f32") is not None
    assert errs[0].code == errs[1].code == Err.ILLEGAL_ADDRESS
    assert "wmma.load.b" in str(errs[0]) and str(errs[0]).split(" at ")[0] == str(errs[1]).split(" at ")[0], errs


@DIFF
@TIERS
@pytest.mark.parametrize("kern", INT_SYNC)
def test_mma_sync_integer_extremes(engine, tier, kern, rng):
    """s8/u8 sources at their extremes and C at the ends of the s32 range: the sum wraps, or clamps with
    .satfinite (PTX ISA, "mma": saturation to MAXINT/MININT); "diff" checks bit-identity with the interpreter"""
    ms = Dev(compile_ptx("mma_sync", "sm_90"))
    assert ms.mod.jit_kernel(kern) is not None
    na, nb, nc = {"m8n8k16_s32_u8": (1, 1, 2), "m16n8k16_s32_s8": (2, 1, 4)}.get(kern, (4, 2, 4))
    threads = 64
    edge = np.array([0x80, 0x7F, 0xFF, 0x00], np.uint32)
    ab = [edge[rng.integers(0, 4, threads * n * 4)].reshape(-1, 4) for n in (na, nb)]
    pa, pb = (ms.array((x[:, 0] | x[:, 1] << 8 | x[:, 2] << 16 | x[:, 3] << 24).astype(np.uint32)) for x in ab)
    c = np.array([0x7FFFFFFF, 0x80000000, 0x7FFFF000, 0x80000FFF, 5], np.uint32)[rng.integers(0, 5, threads * nc)]
    pc, pd = ms.array(c), ms.empty(4 * threads * nc)
    ms.launch(kern, 1, threads, pa, pb, pc, pd)
    d = ms.get(pd, np.uint32, threads * nc).view(np.int32)
    if kern.endswith("sat"):  # clamped at the ends (the big sums of 0x7F * 0xFF products push past them)
        assert (d == 2**31 - 1).any() and (d == -(2**31)).any()


# wmma.load/store in kernels with a wmma.mma run in place, without a stop; each lane's record of them is checked
# for the warp at the next wmma.mma and at the block's end (gpushim/ptx/jit/wmma_track.py). PTX leaves a partial
# or diverged warp at a wmma undefined ("all threads in the warp must execute the same wmma"); the interpreter fails
# the launch with ILLEGAL_INSTRUCTION naming the load/store and the first thread executing it, and so does the JIT.
# Each kernel takes `lim`: lanes >= lim go another way; lim = 32 is the control (a whole warp: no fault).
_FRAG = "{%r3, %r4, %r5, %r6, %r7, %r8, %r9, %r10}", "{%r11, %r12, %r13, %r14, %r15, %r16, %r17, %r18}"
_D = "{%f2, %f3, %f4, %f5, %f6, %f7, %f8, %f9}"
_WMMA_HEAD = """
.visible .entry {name}(.param .u64 pa, .param .u64 pc, .param .u32 lim)
{{
  .reg .pred %p<3>;
  .reg .f32 %f<10>;
  .reg .b32 %r<22>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [pa];
  ld.param.u64 %rd2, [pc];
  ld.param.u32 %r19, [lim];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, 16;
  mov.f32 %f1, 0f00000000;
  setp.ge.u32 %p1, %r1, %r19;
"""
_LOAD_A = f"  wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {_FRAG[0]}, [%rd1], %r2;\n"
_LOAD_B = f"  wmma.load.b.sync.aligned.col.m16n16k16.global.f16 {_FRAG[1]}, [%rd1], %r2;\n"
_C = "{" + ", ".join(["%f1"] * 8) + "}"
_MMA = f"  wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {_D}, {_FRAG[0]}, {_FRAG[1]}, {_C};\n"
_STORE = f"  wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%rd2], {_D}, %r2;\n"
TRACK_PTX = ".version 7.8\n.target sm_80\n.address_size 64\n" + "".join(
    _WMMA_HEAD.format(name=name) + body + "  ret;\n}\n"
    for name, body in (
        # lanes >= lim skip the store (no wmma.mma after it: the block-end check)
        ("store_partial", _LOAD_A + _LOAD_B + _MMA + "  @%p1 bra DONE;\n" + _STORE + "DONE:\n"),
        # all lanes load A; lanes >= lim skip the load of B; all meet again at the mma
        ("diverge_load", _LOAD_A + "  @%p1 bra SKIP;\n" + _LOAD_B + "SKIP:\n" + _MMA + _STORE),
        # lanes >= lim load A twice
        ("loop_load", "  selp.u32 %r20, 2, 1, %p1;\nAGAIN:\n" + _LOAD_A + "  sub.u32 %r20, %r20, 1;\n"
         "  setp.ne.u32 %p2, %r20, 0;\n  @%p2 bra AGAIN;\n" + _LOAD_B + _MMA + _STORE),
    )
)


@TIERS
@pytest.mark.parametrize(("kern", "what", "who"), [("store_partial", "wmma.store.d", 0),
                                                   ("diverge_load", "wmma.load.b", 0),
                                                   ("loop_load", "wmma.load.a", 16)])  # fmt: skip
def test_wmma_ldst_in_a_partial_warp_fails_as_on_the_interpreter(tier, kern, what, who):
    """Lanes 16..31 skip the store / skip a load between the load of A and the mma / load A once more: both engines
    fail with ILLEGAL_INSTRUCTION and the same message (the load/store, the first thread executing it). Then the
    same kernel with the whole warp on that path (a fresh launch: the records start at 0) runs, bit-identical."""
    dev = Dev(TRACK_PTX)
    rng = np.random.default_rng(7)
    pa = dev.array(rng.standard_normal(256).astype(np.float16))
    errs = [_error(e, lambda e=e: dev.launch(kern, 1, 32, pa, dev.empty(1024), 16)) for e in ("interp", "jit")]
    assert dev.mod.jit_kernel(kern) is not None
    assert errs[0].code == errs[1].code == Err.ILLEGAL_INSTRUCTION, errs
    assert str(errs[0]) == str(errs[1]), errs
    assert what in str(errs[1]) and f"thread ({who},0,0)" in str(errs[1]), errs
    outs = []
    for e in ("interp", "jit"):
        ENGINE["name"] = e
        pc = dev.empty(1024)
        dev.launch(kern, 1, 32, pa, pc, 32)
        outs.append(dev.get(pc, np.uint32, 256))
    assert (outs[0] == outs[1]).all() and outs[0].any()
