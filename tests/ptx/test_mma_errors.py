"""Tensor-core instructions the engine does not run are refused when the module loads, naming the instruction
(PtxUnsupported); malformed fragments are PtxErrors; cvt to tf32 rounds as the PTX ISA's "cvt" says; wmma
without a stride operand, through generic addresses."""

import numpy as np
import pytest

from gpushim.ptx import PtxError, PtxUnsupported, load_module

HEAD = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
  .reg .b32 %r<40>;
  .reg .f32 %f<40>;
  .reg .f64 %fd<8>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p];
"""


def ptx(body: str) -> str:
    return HEAD + body + "\n  ret;\n}\n"


@pytest.mark.parametrize(
    "ins,what",
    [
        ("mma.sync.aligned.m16n8k16.row.col.satfinite.f32.f16.f16.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, "
         "{%r5,%r6}, {%f5,%f6,%f7,%f8};", "satfinite"),
        ("mma.sync.aligned.m8n8k4.row.col.f32.bf16.bf16.f32 {%f1,%f2,%f3,%f4,%f5,%f6,%f7,%f8}, {%r1,%r2}, "
         "{%r3,%r4}, {%f9,%f10,%f11,%f12,%f13,%f14,%f15,%f16};", "m8n8k4"),
        ("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, "
         "{%r5,%r6,%r7,%r8}, {%f5,%f6,%f7,%f8}, %r9, 0x0;", "sparse"),
        ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e2m3.f32 {%f1,%f2,%f3,%f4}, "
         "{%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f5,%f6,%f7,%f8};", "kind::f8f6f4"),
        ("mma.sync.aligned.m8n8k16.row.col.f32.e4m3.e4m3.f32 {%f1,%f2}, {%r1}, {%r2}, {%f5,%f6};", "e4m3"),
        ("mma.sync.aligned.m16n8k32.row.col.s32.s4.s8.s32 {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%r7}, "
         "{%r8,%r9,%r10,%r11};", "mixed"),
        ("wmma.load.a.sync.aligned.col.m8n8k32.global.s4 {%r1}, [%rd1], 32;", "s4"),
        ("wmma.load.a.sync.aligned.row.m16n16k16.local.f16 {%r1,%r2,%r3,%r4,%r5,%r6,%r7,%r8}, [%rd1], 16;",
         "local"),
        ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f16 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, "
         "{%r7,%r8};", "f32 D with .f16 C"),
        ("ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%r1,%r2}, [%rd1];", "m8n8"),
        ("wgmma.fence.sync.aligned;", "wgmma"),
    ],
)  # fmt: skip
def test_unsupported_variants_fail_at_load(ins, what):
    with pytest.raises(PtxUnsupported) as e:
        load_module(ptx("  " + ins))
    msg = str(e.value)
    assert ins.split()[0].rstrip(";") in msg and what in msg and "line" in msg, msg


@pytest.mark.parametrize(
    "ins,what",
    [
        ("wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r1,%r2,%r3,%r4}, [%rd1], 16;", "needs 8 registers"),
        ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3}, {%r5,%r6}, "
         "{%f5,%f6,%f7,%f8};", "A fragment needs 4 registers"),
        ("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1,%r2}, [%rd1];", "2 destination registers for .x4"),
        ("wmma.mma.sync.aligned.row.col.m8n8k128.s32.b1.b1.s32 {%r1,%r2}, {%r3}, {%r4}, {%r5,%r6};",
         ".b1 needs .xor.popc or .and.popc"),
    ],
)  # fmt: skip
def test_malformed_fragments_are_errors(ins, what):
    with pytest.raises(PtxError) as e:
        load_module(ptx("  " + ins))
    assert what in str(e.value), str(e.value)


def test_cvt_tf32(dev_for):
    """cvt.rna (ties away), .rn (ties to even), .rz to tf32: 10 mantissa bits kept, low 13 bits zero; NaN canonical,
    infinities kept; .satfinite clamps to the largest finite tf32."""
    from harness import Dev

    body = """
  .reg .b32 %x<8>;
  .reg .u32 %t;
  .reg .b64 %a;
  mov.u32 %t, %tid.x;
  mul.wide.u32 %a, %t, 4;
  add.s64 %a, %rd1, %a;
  ld.global.b32 %x1, [%a];
  cvt.rna.tf32.f32 %x2, %x1;
  cvt.rn.tf32.f32 %x3, %x1;
  cvt.rz.tf32.f32 %x4, %x1;
  cvt.rna.satfinite.tf32.f32 %x5, %x1;
  st.global.b32 [%a+4096], %x2;
  st.global.b32 [%a+8192], %x3;
  st.global.b32 [%a+12288], %x4;
  st.global.b32 [%a+16384], %x5;"""
    d = Dev(ptx(body))
    x = np.array(
        [0x3F801000, 0x3F803000, 0x3F802FFF, 0xBF801000, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00001, 0, 0x80000000,
         0x00001FFF, 0x3FFFF000] + [0x12345678] * 20, np.uint32)  # fmt: skip
    p = d.array(np.concatenate([x, np.zeros(1024 * 5 - x.size, np.uint32)]))
    d.launch("k", 1, 32, p)
    out = d.get(p, np.uint32, 1024 * 5).reshape(5, 1024)[1:, :32]

    def ref(b: int, mode: str, sat: bool) -> int:
        mag = b & 0x7FFFFFFF
        if mag > 0x7F800000:
            return 0x7FFFFFFF
        if mag == 0x7F800000:
            return (b & 0x80000000) | 0x7F7FE000 if sat else b
        low = b & 0x1FFF
        r = b & 0xFFFFE000
        if mode == "rna" and low >= 0x1000 or mode == "rn" and (low > 0x1000 or low == 0x1000 and r & 0x2000):
            r += 0x2000
        if sat and (r & 0x7FFFFFFF) >= 0x7F800000:
            r = (b & 0x80000000) | 0x7F7FE000
        return r

    for i, b in enumerate(int(v) for v in x):
        assert int(out[0, i]) == ref(b, "rna", False), hex(b)
        assert int(out[1, i]) == ref(b, "rn", False), hex(b)
        assert int(out[2, i]) == ref(b, "rz", False), hex(b)
        assert int(out[3, i]) == ref(b, "rna", True), hex(b)


def test_wmma_default_stride_and_generic_addresses():
    """wmma.load/store without a stride operand use the fragment's own width (row) or height (col) as the leading
    dimension (PTX ISA, "wmma.load": stride is optional); no state space means generic addresses."""
    from harness import Dev
    from mma_refs import mma

    body = """
  .reg .b64 %p<4>;
  ld.global.u64 %p1, [%rd1];
  ld.global.u64 %p2, [%rd1+8];
  ld.global.u64 %p3, [%rd1+16];
  wmma.load.a.sync.aligned.row.m16n16k16.f16 {%r1,%r2,%r3,%r4,%r5,%r6,%r7,%r8}, [%p1];
  wmma.load.b.sync.aligned.col.m16n16k16.f16 {%r9,%r10,%r11,%r12,%r13,%r14,%r15,%r16}, [%p2];
  wmma.load.c.sync.aligned.col.m16n16k16.f32 {%f1,%f2,%f3,%f4,%f5,%f6,%f7,%f8}, [%p3];
  wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%f11,%f12,%f13,%f14,%f15,%f16,%f17,%f18},
      {%r1,%r2,%r3,%r4,%r5,%r6,%r7,%r8}, {%r9,%r10,%r11,%r12,%r13,%r14,%r15,%r16}, {%f1,%f2,%f3,%f4,%f5,%f6,%f7,%f8};
  wmma.store.d.sync.aligned.row.m16n16k16.f32 [%p3], {%f11,%f12,%f13,%f14,%f15,%f16,%f17,%f18};"""
    d = Dev(ptx(body))
    rng = np.random.default_rng(7)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 16)).astype(np.float16)
    c = rng.standard_normal((16, 16)).astype(np.float32)
    pa, pb, pc = d.array(a), d.array(b.T.copy()), d.array(c.T.copy())  # B and C column-major
    d.launch("k", 1, 32, d.array(np.array([pa, pb, pc], np.uint64)))
    got = d.get(pc, np.float32, 256).reshape(16, 16)
    exp = mma(a, b, c, "f32").astype(np.float32)
    assert np.array_equal(got.view(np.uint32), exp.view(np.uint32))
