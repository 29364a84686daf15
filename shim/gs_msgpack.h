/* A small msgpack writer and reader: the subset gpushim's wire protocol uses.
 *
 * Hand-written rather than linking msgpack-c because it runs inside every CUDA application: it must
 * pull no extra shared library into the process, never allocate on the reader side (it decodes in
 * place from the received frame) and let bulk data bypass the frame buffer (gs_w_bin_header + writev).
 * tests/test_codec.py cross-checks it against Python's msgpack through a cffi build of this file. */
#ifndef GS_MSGPACK_H
#define GS_MSGPACK_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t *buf;
    size_t len, cap;
    int oom; /* set when growing failed; the frame must then not be sent */
} gs_wbuf;

void gs_w_init(gs_wbuf *w);
void gs_w_free(gs_wbuf *w);
void gs_w_reset(gs_wbuf *w);
void gs_w_raw(gs_wbuf *w, const void *p, size_t n);
void gs_w_nil(gs_wbuf *w);
void gs_w_bool(gs_wbuf *w, int v);
void gs_w_int(gs_wbuf *w, int64_t v);
void gs_w_uint(gs_wbuf *w, uint64_t v);
void gs_w_double(gs_wbuf *w, double v);
void gs_w_str(gs_wbuf *w, const char *s, size_t n);
void gs_w_cstr(gs_wbuf *w, const char *s);
void gs_w_bin_header(gs_wbuf *w, size_t n);
void gs_w_bin(gs_wbuf *w, const void *p, size_t n);
void gs_w_array(gs_wbuf *w, uint32_t n);
void gs_w_map(gs_wbuf *w, uint32_t n);

enum gs_mp_type {
    GS_MP_NIL, GS_MP_BOOL, GS_MP_INT, GS_MP_UINT, GS_MP_FLOAT, GS_MP_STR, GS_MP_BIN, GS_MP_ARRAY, GS_MP_MAP,
    GS_MP_EXT, GS_MP_INVALID
};

typedef struct {
    const uint8_t *p, *end;
    int err; /* sticky: once set every read fails and returns zeros */
} gs_reader;

void gs_r_init(gs_reader *r, const void *p, size_t n);
enum gs_mp_type gs_r_peek(const gs_reader *r);
int gs_r_nil(gs_reader *r);
int gs_r_bool(gs_reader *r, int *v);
int gs_r_int(gs_reader *r, int64_t *v);   /* accepts any integer that fits int64 */
int gs_r_uint(gs_reader *r, uint64_t *v); /* accepts any non-negative integer */
int gs_r_double(gs_reader *r, double *v); /* accepts floats and integers */
int gs_r_str(gs_reader *r, const char **s, uint32_t *n);
int gs_r_bin(gs_reader *r, const uint8_t **p, uint32_t *n); /* also accepts str */
int gs_r_array(gs_reader *r, uint32_t *n);
int gs_r_map(gs_reader *r, uint32_t *n);
int gs_r_skip(gs_reader *r); /* skips one whole value, nested ones included */

#endif
