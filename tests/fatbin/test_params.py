"""Kernel parameter layouts: the cubin's .nv.info and the PTX .entry list agree; PTX parsing details."""

from __future__ import annotations

import pytest

from gpushim.fatbin import FatbinError, cubin_info, ptx_info

from .helpers import main_images

MANY = "_Z4manycsixfdPv5Smallcb3Vect"
# char, short, int, long long, float, double, void*, Small (40 B, align 8), char, bool, Vec (16 B, align 16), ushort
MANY_LAYOUT = [(0, 1), (2, 2), (4, 4), (8, 8), (16, 4), (24, 8), (32, 8), (40, 40), (80, 1), (81, 1), (96, 16),
               (112, 2)]


@pytest.mark.parametrize("name", ["none", "lz_all", "multi_lz"])
def test_cubin_layouts_match_ptx(built, name):
    imgs = main_images(built[name])
    ptx = next(i for i in imgs if i.kind == "ptx")
    pinfo = ptx_info(ptx.ptx_text)
    cubins = [i for i in imgs if i.kind == "cubin"]
    assert cubins
    for img in cubins:
        cinfo = cubin_info(img.payload)
        assert set(cinfo.kernels) == set(pinfo.entries)
        for kname, k in cinfo.kernels.items():
            assert [p.ordinal for p in k.params] == list(range(len(k.params)))
            assert [(p.offset, p.size) for p in k.params] == pinfo.param_layout(kname), kname
            assert k.param_bytes == pinfo.param_bytes(kname), kname


def test_known_layouts(built):
    imgs = main_images(built["none"])
    cinfo = cubin_info(next(i for i in imgs if i.kind == "cubin").payload)
    pinfo = ptx_info(next(i for i in imgs if i.kind == "ptx").ptx_text)
    many = cinfo.kernels[MANY]
    assert [(p.offset, p.size) for p in many.params] == MANY_LAYOUT
    assert many.param_bytes == 114
    assert many.cbank_offset == 0x160  # sm_75 parameters start at c[0x0][0x160]
    assert pinfo.entries[MANY][7] == (40, 8) and pinfo.entries[MANY][10] == (16, 16)
    big = cinfo.kernels["_Z3bigPf3Big"]
    assert [(p.offset, p.size) for p in big.params] == [(0, 8), (8, 164)] and big.param_bytes == 172
    assert pinfo.entries["_Z3bigPf3Big"] == [(8, 8), (164, 4)]
    empty = cinfo.kernels["_Z5emptyv"]
    assert empty.params == [] and empty.param_bytes == 0 and pinfo.entries["_Z5emptyv"] == []
    for t in "fdi":
        k = cinfo.kernels[f"_Z4taddI{t}EvPT_PKS0_i"]
        assert [(p.ordinal, p.offset, p.size) for p in k.params] == [(0, 0, 8), (1, 8, 8), (2, 16, 4)]
        assert k.registers and k.registers > 0
    assert pinfo.version == (9, 0) and pinfo.target == "sm_75" and pinfo.address_size == 64
    assert pinfo.features == set()


def test_sm90_parameter_bank_offset(built):
    cubin = next(i for i in main_images(built["multi_none"]) if i.kind == "cubin" and i.arch == 90)
    assert cubin_info(cubin.payload).kernels[MANY].cbank_offset == 0x210


def test_device_link_cubin_has_no_kernels(built):
    from .helpers import images

    (dlink,) = images(built["default"])[0]
    info = cubin_info(dlink.payload)
    assert info.kernels == {} and info.arch == 75 and info.cuda_api_version == 130


def test_features_of_newer_isa(built):
    info = ptx_info(built["features_ptx"].read_text())
    assert info.target == "sm_90"
    assert {"wmma", "cp.async", "redux.sync", "tex", "printf", "griddepcontrol", "elect.sync",
            "barrier.cluster", "cluster"} <= info.features
    assert info.min_isa == (8, 0)  # elect.sync
    assert set(info.entries) == {"_Z2wmP6__halfS0_Pf", "_Z2caPf", "_Z2txyPf", "_Z2clPi"}


PTX_SAMPLE = """
//
// hand-written
//
.version 7.8
.target sm_80, texmode_independent
.address_size 64

/* a comment with .entry fake( .param .u32 x ) inside */
.visible .entry k1(
    .param .u64 .ptr .global .align 16 k1_p0,   // pointee alignment, not the parameter's
    .param .align 4 .b8 k1_p1[164],
    .param .f16x2 k1_p2,
    .param .b8 k1_p3[3][5],
    .param .s8 k1_p4
)
.maxntid 128, 1, 1
{
    .reg .b32 %r<9>;
    .reg .pred %p<2>;
$L0:
    @%p1 bra $L0;
    @!%p1 mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%r1,%r2,%r3,%r4}, {%r1,%r2,%r3,%r4}, {%r1,%r2},
        {%r1,%r2,%r3,%r4};
    { .reg .b32 t;
      cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r1, %r2}], [%r3]; }
    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1,%r2,%r3,%r4}, [%r5];
    mov.u32 %r6, %cluster_ctarank;
    suld.b.2d.b32.trap {%r1}, [surf, {%r2, %r3}];
    wgmma.fence.sync.aligned;
    ret;
}
.weak .entry k2 ( )
{
    ret;
}
"""


def test_hand_written_ptx():
    info = ptx_info(PTX_SAMPLE)
    assert info.version == (7, 8) and info.target == "sm_80" and info.targets == ("sm_80", "texmode_independent")
    assert set(info.entries) == {"k1", "k2"}
    assert info.entries["k1"] == [(8, 8), (164, 4), (4, 4), (15, 1), (1, 1)]
    assert info.param_layout("k1") == [(0, 8), (8, 164), (172, 4), (176, 15), (191, 1)]
    assert info.entries["k2"] == []
    assert {"mma", "bf16", "cp.async.bulk.tensor", "ldmatrix", "cluster", "suld", "wgmma"} <= info.features
    assert "cp.async" not in info.features and "wmma" not in info.features
    assert info.min_isa == (8, 0)


@pytest.mark.parametrize("bad", ["", ".target sm_75", ".version x.y\n", ".version 8.0\n.entry k(.param p)\n{}"])
def test_bad_ptx(bad):
    with pytest.raises(FatbinError):
        ptx_info(bad)


@pytest.mark.parametrize("bad", [b"", b"\x7fELF" + b"\0" * 60, b"\x7fELF\x02\x01\x01" + b"\xff" * 200])
def test_bad_cubin(bad):
    with pytest.raises(FatbinError):
        cubin_info(bad)


def test_host_elf_is_not_a_cubin():
    with open("/bin/sh", "rb") as f:
        with pytest.raises(FatbinError):
            cubin_info(f.read())
