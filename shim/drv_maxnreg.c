/* CU_JIT_MAX_REGISTERS (ptxas' -maxrregcount) for PTX the emulator runs: the shim writes it into the PTX as each
 * entry's .maxnreg, which the engine's register count honours (gpushim/ptx/regcount.py), as ptxas spills to
 * meet it. An entry's own .maxnreg stays: it takes precedence over the option, as __maxnreg__ does over
 * -maxrregcount. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { JIT_MAX_REGISTERS = 0 }; /* CU_JIT_MAX_REGISTERS */

/* The CU_JIT_MAX_REGISTERS value among JIT options, 0 when absent. */
static unsigned jit_max_registers(unsigned n, const int *opts, void *const *values) {
    unsigned most = 0;
    for (unsigned i = 0; opts && values && i < n; i++)
        if (opts[i] == JIT_MAX_REGISTERS) most = (unsigned)(uintptr_t)values[i];
    return most;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* A malloc'd, NUL-terminated copy of the PTX text ptx[0..len) with ".maxnreg regs" before the body of each .entry
 * that has none; NULL when out of memory. */
static char *ptx_with_maxnreg(const char *ptx, size_t len, unsigned regs) {
    char directive[32];
    int dn = snprintf(directive, sizeof directive, "\n.maxnreg %u\n", regs);
    size_t entries = 0;
    for (const char *p = ptx; (p = memmem(p, len - (size_t)(p - ptx), ".entry", 6)); p += 6) entries++;
    char *out = malloc(len + entries * (size_t)dn + 1), *w = out;
    if (!out) return NULL;
    const char *at = ptx, *end = ptx + len;
    for (const char *p = ptx; (p = memmem(p, (size_t)(end - p), ".entry", 6)); p += 6) {
        if ((p > ptx && !is_space(p[-1])) || p + 6 >= end || !is_space(p[6])) continue;
        const char *brace = memchr(p, '{', (size_t)(end - p));
        if (!brace) break;
        if (memmem(p, (size_t)(brace - p), ".maxnreg", 8)) continue;
        memcpy(w, at, (size_t)(brace - at));
        w += brace - at;
        memcpy(w, directive, (size_t)dn);
        w += dn;
        at = brace;
    }
    memcpy(w, at, (size_t)(end - at));
    w += end - at;
    *w = 0;
    return out;
}
