/* INTEGRITY_CHECK slot 1: the static runtime checks that the driver is the one it expects. It calls
 * integrity_check(version, unix_seconds, result[2]) and compares the result with its own computation: for
 * versions ending in 0 or 1 a constant, for newer ones a keyed hash (HMAC with MD2, RFC 1319 / RFC 2104)
 * of the process, thread, the tables' and function's addresses, the time, the driver version and each
 * device's UUID and PCI location. The constants, key and layout are data (adapters/cudadrv/export_tables.json). */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "drv_api.h"

/* MD2's substitution table (RFC 1319, from the digits of pi). */
static const unsigned char md2_s[256] = {
    41,  46,  67,  201, 162, 216, 124, 1,   61,  54,  84,  161, 236, 240, 6,   19,  98,  167, 5,   243, 192, 199,
    115, 140, 152, 147, 43,  217, 188, 76,  130, 202, 30,  155, 87,  60,  253, 212, 224, 22,  103, 66,  111, 24,
    138, 23,  229, 18,  190, 78,  196, 214, 218, 158, 222, 73,  160, 251, 245, 142, 187, 47,  238, 122, 169, 104,
    121, 145, 21,  178, 7,   63,  148, 194, 16,  137, 11,  34,  95,  33,  128, 127, 93,  154, 90,  144, 50,  39,
    53,  62,  204, 231, 191, 247, 151, 3,   255, 25,  48,  179, 72,  165, 181, 209, 215, 94,  146, 42,  172, 86,
    170, 198, 79,  184, 56,  210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4,   241, 69,  157, 112, 89,
    100, 113, 135, 32,  134, 91,  207, 101, 230, 45,  168, 2,   27,  96,  37,  173, 174, 176, 185, 246, 28,  70,
    97,  105, 52,  64,  126, 15,  85,  71,  163, 35,  221, 81,  175, 58,  195, 92,  249, 206, 186, 197, 234, 38,
    44,  83,  13,  110, 133, 40,  132, 9,   211, 223, 205, 244, 65,  129, 77,  82,  106, 220, 55,  200, 108, 193,
    171, 250, 36,  225, 123, 8,   12,  189, 177, 74,  120, 136, 149, 139, 227, 99,  232, 109, 233, 203, 213, 254,
    59,  0,   29,  57,  242, 239, 183, 14,  102, 88,  208, 228, 166, 119, 114, 248, 235, 117, 75,  10,  49,  68,
    80,  180, 143, 237, 31,  26,  219, 153, 141, 51,  159, 17,  131, 20};

typedef struct {
    unsigned char x[48], c[16], buf[16];
    unsigned n;
} md2_ctx;

static void md2_block(md2_ctx *m) {
    unsigned char l = m->c[15];
    for (int j = 0; j < 16; j++) {
        m->x[16 + j] = m->buf[j];
        m->x[32 + j] = m->buf[j] ^ m->x[j];
        l = m->c[j] ^= md2_s[m->buf[j] ^ l];
    }
    unsigned t = 0;
    for (unsigned j = 0; j < 18; j++) {
        for (int k = 0; k < 48; k++) t = m->x[k] ^= md2_s[t];
        t = (t + j) & 0xff;
    }
}

static void md2_update(md2_ctx *m, const void *data, size_t len) {
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        m->buf[m->n++] = p[i];
        if (m->n == 16) {
            md2_block(m);
            m->n = 0;
        }
    }
}

static void md2_final(md2_ctx *m, unsigned char out[16]) {
    unsigned char pad[16];
    unsigned k = 16 - m->n;
    memset(pad, (int)k, k);
    md2_update(m, pad, k);
    unsigned char c[16];
    memcpy(c, m->c, 16);
    md2_update(m, c, 16);
    memcpy(out, m->x, 16);
}

/* HMAC-MD2 (the key is exactly one 16-byte block). */
typedef struct {
    md2_ctx inner;
} hmac_md2;

static void hmac_md2_begin(hmac_md2 *h, const unsigned char key[16]) {
    unsigned char k[16];
    for (int i = 0; i < 16; i++) k[i] = key[i] ^ 0x36;
    memset(&h->inner, 0, sizeof h->inner);
    md2_update(&h->inner, k, 16);
}

static void hmac_md2_end(hmac_md2 *h, const unsigned char key[16], unsigned char out[16]) {
    unsigned char inner[16], k[16];
    md2_final(&h->inner, inner);
    for (int i = 0; i < 16; i++) k[i] = key[i] ^ 0x5c;
    md2_ctx outer;
    memset(&outer, 0, sizeof outer);
    md2_update(&outer, k, 16);
    md2_update(&outer, inner, 16);
    md2_final(&outer, out);
}

static CUresult gs_export_integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t result[2]) {
    if (!result) return CUDA_ERROR_INVALID_VALUE;
    gs_log(2, "cuGetExportTable: INTEGRITY_CHECK(%u)", version);
    /* the version is the static runtime's CUDART_VERSION plus 0..2: what it was built with (it counts for the
     * session when this comes before the first connection, as in programs that start with a runtime call) */
    gs_drv_note_version((int)(version - version % 10));
    if (version % 10 < 2) {
        memcpy(result, gs_integrity_constants[version % 10], 16);
        return CUDA_SUCCESS;
    }
    int driver_version = 0, count = 0;
    CUresult r = gs_cuDriverGetVersion(&driver_version);
    if (!r) r = gs_cuDeviceGetCount(&count);
    if (r) return r;
    struct {
        uint32_t driver_version, version, process, thread;
        const void *cudart_table, *integrity_table, *fn;
        uint64_t unix_seconds;
    } head = {(uint32_t)driver_version, version, (uint32_t)getpid(), (uint32_t)(uintptr_t)pthread_self(),
              gs_export_slots_CUDART_INTERFACE, gs_export_slots_INTEGRITY_CHECK,
              gs_export_slots_INTEGRITY_CHECK[1], unix_seconds};
    _Static_assert(sizeof head == 48, "the hashed header is 48 bytes");
    hmac_md2 h;
    hmac_md2_begin(&h, gs_integrity_key);
    md2_update(&h.inner, &head, sizeof head);
    for (int dev = 0; dev < count; dev++) {
        struct {
            unsigned char uuid[16];
            int32_t pci_domain, pci_bus, pci_device;
        } d;
        _Static_assert(sizeof d == 28, "a hashed device is 28 bytes");
        memset(&d, 0, sizeof d);
        r = gs_cuDeviceGetUuid(d.uuid, dev);
        if (!r) r = gs_cuDeviceGetAttribute(&d.pci_domain, 50 /* PCI_DOMAIN_ID */, dev);
        if (!r) r = gs_cuDeviceGetAttribute(&d.pci_bus, 33 /* PCI_BUS_ID */, dev);
        if (!r) r = gs_cuDeviceGetAttribute(&d.pci_device, 34 /* PCI_DEVICE_ID */, dev);
        if (r) return r;
        md2_update(&h.inner, &d, sizeof d);
    }
    hmac_md2_end(&h, gs_integrity_key, (unsigned char *)result);
    return CUDA_SUCCESS;
}
