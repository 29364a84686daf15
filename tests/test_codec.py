"""The shim's C msgpack codec (compiled a second time through cffi) agrees with Python's msgpack on every
message type of the protocol, both ways, and rejects malformed input without crashing."""

from __future__ import annotations

import importlib
import random
import sys
from pathlib import Path

import msgpack
import pytest

from gpushim.protocol import CALL, FATAL, HELLO, OPS, POST, REPLY, c_header

ROOT = Path(__file__).resolve().parents[1]

CDEF = """
typedef struct { uint8_t *buf; size_t len, cap; int oom; } gs_wbuf;
typedef struct { const uint8_t *p, *end; int err; } gs_reader;
void gs_w_init(gs_wbuf *w); void gs_w_free(gs_wbuf *w);
void gs_w_nil(gs_wbuf *w); void gs_w_bool(gs_wbuf *w, int v); void gs_w_int(gs_wbuf *w, int64_t v);
void gs_w_uint(gs_wbuf *w, uint64_t v); void gs_w_double(gs_wbuf *w, double v);
void gs_w_str(gs_wbuf *w, const char *s, size_t n); void gs_w_bin(gs_wbuf *w, const void *p, size_t n);
void gs_w_array(gs_wbuf *w, uint32_t n); void gs_w_map(gs_wbuf *w, uint32_t n);
void gs_r_init(gs_reader *r, const void *p, size_t n); int gs_r_peek(const gs_reader *r);
int gs_r_nil(gs_reader *r); int gs_r_bool(gs_reader *r, int *v); int gs_r_int(gs_reader *r, int64_t *v);
int gs_r_uint(gs_reader *r, uint64_t *v); int gs_r_double(gs_reader *r, double *v);
int gs_r_str(gs_reader *r, const char **s, uint32_t *n); int gs_r_bin(gs_reader *r, const uint8_t **p, uint32_t *n);
int gs_r_array(gs_reader *r, uint32_t *n); int gs_r_map(gs_reader *r, uint32_t *n); int gs_r_skip(gs_reader *r);
"""
# enum gs_mp_type order in shim/gs_msgpack.h
NIL, BOOL, INT, UINT, FLOAT, STR, BIN, ARRAY, MAP, EXT, INVALID = range(11)


@pytest.fixture(scope="module")
def codec(tmp_path_factory):
    cffi = pytest.importorskip("cffi")
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    ffi.set_source("_gs_codec", '#include "gs_msgpack.h"', sources=[str(ROOT / "shim" / "gs_msgpack.c")],
                   include_dirs=[str(ROOT / "shim")], extra_compile_args=["-std=c11", "-Wall", "-Werror"])
    out = tmp_path_factory.mktemp("codec")
    ffi.compile(tmpdir=str(out), verbose=False)
    sys.path.insert(0, str(out))
    mod = importlib.import_module("_gs_codec")
    return mod.ffi, mod.lib


def c_encode(codec, value) -> bytes:
    ffi, lib = codec
    w = ffi.new("gs_wbuf *")
    lib.gs_w_init(w)
    keep = []

    def enc(v):
        if v is None:
            lib.gs_w_nil(w)
        elif isinstance(v, bool):
            lib.gs_w_bool(w, v)
        elif isinstance(v, int):
            lib.gs_w_int(w, v) if v < 0 else lib.gs_w_uint(w, v)
        elif isinstance(v, float):
            lib.gs_w_double(w, v)
        elif isinstance(v, str):
            b = v.encode()
            keep.append(b)
            lib.gs_w_str(w, b, len(b))
        elif isinstance(v, bytes):
            keep.append(v)
            lib.gs_w_bin(w, v, len(v))
        elif isinstance(v, list):
            lib.gs_w_array(w, len(v))
            for x in v:
                enc(x)
        elif isinstance(v, dict):
            lib.gs_w_map(w, len(v))
            for k, x in v.items():
                enc(k)
                enc(x)
        else:
            raise TypeError(v)

    enc(value)
    out = bytes(ffi.buffer(w.buf, w.len))
    lib.gs_w_free(w)
    return out


def c_decode(codec, data: bytes):
    ffi, lib = codec
    r = ffi.new("gs_reader *")
    buf = ffi.from_buffer(data)
    lib.gs_r_init(r, buf, len(data))

    def dec():
        t = lib.gs_r_peek(r)
        if t == NIL:
            assert lib.gs_r_nil(r)
            return None
        if t == BOOL:
            v = ffi.new("int *")
            assert lib.gs_r_bool(r, v)
            return bool(v[0])
        if t == UINT:
            v = ffi.new("uint64_t *")
            assert lib.gs_r_uint(r, v)
            return int(v[0])
        if t == INT:
            v = ffi.new("int64_t *")
            assert lib.gs_r_int(r, v)
            return int(v[0])
        if t == FLOAT:
            v = ffi.new("double *")
            assert lib.gs_r_double(r, v)
            return float(v[0])
        if t == STR:
            s, n = ffi.new("char **"), ffi.new("uint32_t *")
            assert lib.gs_r_str(r, s, n)
            return ffi.unpack(s[0], n[0]).decode()
        if t == BIN:
            p, n = ffi.new("uint8_t **"), ffi.new("uint32_t *")
            assert lib.gs_r_bin(r, p, n)
            return bytes(ffi.buffer(p[0], n[0]))
        if t == ARRAY:
            n = ffi.new("uint32_t *")
            assert lib.gs_r_array(r, n)
            return [dec() for _ in range(n[0])]
        if t == MAP:
            n = ffi.new("uint32_t *")
            assert lib.gs_r_map(r, n)
            return {dec(): dec() for _ in range(n[0])}
        raise ValueError(f"type {t}")

    v = dec()
    assert not r.err
    return v


def protocol_messages() -> list:
    big = bytes(random.getrandbits(8) for _ in range(70000))
    msgs = [
        [HELLO, {"proto": 1, "runtime": 12040, "soname": "libcudart.so.12", "pid": 4242, "program": "app",
                 "devices": "0,1", "priority": -3, "token": "", "shim": "libgpushim 0.1.0"}],
        [HELLO, {"proto": 1, "session": 7, "error": 0, "message": "", "driver": 13000, "server": "gpushim"}],
        [REPLY, 2**40, 0, [0x3000_0000_0000, 512], b"printf output\n", None],
        [REPLY, 3, 801, [], None, "not supported: a reason a person can act on" * 3],
        [FATAL, 0, 1, "malformed frame"],
        [5, 0x6000_0010, 12],
        [POST, 9, 29, [0x3000_0000_0200, -1, 2**63 - 1, 0]],
        [REPLY, 1, 0, [{"name": "NVIDIA H100", "maxThreadsDim": [1024, 1024, 64], "uuid": b"\x01" * 16,
                        "clock": 1.5, "neg": -(2**40), "small": -5, "b": True}], None, None],
        [CALL, 5, 23, [1, 0, big]],
        [CALL, 6, 23, [1, 0, b""]],
        [CALL, 7, 1, ["x" * 40, "y" * 300, "z" * 70000, list(range(20)), {str(i): i for i in range(20)}]],
    ]
    for op in OPS:
        msgs.append([CALL, op.id, op.id, [i * 1000003 for i in range(len(op.args))]])
    return msgs


def test_c_encoder_matches_python_msgpack(codec):
    for m in protocol_messages():
        c = c_encode(codec, m)
        assert msgpack.unpackb(c, raw=False, strict_map_key=False) == m
        assert c == msgpack.packb(m, use_bin_type=True)  # same canonical (smallest) encoding


def test_c_decoder_reads_python_msgpack(codec):
    for m in protocol_messages():
        assert c_decode(codec, msgpack.packb(m, use_bin_type=True)) == m
    # integer encodings Python chooses that the C side must accept too
    for v in (0, 127, 128, 255, 256, 65535, 65536, 2**32, 2**64 - 1, -1, -32, -33, -128, -129, -(2**31), -(2**63)):
        assert c_decode(codec, msgpack.packb(v)) == v
    assert c_decode(codec, msgpack.packb(1.25, use_single_float=True)) == 1.25


def test_c_reader_rejects_malformed_input(codec):
    ffi, lib = codec
    rng = random.Random(7)
    samples = [msgpack.packb(m, use_bin_type=True) for m in protocol_messages()]
    for _ in range(3000):
        data = bytearray(rng.choice(samples))
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.getrandbits(8)
        data = bytes(data[: rng.randrange(len(data) + 1)])
        r = ffi.new("gs_reader *")
        buf = ffi.from_buffer(data)
        lib.gs_r_init(r, buf, len(data))
        ok = lib.gs_r_skip(r)
        assert ok in (0, 1)  # never crashes, never reads past the end
        assert r.p <= r.end
    # a deeply nested array does not overflow the stack
    deep = b"\x91" * 1_000_000 + b"\xc0"
    r = ffi.new("gs_reader *")
    buf = ffi.from_buffer(deep)
    lib.gs_r_init(r, buf, len(deep))
    assert lib.gs_r_skip(r) == 1


def test_generated_c_header_is_current():
    generated = ROOT / "shim" / "gen" / "ops.h"
    if not generated.exists():
        pytest.skip("shim not generated yet (run make)")
    assert generated.read_text() == c_header(), "shim/gen/ops.h is stale: run `python3 shim/generate.py`"
    for op in OPS:
        assert f"GS_OP_{op.name} = {op.id}," in generated.read_text()
