/* Writing values into runtime structs laid out per the caller's ABI (layouts come from adapters/). */
#include <string.h>

#include "gs_api.h"

static void store_int(uint8_t *p, unsigned size, uint64_t v) {
    for (unsigned i = 0; i < size && i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); /* little-endian host */
}

static int read_number(gs_reader *r, const gs_field *f, uint8_t *p, unsigned size) {
    if (f->kind == GS_F_FLOAT) {
        double d;
        if (!gs_r_double(r, &d)) return 0;
        if (size == 4) { float x = (float)d; memcpy(p, &x, 4); }
        else if (size == 8) memcpy(p, &d, 8);
        return 1;
    }
    int64_t v;
    if (gs_r_peek(r) == GS_MP_UINT) {
        uint64_t u;
        if (!gs_r_uint(r, &u)) return 0;
        v = (int64_t)u;
    } else if (!gs_r_int(r, &v)) return 0;
    store_int(p, size, (uint64_t)v);
    return 1;
}

void gs_store_field(void *dst, const gs_field *f, gs_reader *r) {
    uint8_t *p = (uint8_t *)dst + f->offset;
    enum gs_mp_type t = gs_r_peek(r);
    if (t == GS_MP_STR || t == GS_MP_BIN) {
        const uint8_t *s;
        uint32_t n;
        gs_r_bin(r, &s, &n);
        if (f->kind == GS_F_CHARS) {
            unsigned m = n < f->size ? n : f->size - 1u;
            memcpy(p, s, m);
            p[m] = 0;
        } else if (f->kind == GS_F_BYTES) {
            memcpy(p, s, n < f->size ? n : f->size);
        }
        return;
    }
    if (t == GS_MP_ARRAY) {
        uint32_t n;
        gs_r_array(r, &n);
        unsigned elem = f->count > 1 ? f->size / f->count : f->size;
        for (uint32_t i = 0; i < n; i++) {
            if (i < f->count) read_number(r, f, p + i * elem, elem);
            else gs_r_skip(r);
        }
        return;
    }
    if (f->count > 1 || f->kind == GS_F_CHARS || f->kind == GS_F_BYTES) { gs_r_skip(r); return; }
    if (!read_number(r, f, p, f->size)) gs_r_skip(r);
}

void gs_set_field(void *dst, const gs_layout *l, const char *name, uint64_t value) {
    for (unsigned i = 0; i < l->nfields; i++) {
        if (strcmp(l->fields[i].name, name) == 0) {
            store_int((uint8_t *)dst + l->fields[i].offset, l->fields[i].size, value);
            return;
        }
    }
}

void gs_fill_struct(void *dst, const gs_layout *l, gs_reader r) {
    memset(dst, 0, l->size);
    uint32_t n;
    gs_r_map(&r, &n);
    for (uint32_t i = 0; i < n && !r.err; i++) {
        const char *key;
        uint32_t kl;
        gs_r_str(&r, &key, &kl);
        const gs_field *f = NULL;
        for (unsigned j = 0; j < l->nfields && !f; j++)
            if (strlen(l->fields[j].name) == kl && memcmp(l->fields[j].name, key, kl) == 0) f = &l->fields[j];
        if (f) gs_store_field(dst, f, &r);
        else gs_r_skip(&r);
    }
}
