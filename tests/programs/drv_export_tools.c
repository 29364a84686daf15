/* The private-table slots cuBLAS/cuBLASLt call (shim/drv_export_tools.c), called directly and compared
 * with the documented calls they stand for: TOOLS_TLS slot 2 == cuCtxGetCurrent, the context table's
 * slot 4 == cuCtxGetId, for the primary context, a created one, across push/pop and with none current;
 * bad input; and a slot of the context table gpushim does not honour (an error naming table and slot). */
#include <stdint.h>

#include "drv_common.h"

static const unsigned char TOOLS_TLS[16] = {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47,
                                            0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc};
static const unsigned char CONTEXT_INFO[16] = {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48,
                                               0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2};

typedef CUresult (*current_fn)(CUcontext *);
typedef CUresult (*id_fn)(CUcontext, unsigned long long *);
static current_fn tls_current;
static id_fn ctx_id;

/* The slots agree with the documented calls; returns the context's id. */
static unsigned long long check(CUcontext expected) {
    CUcontext a = (CUcontext)1, b = (CUcontext)2;
    CU_CHECK(cuCtxGetCurrent(&a));
    CU_CHECK(tls_current(&b));
    REQUIRE(a == expected && b == expected);
    unsigned long long x = 0, y = 1;
    CU_CHECK(cuCtxGetId(a, &x));
    CU_CHECK(ctx_id(b, &y));
    REQUIRE(x == y && x != 0);
    return x;
}

int main(void) {
    CU_CHECK(cuInit(0));
    const void *t = NULL;
    CU_CHECK(cuGetExportTable(&t, (const CUuuid *)TOOLS_TLS));
    tls_current = (current_fn)((void *const *)t)[2];
    CU_CHECK(cuGetExportTable(&t, (const CUuuid *)CONTEXT_INFO));
    void *const *info = t;
    printf("context_info.size=%zu\n", (size_t)(uintptr_t)info[0]);
    for (size_t i = 1; i < (size_t)(uintptr_t)info[0] / sizeof(void *); i++) REQUIRE(info[i] != NULL);
    ctx_id = (id_fn)info[4];

    CUcontext none = (CUcontext)1;
    CU_CHECK(tls_current(&none));
    printf("current_before=%s\n", none ? "set" : "null"); /* no context is current before any is made */
    CU_EXPECT(tls_current(NULL), CUDA_ERROR_INVALID_VALUE);

    CUcontext primary = NULL, other = NULL, popped = NULL;
    CU_CHECK(cuDevicePrimaryCtxRetain(&primary, 0));
    CU_CHECK(cuCtxSetCurrent(primary));
    unsigned long long pid = check(primary);
    CU_CHECK(cuCtxCreate(&other, NULL, 0, 0));
    unsigned long long oid = check(other);
    REQUIRE(oid != pid);
    CU_CHECK(cuCtxPushCurrent(primary));
    REQUIRE(check(primary) == pid);
    CU_CHECK(cuCtxPopCurrent(&popped));
    REQUIRE(popped == primary && check(other) == oid);
    unsigned long long cur = 0;
    CU_CHECK(ctx_id(NULL, &cur)); /* NULL: the current context, as cuCtxGetId */
    REQUIRE(cur == oid);
    CU_EXPECT(ctx_id(other, NULL), CUDA_ERROR_INVALID_VALUE);
    CU_CHECK(cuCtxSetCurrent(primary));
    CU_CHECK(cuCtxDestroy(other));
    CU_EXPECT(ctx_id(other, &cur), CUDA_ERROR_INVALID_CONTEXT);
    REQUIRE(check(primary) == pid);

    /* a slot gpushim does not honour: an error, and stderr names the table and slot */
    printf("context_info.slot51=%d\n", (int)((CUresult(*)(void))info[51])());
    printf("OK\n");
    return 0;
}
