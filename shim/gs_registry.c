#include "gs_registry.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gs_client.h"

/* Open-addressing hash table keyed by host address: launches look their kernel up on every call. */
static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static gs_entry **slots;
static size_t nslots, nused;
static gs_module *modules;

gs_module *gs_module_of(void **handle) { return (gs_module *)handle; }

void gs_registry_add_module(gs_module *m) {
    pthread_rwlock_wrlock(&lock);
    m->next = modules;
    modules = m;
    pthread_rwlock_unlock(&lock);
}

int gs_registry_uses_hash(const uint8_t hash[32]) {
    int found = 0;
    pthread_rwlock_rdlock(&lock);
    for (gs_module *m = modules; m && !found; m = m->next) found = m->uploaded && !memcmp(m->hash, hash, 32);
    pthread_rwlock_unlock(&lock);
    return found;
}

static size_t slot_of(const void *host, size_t n) {
    uintptr_t h = (uintptr_t)host;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 7) & (n - 1);
}

static void insert_locked(gs_entry *e) {
    if ((nused + 1) * 2 > nslots) {
        size_t n = nslots ? nslots * 2 : 64;
        gs_entry **s = calloc(n, sizeof *s);
        if (!s) return;
        for (size_t i = 0; i < nslots; i++) {
            if (!slots[i]) continue;
            size_t j = slot_of(slots[i]->host, n);
            while (s[j]) j = (j + 1) & (n - 1);
            s[j] = slots[i];
        }
        free(slots);
        slots = s;
        nslots = n;
    }
    size_t j = slot_of(e->host, nslots);
    while (slots[j] && slots[j]->host != e->host) j = (j + 1) & (nslots - 1);
    if (!slots[j]) nused++;
    slots[j] = e; /* a re-registration replaces the older entry */
}

static void add(gs_module *m, const void *host, const char *name, size_t size, int is_var, int constant) {
    gs_entry *e = calloc(1, sizeof *e);
    if (!e) return;
    *e = (gs_entry){.host = host, .module = m, .name = name, .size = size, .is_var = is_var, .constant = constant};
    pthread_rwlock_wrlock(&lock);
    insert_locked(e);
    pthread_rwlock_unlock(&lock);
}

void gs_registry_add_function(gs_module *m, const void *host_fun, const char *name) { add(m, host_fun, name, 0, 0, 0); }

void gs_registry_add_var(gs_module *m, const void *host_var, const char *name, size_t size, int constant) {
    add(m, host_var, name, size, 1, constant);
}

gs_entry *gs_registry_find(const void *host) {
    gs_entry *found = NULL;
    pthread_rwlock_rdlock(&lock);
    if (nslots) {
        size_t j = slot_of(host, nslots);
        while (slots[j]) {
            if (slots[j]->host == host) { found = slots[j]; break; }
            j = (j + 1) & (nslots - 1);
        }
    }
    pthread_rwlock_unlock(&lock);
    return found;
}

/* ---- relocatable device code ---- */

size_t gs_fatbin_len(const uint8_t *d) {
    uint32_t magic;
    uint16_t header_size;
    uint64_t payload;
    memcpy(&magic, d, 4);
    memcpy(&header_size, d + 6, 2);
    memcpy(&payload, d + 8, 8);
    return magic == 0xBA55ED50u ? header_size + payload : 0;
}

/* nvcc -rdc=true (or -dc + -dlink): the device-link stub (crt/link.stub) registers the linked image in a
 * version-2 wrapper {magic, version, data, fatbins} whose last field is a NULL-terminated array of every
 * translation unit's own fat binary. The linked image holds only cubins; the units' fat binaries hold their
 * PTX. The module becomes the linked image followed by the units' fat binaries, one upload that the server
 * splits and whose PTX it links (gpushim/ptx/rdc.py). */
uint8_t *gs_rdc_image(const void *wrapper, const uint8_t *image, size_t n, size_t *total) {
    const struct {
        int magic, version;
        const void *data;
        const uint8_t *const *units;
    } *w = wrapper;
    if (!w || w->magic != (int)0x466243B1u || w->version != 2 || !w->units) return NULL;
    size_t sum = n;
    for (size_t i = 0; w->units[i]; i++) sum += gs_fatbin_len(w->units[i]);
    if (sum == n) return NULL;
    uint8_t *buf = malloc(sum);
    if (!buf) return NULL;
    memcpy(buf, image, n);
    size_t off = n;
    for (size_t i = 0; w->units[i]; i++) {
        size_t k = gs_fatbin_len(w->units[i]);
        memcpy(buf + off, w->units[i], k);
        off += k;
    }
    *total = sum;
    return buf;
}
