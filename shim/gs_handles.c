/* Sets of live handles: open addressing with linear probing, one lock per kind. */
#include "gs_handles.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    pthread_mutex_t lock;
    uint64_t *slots; /* 0: empty; HS_TOMBSTONE: removed */
    size_t n;        /* a power of two, or 0 */
    size_t used;     /* slots that are not empty (live and tombstones) */
    size_t live;
} hs_set;

#define HS_TOMBSTONE UINT64_MAX
#define HS_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0}
static hs_set hs_sets[GS_HANDLE_KINDS] = {HS_INIT, HS_INIT, HS_INIT, HS_INIT, HS_INIT,
                                          HS_INIT, HS_INIT, HS_INIT, HS_INIT, HS_INIT};
_Static_assert(GS_HANDLE_KINDS == 10, "one HS_INIT per kind");

static size_t hs_slot(uint64_t h, size_t n) { return (size_t)((h * 0x9E3779B97F4A7C15ull) >> 20) & (n - 1); }

static size_t hs_find_locked(const hs_set *t, uint64_t h) {
    if (!t->n || !h || h == HS_TOMBSTONE) return SIZE_MAX;
    size_t j = hs_slot(h, t->n);
    for (size_t probes = 0; t->slots[j] && probes < t->n; probes++, j = (j + 1) & (t->n - 1))
        if (t->slots[j] == h) return j;
    return SIZE_MAX;
}

/* Rehashes into n slots (dropping tombstones); 0 when out of memory. */
static int hs_rehash_locked(hs_set *t, size_t n) {
    uint64_t *s = calloc(n, sizeof *s);
    if (!s) return 0;
    for (size_t i = 0; i < t->n; i++) {
        uint64_t v = t->slots[i];
        if (!v || v == HS_TOMBSTONE) continue;
        size_t j = hs_slot(v, n);
        while (s[j]) j = (j + 1) & (n - 1);
        s[j] = v;
    }
    free(t->slots);
    t->slots = s;
    t->n = n;
    t->used = t->live;
    return 1;
}

void gs_handle_add(int kind, uint64_t h) {
    if (!h || h == HS_TOMBSTONE) return;
    hs_set *t = &hs_sets[kind];
    pthread_mutex_lock(&t->lock);
    if (hs_find_locked(t, h) == SIZE_MAX) {
        /* at most half full, counting tombstones; grow only when the live handles need it */
        if ((t->used + 1) * 2 > t->n && !hs_rehash_locked(t, (t->live + 1) * 4 > t->n ? (t->n ? t->n * 2 : 64) : t->n)) {
            pthread_mutex_unlock(&t->lock);
            return;
        }
        size_t j = hs_slot(h, t->n);
        while (t->slots[j] && t->slots[j] != HS_TOMBSTONE) j = (j + 1) & (t->n - 1);
        if (!t->slots[j]) t->used++;
        t->slots[j] = h;
        t->live++;
    }
    pthread_mutex_unlock(&t->lock);
}

void gs_handle_remove(int kind, uint64_t h) {
    hs_set *t = &hs_sets[kind];
    pthread_mutex_lock(&t->lock);
    size_t j = hs_find_locked(t, h);
    if (j != SIZE_MAX) {
        t->slots[j] = HS_TOMBSTONE;
        t->live--;
    }
    pthread_mutex_unlock(&t->lock);
}

int gs_handle_known(int kind, uint64_t h) {
    hs_set *t = &hs_sets[kind];
    pthread_mutex_lock(&t->lock);
    int known = hs_find_locked(t, h) != SIZE_MAX;
    pthread_mutex_unlock(&t->lock);
    return known;
}

void gs_handles_after_fork(void) {
    for (int k = 0; k < GS_HANDLE_KINDS; k++) {
        hs_set *t = &hs_sets[k];
        pthread_mutex_init(&t->lock, NULL);
        if (k == GS_HANDLE_STREAM || k == GS_HANDLE_EVENT) {
            free(t->slots);
            t->slots = NULL;
            t->n = t->used = t->live = 0;
        }
    }
}
