/* The driver's private tables (cuGetExportTable) as the static CUDA runtime uses them, called directly:
 * ids, sizes, the context-local store, the primary context, the integrity constants, the checks, bad input,
 * and a slot gpushim cannot honour (it must refuse with an error, naming table and slot, not crash). */
#include <stdint.h>

#include "drv_common.h"

static const unsigned char CUDART_INTERFACE[16] = {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
                                                   0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9};
static const unsigned char TOOLS_TLS[16] = {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47,
                                            0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc};
static const unsigned char CLS[16] = {0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11,
                                      0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93};
static const unsigned char CHECKS[16] = {0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43,
                                         0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e};
static const unsigned char INTEGRITY[16] = {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b,
                                            0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2};
static const unsigned char PROBE[16] = {0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e,
                                        0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9};

static void *const *table(const unsigned char *id) {
    const void *t = NULL;
    CU_CHECK(cuGetExportTable(&t, (const CUuuid *)id));
    REQUIRE(t != NULL);
    return t;
}

typedef CUresult (*cls_put_fn)(CUcontext, void *, void *, void (*)(CUcontext, void *, void *));
typedef CUresult (*cls_delete_fn)(CUcontext, void *);
typedef CUresult (*cls_get_fn)(void **, CUcontext, void *);

int main(void) {
    CU_CHECK(cuInit(0));
    const void *t = (const void *)1;
    CU_EXPECT(cuGetExportTable(NULL, (const CUuuid *)CLS), CUDA_ERROR_INVALID_VALUE);
    CU_EXPECT(cuGetExportTable(&t, NULL), CUDA_ERROR_INVALID_VALUE);
    CU_EXPECT(cuGetExportTable(&t, (const CUuuid *)PROBE), CUDA_ERROR_NOT_FOUND);
    REQUIRE(t == NULL);
    unsigned char unknown[16] = {1, 2, 3};
    CU_EXPECT(cuGetExportTable(&t, (const CUuuid *)unknown), CUDA_ERROR_NOT_FOUND);

    void *const *rt = table(CUDART_INTERFACE);
    printf("cudart_interface.size=%zu\n", (size_t)(uintptr_t)rt[0]);
    for (int i = 1; i < 10; i++) REQUIRE(rt[i] != NULL); /* every slot is a function */
    CUcontext primary = NULL, got = NULL;
    CU_CHECK(cuDevicePrimaryCtxRetain(&primary, 0));
    CU_CHECK(((CUresult(*)(CUcontext *, CUdevice))rt[2])(&got, 0));
    printf("primary_same=%d\n", got == primary);
    CU_EXPECT(((CUresult(*)(CUcontext *, CUdevice))rt[2])(&got, 99), CUDA_ERROR_INVALID_DEVICE);
    void *const *cls = table(CLS);
    static int key1, key2, value1;
    void *value = NULL;
    CU_EXPECT(((cls_put_fn)cls[0])(NULL, &key1, &value1, NULL), CUDA_ERROR_INVALID_CONTEXT); /* no current one */
    CU_CHECK(cuCtxSetCurrent(primary));
    CU_EXPECT(((CUresult(*)(void *, const void *))rt[1])(&got, NULL), CUDA_ERROR_INVALID_VALUE);
    unsigned char junk[64] = {0};
    CU_EXPECT(((CUresult(*)(void **, const void *))rt[1])((void **)&got, junk), CUDA_ERROR_INVALID_IMAGE);

    /* a slot gpushim cannot honour: an error, and stderr names the table and slot */
    void *const *tls = table(TOOLS_TLS);
    printf("tools_tls.size=%zu\n", (size_t)(uintptr_t)tls[0]);
    printf("tools_tls.slot1=%d\n", (int)((CUresult(*)(void))tls[1])());

    CU_CHECK(((cls_put_fn)cls[0])(NULL, &key1, &value1, NULL));
    CU_CHECK(((cls_get_fn)cls[2])(&value, primary, &key1));
    printf("cls.get=%d\n", value == &value1);
    CU_EXPECT(((cls_get_fn)cls[2])(&value, NULL, &key2), CUDA_ERROR_INVALID_HANDLE);
    CU_EXPECT(((cls_get_fn)cls[2])(NULL, NULL, &key1), CUDA_ERROR_INVALID_VALUE);
    CU_CHECK(((cls_delete_fn)cls[1])(primary, &key1));
    CU_EXPECT(((cls_get_fn)cls[2])(&value, NULL, &key1), CUDA_ERROR_INVALID_HANDLE);
    /* a destroyed context keeps no values: a new context at its address must not find them */
    CUcontext gone;
    CU_CHECK(cuCtxCreate(&gone, NULL, 0, 0));
    CU_CHECK(cuCtxDestroy(gone));
    CU_EXPECT(((cls_put_fn)cls[0])(gone, &key1, &value1, NULL), CUDA_ERROR_INVALID_CONTEXT);
    CU_EXPECT(((cls_get_fn)cls[2])(&value, gone, &key1), CUDA_ERROR_INVALID_CONTEXT);
    CU_CHECK(cuCtxSetCurrent(primary));

    void *const *checks = table(CHECKS);
    uint32_t flags = 7;
    const void *extra = NULL;
    CU_CHECK(((CUresult(*)(CUcontext, uint32_t *, const void **))checks[2])(primary, &flags, &extra));
    printf("checks=%u,%u\n", flags, ((uint32_t(*)(void))checks[3])());

    void *const *integrity = table(INTEGRITY);
    printf("integrity.size=%zu\n", (size_t)(uintptr_t)integrity[0]);
    typedef CUresult (*check_fn)(uint32_t, uint64_t, uint64_t *);
    uint64_t r[2] = {0, 0};
    CU_CHECK(((check_fn)integrity[1])(13000, 1700000000, r));
    printf("integrity.13000=%016llx%016llx\n", (unsigned long long)r[0], (unsigned long long)r[1]);
    CU_CHECK(((check_fn)integrity[1])(12081, 1700000000, r));
    printf("integrity.12081=%016llx%016llx\n", (unsigned long long)r[0], (unsigned long long)r[1]);
    uint64_t a[2], b[2];
    CU_CHECK(((check_fn)integrity[1])(13002, 1700000000, a));
    CU_CHECK(((check_fn)integrity[1])(13002, 1700000001, b));
    printf("integrity.keyed_depends_on_time=%d\n", a[0] != b[0] || a[1] != b[1]);
    CU_EXPECT(((check_fn)integrity[1])(13002, 1, NULL), CUDA_ERROR_INVALID_VALUE);
    printf("OK\n");
    return 0;
}
