/* User objects through the driver (CUDA Driver API reference, "Graph Management": cuUserObjectCreate,
 * cuUserObjectRetain/Release, cuGraphRetainUserObject/ReleaseUserObject): a graph holding a reference keeps the
 * object alive; the destructor runs once the last reference is gone. cuda.core's GraphBuilder (numba-cuda's
 * test_cuda_core_graph_builder_launch_user_facing) uses them. Prints key=value lines. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <time.h>

#include "drv_common.h"

static atomic_int destroyed;

static void CUDA_CB destroy(void *p) { atomic_fetch_add(&destroyed, *(int *)p); }

int main(void) {
    CUdevice dev;
    use_primary_context(&dev);
    static int one = 1;
    CUuserObject o;
    /* "flags: Currently it is required to pass CU_USER_OBJECT_NO_DESTRUCTOR_SYNC" */
    CU_EXPECT(cuUserObjectCreate(&o, &one, destroy, 1, 0), CUDA_ERROR_INVALID_VALUE);
    CU_CHECK(cuUserObjectCreate(&o, &one, destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CU_EXPECT(cuUserObjectRetain(o, 0), CUDA_ERROR_INVALID_VALUE); /* "count ... must be nonzero" */
    CU_CHECK(cuUserObjectRetain(o, 1)); /* the caller holds 2 */

    CUgraph g;
    CU_CHECK(cuGraphCreate(&g, 0));
    CU_CHECK(cuGraphRetainUserObject(g, o, 1, CU_GRAPH_USER_OBJECT_MOVE)); /* 1 moves to the graph */
    CU_CHECK(cuUserObjectRelease(o, 1));                                    /* the caller's last */
    printf("alive_while_graph_holds=%d\n", atomic_load(&destroyed) == 0);

    CU_CHECK(cuGraphDestroy(g));
    /* CUDA runs destructors asynchronously: wait (bounded) for it */
    for (int i = 0; i < 1000 && atomic_load(&destroyed) == 0; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    printf("destroyed=%d\n", atomic_load(&destroyed));
    printf("done=1\n");
    return 0;
}
