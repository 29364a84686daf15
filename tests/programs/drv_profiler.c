/* cuProfilerStart/Stop succeed as no-ops, directly and through cuGetProcAddress. Prints "profiler=ok". */
#include <cudaProfiler.h>

#include "drv_common.h"

int main(void) {
    CU_CHECK(cuInit(0));
    CU_CHECK(cuProfilerStart());
    CU_CHECK(cuProfilerStop());
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    CU_CHECK(cuGetProcAddress("cuProfilerStart", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    REQUIRE(q == CU_GET_PROC_ADDRESS_SUCCESS && fn == (void *)cuProfilerStart);
    CU_CHECK(((CUresult(*)(void))fn)());
    printf("profiler=ok\n");
    return 0;
}
