/* CU_FUNC_ATTRIBUTE_NUM_REGS of PTX kernels and the CU_JIT_MAX_REGISTERS option ("Maximum number of registers
 * that a thread may use", Driver API reference, CUjit_option) of cuModuleLoadDataEx, cuLinkCreate and
 * cuLibraryLoadData: a kernel that needs more registers than the limit reports at most the limit (ptxas spills to
 * meet it). numba-cuda's test_linker (max_registers=57 / 38) checks this. usage: drv_maxnreg KERNEL_DIR.
 * Prints key=value lines. */
#include "drv_common.h"

static int num_regs(CUmodule mod) {
    CUfunction f;
    int regs = -1;
    CU_CHECK(cuModuleGetFunction(&f, mod, "vecadd"));
    CU_CHECK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
    return regs;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    CUdevice dev;
    use_primary_context(&dev);
    size_t size;
    char *ptx = read_kernel(argv[1], "vecadd.ptx", &size);

    CUmodule plain, capped, linked;
    CU_CHECK(cuModuleLoadData(&plain, ptx));
    printf("plain=%d\n", num_regs(plain));

    CUjit_option opt[] = {CU_JIT_MAX_REGISTERS};
    void *val[] = {(void *)(uintptr_t)4};
    CU_CHECK(cuModuleLoadDataEx(&capped, ptx, 1, opt, val));
    printf("load_ex=%d\n", num_regs(capped));

    CUlinkState link;
    CU_CHECK(cuLinkCreate(1, opt, val, &link));
    CU_CHECK(cuLinkAddData(link, CU_JIT_INPUT_PTX, ptx, size + 1, "vecadd.ptx", 0, NULL, NULL));
    void *image = NULL;
    size_t image_size = 0;
    CU_CHECK(cuLinkComplete(link, &image, &image_size));
    printf("image_has_maxnreg=%d\n", strstr(image, ".maxnreg 4") != NULL);
    CU_CHECK(cuModuleLoadData(&linked, image));
    CU_CHECK(cuLinkDestroy(link));
    printf("linked=%d\n", num_regs(linked));

    CUlibrary lib;
    CU_CHECK(cuLibraryLoadData(&lib, ptx, opt, val, 1, NULL, NULL, 0));
    CUkernel k;
    CU_CHECK(cuLibraryGetKernel(&k, lib, "vecadd"));
    int lregs = -1;
    CU_CHECK(cuKernelGetAttribute(&lregs, CU_FUNC_ATTRIBUTE_NUM_REGS, k, dev));
    printf("library=%d\n", lregs);
    CU_CHECK(cuLibraryUnload(lib));
    free(ptx);
    printf("done=1\n");
    return 0;
}
