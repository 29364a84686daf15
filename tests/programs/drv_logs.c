/* Driver API error log callbacks (CUDA Driver API reference, "Error Log Management"):
 * cuLogsRegisterCallback returns CUDA_ERROR_INVALID_VALUE without a function and a handle otherwise (the
 * handle is optional); cuLogsUnregisterCallback takes each registered handle once. */
#include "drv_common.h"

static void on_log(void *data, CUlogLevel level, char *message, size_t length) {
    (void)level;
    (void)message;
    (void)length;
    ++*(int *)data;
}

int main(void) {
    CUdevice dev;
    use_primary_context(&dev);
    int calls = 0;
    CUlogsCallbackHandle a = NULL, b = NULL;
    CU_EXPECT(cuLogsRegisterCallback(NULL, &calls, &a), CUDA_ERROR_INVALID_VALUE);
    CU_CHECK(cuLogsRegisterCallback(on_log, &calls, &a));
    CU_CHECK(cuLogsRegisterCallback(on_log, &calls, &b));
    CU_CHECK(cuLogsRegisterCallback(on_log, &calls, NULL)); /* callback_out is optional */
    REQUIRE(a != NULL && b != NULL && a != b);
    CU_CHECK(cuLogsUnregisterCallback(a));
    CU_EXPECT(cuLogsUnregisterCallback(a), CUDA_ERROR_INVALID_VALUE);
    CU_CHECK(cuLogsUnregisterCallback(b));
    printf("logs ok\n");
    return 0;
}
