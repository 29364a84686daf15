/* cuModuleUnload releases the image on the server (CUDA Driver API reference, "Module Management"):
 * two handles of one image (the server keeps it while one lives), a module's variables start from their
 * initialisers again when it is loaded anew, a stale handle is refused, and a library's module cannot be
 * unloaded on its own ("Attempting to unload a module which was obtained from the Library Management API
 * such as cuLibraryGetModule will return CUDA_ERROR_NOT_PERMITTED"). Prints "unloaded N" after each step
 * where the server must have released the image N times in all (the test reads the server's log).
 * usage: drv_unload KERNEL_DIR */
#include "drv_common.h"

static void add_one(CUmodule mod) {
    CUfunction f;
    CU_CHECK(cuModuleGetFunction(&f, mod, "vecadd"));
    float a = 1.0f, b = 2.0f, c = 0.0f;
    CUdeviceptr d;
    CU_CHECK(cuMemAlloc(&d, 3 * sizeof(float)));
    CU_CHECK(cuMemcpyHtoD(d, &a, sizeof a));
    CU_CHECK(cuMemcpyHtoD(d + 4, &b, sizeof b));
    CUdeviceptr pa = d, pb = d + 4, pc = d + 8;
    int n = 1;
    void *args[] = {&pa, &pb, &pc, &n};
    CU_CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
    CU_CHECK(cuMemcpyDtoH(&c, d + 8, sizeof c));
    REQUIRE(c == 3.0f);
    CU_CHECK(cuMemFree(d));
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    CUdevice dev;
    use_primary_context(&dev);
    size_t size;
    void *vec = read_kernel(argv[1], "vecadd.ptx", &size);
    void *glob = read_kernel(argv[1], "globals.ptx", &size);

    CUmodule m1, m2;
    CU_CHECK(cuModuleLoadData(&m1, vec));
    CU_CHECK(cuModuleLoadData(&m2, vec));
    add_one(m1);
    CU_CHECK(cuModuleUnload(m1));
    printf("unloaded 0\n"); /* m2 still holds the image */
    fflush(stdout);
    add_one(m2); /* its kernels still run */
    CU_EXPECT(cuModuleUnload(m1), CUDA_ERROR_INVALID_HANDLE);
    CU_CHECK(cuModuleUnload(m2));
    printf("unloaded 1\n");
    fflush(stdout);

    /* a variable written, the module unloaded, loaded again: the initialiser's value */
    CUmodule g;
    CUdeviceptr p;
    size_t bytes;
    int v = 0;
    CU_CHECK(cuModuleLoadData(&g, glob));
    CU_CHECK(cuModuleGetGlobal(&p, &bytes, g, "initialised"));
    CU_CHECK(cuMemcpyDtoH(&v, p, sizeof v));
    REQUIRE(v == 42 && bytes == sizeof v);
    v = 7;
    CU_CHECK(cuMemcpyHtoD(p, &v, sizeof v));
    CU_CHECK(cuModuleUnload(g));
    printf("unloaded 2\n");
    fflush(stdout);
    CU_CHECK(cuModuleLoadData(&g, glob));
    CU_CHECK(cuModuleGetGlobal(&p, &bytes, g, "initialised"));
    CU_CHECK(cuMemcpyDtoH(&v, p, sizeof v));
    REQUIRE(v == 42);

    /* a library's module */
    CUlibrary lib;
    CUmodule lm;
    CU_CHECK(cuLibraryLoadData(&lib, vec, NULL, NULL, 0, NULL, NULL, 0));
    CU_CHECK(cuLibraryGetModule(&lm, lib));
    CU_EXPECT(cuModuleUnload(lm), CUDA_ERROR_NOT_PERMITTED);
    CU_CHECK(cuLibraryUnload(lib));
    printf("unloaded 3\n");
    fflush(stdout);
    free(vec);
    free(glob);
    printf("unload ok\n");
    return 0;
}
