#include "gs_msgpack.h"

#include <stdlib.h>
#include <string.h>

void gs_w_init(gs_wbuf *w) { memset(w, 0, sizeof *w); }
void gs_w_free(gs_wbuf *w) { free(w->buf); gs_w_init(w); }
void gs_w_reset(gs_wbuf *w) { w->len = 0; w->oom = 0; }

static int grow(gs_wbuf *w, size_t extra) {
    if (w->oom) return 0;
    if (w->len + extra <= w->cap) return 1;
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + extra) cap *= 2;
    uint8_t *b = realloc(w->buf, cap);
    if (!b) { w->oom = 1; return 0; }
    w->buf = b;
    w->cap = cap;
    return 1;
}

void gs_w_raw(gs_wbuf *w, const void *p, size_t n) {
    if (!grow(w, n)) return;
    if (n) memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void put1(gs_wbuf *w, uint8_t b) { gs_w_raw(w, &b, 1); }
static void put_be(gs_wbuf *w, uint8_t tag, uint64_t v, int bytes) {
    uint8_t b[9];
    b[0] = tag;
    for (int i = 0; i < bytes; i++) b[1 + i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
    gs_w_raw(w, b, (size_t)bytes + 1);
}

void gs_w_nil(gs_wbuf *w) { put1(w, 0xc0); }
void gs_w_bool(gs_wbuf *w, int v) { put1(w, v ? 0xc3 : 0xc2); }

void gs_w_uint(gs_wbuf *w, uint64_t v) {
    if (v < 128) put1(w, (uint8_t)v);
    else if (v <= 0xff) put_be(w, 0xcc, v, 1);
    else if (v <= 0xffff) put_be(w, 0xcd, v, 2);
    else if (v <= 0xffffffffu) put_be(w, 0xce, v, 4);
    else put_be(w, 0xcf, v, 8);
}

void gs_w_int(gs_wbuf *w, int64_t v) {
    if (v >= 0) { gs_w_uint(w, (uint64_t)v); return; }
    if (v >= -32) put1(w, (uint8_t)(int8_t)v);
    else if (v >= INT8_MIN) put_be(w, 0xd0, (uint64_t)v, 1);
    else if (v >= INT16_MIN) put_be(w, 0xd1, (uint64_t)v, 2);
    else if (v >= INT32_MIN) put_be(w, 0xd2, (uint64_t)v, 4);
    else put_be(w, 0xd3, (uint64_t)v, 8);
}

void gs_w_double(gs_wbuf *w, double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    put_be(w, 0xcb, bits, 8);
}

void gs_w_str(gs_wbuf *w, const char *s, size_t n) {
    if (n < 32) put1(w, (uint8_t)(0xa0 | n));
    else if (n <= 0xff) put_be(w, 0xd9, n, 1);
    else if (n <= 0xffff) put_be(w, 0xda, n, 2);
    else put_be(w, 0xdb, n, 4);
    gs_w_raw(w, s, n);
}

void gs_w_cstr(gs_wbuf *w, const char *s) { gs_w_str(w, s ? s : "", s ? strlen(s) : 0); }

void gs_w_bin_header(gs_wbuf *w, size_t n) {
    if (n <= 0xff) put_be(w, 0xc4, n, 1);
    else if (n <= 0xffff) put_be(w, 0xc5, n, 2);
    else put_be(w, 0xc6, n, 4);
}

void gs_w_bin(gs_wbuf *w, const void *p, size_t n) { gs_w_bin_header(w, n); gs_w_raw(w, p, n); }

void gs_w_array(gs_wbuf *w, uint32_t n) {
    if (n < 16) put1(w, (uint8_t)(0x90 | n));
    else if (n <= 0xffff) put_be(w, 0xdc, n, 2);
    else put_be(w, 0xdd, n, 4);
}

void gs_w_map(gs_wbuf *w, uint32_t n) {
    if (n < 16) put1(w, (uint8_t)(0x80 | n));
    else if (n <= 0xffff) put_be(w, 0xde, n, 2);
    else put_be(w, 0xdf, n, 4);
}

/* ---- reader ---- */

void gs_r_init(gs_reader *r, const void *p, size_t n) {
    r->p = p;
    r->end = r->p + n;
    r->err = 0;
}

static int fail(gs_reader *r) { r->err = 1; return 0; }
static int need(gs_reader *r, size_t n) { return !r->err && (size_t)(r->end - r->p) >= n ? 1 : fail(r); }
static uint64_t be(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v = (v << 8) | p[i];
    return v;
}

enum gs_mp_type gs_r_peek(const gs_reader *r) {
    if (r->err || r->p >= r->end) return GS_MP_INVALID;
    uint8_t b = *r->p;
    if (b <= 0x7f || (b >= 0xcc && b <= 0xcf)) return GS_MP_UINT;
    if (b >= 0xe0 || (b >= 0xd0 && b <= 0xd3)) return GS_MP_INT;
    if ((b & 0xf0) == 0x80 || b == 0xde || b == 0xdf) return GS_MP_MAP;
    if ((b & 0xf0) == 0x90 || b == 0xdc || b == 0xdd) return GS_MP_ARRAY;
    if ((b & 0xe0) == 0xa0 || (b >= 0xd9 && b <= 0xdb)) return GS_MP_STR;
    if (b >= 0xc4 && b <= 0xc6) return GS_MP_BIN;
    if (b == 0xc0) return GS_MP_NIL;
    if (b == 0xc2 || b == 0xc3) return GS_MP_BOOL;
    if (b == 0xca || b == 0xcb) return GS_MP_FLOAT;
    if ((b >= 0xc7 && b <= 0xc9) || (b >= 0xd4 && b <= 0xd8)) return GS_MP_EXT;
    return GS_MP_INVALID; /* 0xc1 is never used */
}

int gs_r_nil(gs_reader *r) {
    if (!need(r, 1) || *r->p != 0xc0) return fail(r);
    r->p++;
    return 1;
}

int gs_r_bool(gs_reader *r, int *v) {
    *v = 0;
    if (!need(r, 1) || (*r->p != 0xc2 && *r->p != 0xc3)) return fail(r);
    *v = *r->p++ == 0xc3;
    return 1;
}

/* Reads any integer into (negative?, magnitude bits as two's complement int64 or uint64). */
static int read_integer(gs_reader *r, uint64_t *bits, int *is_signed) {
    *bits = 0;
    *is_signed = 0;
    if (!need(r, 1)) return 0;
    uint8_t b = *r->p;
    if (b <= 0x7f) { *bits = b; r->p++; return 1; }
    if (b >= 0xe0) { *bits = (uint64_t)(int64_t)(int8_t)b; *is_signed = 1; r->p++; return 1; }
    int bytes, sgn;
    switch (b) {
    case 0xcc: bytes = 1; sgn = 0; break;
    case 0xcd: bytes = 2; sgn = 0; break;
    case 0xce: bytes = 4; sgn = 0; break;
    case 0xcf: bytes = 8; sgn = 0; break;
    case 0xd0: bytes = 1; sgn = 1; break;
    case 0xd1: bytes = 2; sgn = 1; break;
    case 0xd2: bytes = 4; sgn = 1; break;
    case 0xd3: bytes = 8; sgn = 1; break;
    default: return fail(r);
    }
    if (!need(r, 1 + (size_t)bytes)) return 0;
    uint64_t v = be(r->p + 1, bytes);
    if (sgn && bytes < 8 && (v >> (8 * bytes - 1))) v |= ~0ull << (8 * bytes); /* sign-extend */
    r->p += 1 + bytes;
    *bits = v;
    *is_signed = sgn && (int64_t)v < 0;
    return 1;
}

int gs_r_int(gs_reader *r, int64_t *v) {
    uint64_t bits;
    int neg;
    *v = 0;
    if (!read_integer(r, &bits, &neg)) return 0;
    if (!neg && bits > (uint64_t)INT64_MAX) return fail(r);
    *v = (int64_t)bits;
    return 1;
}

int gs_r_uint(gs_reader *r, uint64_t *v) {
    uint64_t bits;
    int neg;
    *v = 0;
    if (!read_integer(r, &bits, &neg)) return 0;
    if (neg) return fail(r);
    *v = bits;
    return 1;
}

int gs_r_double(gs_reader *r, double *v) {
    *v = 0;
    if (!need(r, 1)) return 0;
    uint8_t b = *r->p;
    if (b == 0xcb) {
        if (!need(r, 9)) return 0;
        uint64_t bits = be(r->p + 1, 8);
        memcpy(v, &bits, 8);
        r->p += 9;
        return 1;
    }
    if (b == 0xca) {
        if (!need(r, 5)) return 0;
        uint32_t bits = (uint32_t)be(r->p + 1, 4);
        float f;
        memcpy(&f, &bits, 4);
        *v = f;
        r->p += 5;
        return 1;
    }
    uint64_t bits;
    int neg;
    if (!read_integer(r, &bits, &neg)) return 0;
    *v = neg ? (double)(int64_t)bits : (double)bits;
    return 1;
}

static int read_len(gs_reader *r, int bytes, uint32_t *n) {
    if (!need(r, 1 + (size_t)bytes)) return 0;
    *n = (uint32_t)be(r->p + 1, bytes);
    r->p += 1 + bytes;
    return 1;
}

static int read_span(gs_reader *r, uint32_t n, const uint8_t **p) {
    if (!need(r, n)) return 0;
    *p = r->p;
    r->p += n;
    return 1;
}

int gs_r_str(gs_reader *r, const char **s, uint32_t *n) {
    *s = NULL;
    *n = 0;
    if (!need(r, 1)) return 0;
    uint8_t b = *r->p;
    int ok;
    if ((b & 0xe0) == 0xa0) { *n = b & 0x1f; r->p++; ok = 1; }
    else if (b == 0xd9) ok = read_len(r, 1, n);
    else if (b == 0xda) ok = read_len(r, 2, n);
    else if (b == 0xdb) ok = read_len(r, 4, n);
    else return fail(r);
    return ok && read_span(r, *n, (const uint8_t **)s);
}

int gs_r_bin(gs_reader *r, const uint8_t **p, uint32_t *n) {
    *p = NULL;
    *n = 0;
    if (!need(r, 1)) return 0;
    uint8_t b = *r->p;
    if (b == 0xc4 || b == 0xc5 || b == 0xc6) {
        int bytes = b == 0xc4 ? 1 : b == 0xc5 ? 2 : 4;
        return read_len(r, bytes, n) && read_span(r, *n, p);
    }
    return gs_r_str(r, (const char **)p, n);
}

int gs_r_array(gs_reader *r, uint32_t *n) {
    *n = 0;
    if (!need(r, 1)) return 0;
    uint8_t b = *r->p;
    if ((b & 0xf0) == 0x90) { *n = b & 0x0f; r->p++; return 1; }
    if (b == 0xdc) return read_len(r, 2, n);
    if (b == 0xdd) return read_len(r, 4, n);
    return fail(r);
}

int gs_r_map(gs_reader *r, uint32_t *n) {
    *n = 0;
    if (!need(r, 1)) return 0;
    uint8_t b = *r->p;
    if ((b & 0xf0) == 0x80) { *n = b & 0x0f; r->p++; return 1; }
    if (b == 0xde) return read_len(r, 2, n);
    if (b == 0xdf) return read_len(r, 4, n);
    return fail(r);
}

int gs_r_skip(gs_reader *r) {
    /* Iterative, so a hostile deeply nested frame cannot overflow the stack: `pending` counts values
     * still to skip. */
    uint64_t pending = 1;
    while (pending && !r->err) {
        pending--;
        uint32_t n;
        const uint8_t *p;
        double d;
        switch (gs_r_peek(r)) {
        case GS_MP_NIL: gs_r_nil(r); break;
        case GS_MP_BOOL: { int b; gs_r_bool(r, &b); break; }
        case GS_MP_INT: case GS_MP_UINT: { uint64_t bits; int neg; read_integer(r, &bits, &neg); break; }
        case GS_MP_FLOAT: gs_r_double(r, &d); break;
        case GS_MP_STR: case GS_MP_BIN: gs_r_bin(r, &p, &n); break;
        case GS_MP_ARRAY: if (gs_r_array(r, &n)) pending += n; break;
        case GS_MP_MAP: if (gs_r_map(r, &n)) pending += 2ull * n; break;
        case GS_MP_EXT: {
            uint8_t b = *r->p;
            uint32_t len = 0;
            if (b >= 0xd4 && b <= 0xd8) { len = 1u << (b - 0xd4); r->p++; }
            else if (!read_len(r, b == 0xc7 ? 1 : b == 0xc8 ? 2 : 4, &len)) break;
            read_span(r, len + 1, &p); /* type byte + data */
            break;
        }
        default: fail(r); break;
        }
    }
    return !r->err;
}
