/* The driver face: modules, libraries, functions and kernels, JIT linking, launches, function attributes
 * and occupancy.
 *
 * A CUmodule holds a copy of the image it was given (a fat binary, a cubin or PTX text); the server keeps
 * images by SHA-256 like the runtime face's fat binaries and takes all three (MODULE_LOAD). A CUfunction
 * is a runtime-face kernel entry (gs_entry) of that module, so launches, parameter layouts and attributes
 * share the runtime face's code. A CUlibrary is a module whose CUkernel handles are its CUfunctions (one
 * context per device here, so a kernel is the same function in every context). cuLink* carries PTX: the
 * server links the inputs into one PTX image, which cuModuleLoadData then takes. */
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drv_api.h"
#include "gs_launch_attrs.h"

#ifndef FATBIN_MAGIC
#define FATBIN_MAGIC 0xBA55ED50u
#endif
#ifndef FATBIN_WRAPPER_MAGIC
#define FATBIN_WRAPPER_MAGIC 0x466243B1u
#endif

#define MOD_MAGIC 0x4d4f4447u  /* "GDOM" */
#define FUNC_MAGIC 0x464e5547u /* "GUNF" */
#define LIB_MAGIC 0x42494c47u  /* "GLIB" */
#define LINK_MAGIC 0x4b4e4c47u /* "GLNK" */
#define MAX_IMAGE ((size_t)1 << 30)

enum { FUNC_ATTRS = 16 };

typedef struct drv_function {
    uint32_t magic;
    gs_entry entry; /* entry.module points into the owning drv_module */
    struct drv_module *owner;
    struct drv_function *next;
    _Atomic int set[FUNC_ATTRS]; /* values given with cuFuncSetAttribute, read back by cuFuncGetAttribute */
    _Atomic unsigned char is_set[FUNC_ATTRS];
} drv_function;

typedef struct drv_module {
    uint32_t magic;
    gs_module mod;
    uint8_t *image; /* our copy of the image */
    drv_function *functions;
    int of_library; /* cuLibraryGetModule's: only cuLibraryUnload unloads it */
    struct drv_module *next; /* every module loaded and not unloaded */
} drv_module;

typedef struct drv_library {
    uint32_t magic;
    drv_module *module;
    struct drv_library *next; /* every library loaded and not unloaded: cudaKernel_t handles are found here */
} drv_library;

static drv_library *libraries;
static drv_module *all_modules;

static pthread_mutex_t drv_lock = PTHREAD_MUTEX_INITIALIZER;

#define DRV_ENTER()                          \
    do {                                     \
        CUresult gs_r_ = gs_drv_enter(NULL); \
        if (gs_r_) return gs_r_;             \
    } while (0)

/* Handles are looked up before they are read: a garbage one, or one unloaded (and freed), is refused, not
 * dereferenced. Unloading while another thread uses the handle is the application's race, as in CUDA. */
static drv_module *as_module(void *h) {
    drv_module *m = h;
    return gs_ptr_known(GS_HANDLE_MODULE, m) && m->magic == MOD_MAGIC ? m : NULL;
}
static drv_function *as_function(void *h) {
    drv_function *f = h;
    return gs_ptr_known(GS_HANDLE_FUNCTION, f) && f->magic == FUNC_MAGIC ? f : NULL;
}
static drv_library *as_library(void *h) {
    drv_library *l = h;
    return gs_ptr_known(GS_HANDLE_LIBRARY, l) && l->magic == LIB_MAGIC ? l : NULL;
}

/* ---- images ---- */

/* The size of the image at p: a fat binary's header says it, an ELF's section table ends it, PTX text
 * ends at its NUL. 0 when p is none of those. */
static size_t image_size(const void *p) {
    const uint8_t *b = p;
    uint32_t magic;
    memcpy(&magic, b, 4);
    if (magic == FATBIN_MAGIC) {
        uint16_t hsize;
        uint64_t payload;
        memcpy(&hsize, b + 6, 2);
        memcpy(&payload, b + 8, 8);
        return payload < MAX_IMAGE ? hsize + payload : 0;
    }
    if (memcmp(b, ELFMAG, SELFMAG) == 0 && b[EI_CLASS] == ELFCLASS64) {
        Elf64_Ehdr eh;
        memcpy(&eh, b, sizeof eh);
        size_t end = eh.e_shoff + (size_t)eh.e_shnum * eh.e_shentsize;
        if (eh.e_shoff > MAX_IMAGE || end > MAX_IMAGE || eh.e_shentsize != sizeof(Elf64_Shdr)) return 0;
        size_t ph_end = eh.e_phoff + (size_t)eh.e_phnum * eh.e_phentsize;
        if (ph_end > end && ph_end < MAX_IMAGE) end = ph_end;
        for (unsigned i = 0; i < eh.e_shnum; i++) {
            Elf64_Shdr sh;
            memcpy(&sh, b + eh.e_shoff + (size_t)i * sizeof sh, sizeof sh);
            if (sh.sh_type != SHT_NOBITS && sh.sh_offset + sh.sh_size > end && sh.sh_offset + sh.sh_size < MAX_IMAGE)
                end = sh.sh_offset + sh.sh_size;
        }
        return end;
    }
    size_t n = strnlen((const char *)p, MAX_IMAGE);
    return n < MAX_IMAGE && memmem(p, n, ".version", 8) ? n + 1 : 0;
}

static int is_ptx_text(const void *p) {
    uint32_t magic;
    memcpy(&magic, p, 4);
    return magic != FATBIN_MAGIC && magic != FATBIN_WRAPPER_MAGIC && memcmp(p, ELFMAG, SELFMAG) != 0 && image_size(p);
}

static CUresult load_image(drv_module **out, const void *image) {
    if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    uint32_t magic;
    memcpy(&magic, image, 4);
    const void *wrapper = NULL;
    if (magic == FATBIN_WRAPPER_MAGIC) { /* __fatBinC_Wrapper_t: {magic, version, data, filename} */
        const void *const *w = image;
        wrapper = image;
        image = w[1];
        if (!image) return CUDA_ERROR_INVALID_IMAGE;
    }
    size_t n = image_size(image);
    if (!n) return CUDA_ERROR_INVALID_IMAGE;
    drv_module *m = calloc(1, sizeof *m);
    uint8_t *copy = wrapper ? gs_rdc_image(wrapper, image, n, &n) : NULL; /* -rdc: with the units' PTX */
    if (!copy && (copy = malloc(n))) memcpy(copy, image, n);
    if (!m || !copy) { free(m); free(copy); return CUDA_ERROR_OUT_OF_MEMORY; }
    m->magic = MOD_MAGIC;
    m->image = copy;
    m->mod.data = copy;
    m->mod.size = n;
    cudaError_t e = gs_module_ensure(&m->mod); /* uploads it unless the server holds it already */
    if (e) {
        free(copy);
        free(m);
        return gs_drv_err(e);
    }
    pthread_mutex_lock(&drv_lock);
    m->next = all_modules;
    all_modules = m;
    pthread_mutex_unlock(&drv_lock);
    gs_handle_add(GS_HANDLE_MODULE, (uintptr_t)m);
    *out = m;
    gs_drv_own((uintptr_t)m, GS_OWN_MODULE); /* a module of a cuCtxCreate context goes with it */
    return CUDA_SUCCESS;
}

/* Takes module m's handles (drv_lock held): the module and its functions leave the live sets and the list of
 * modules, so no later call finds them (CUDA_ERROR_INVALID_HANDLE), and only one unload frees them. */
static void module_take_locked(drv_module *m) {
    gs_handle_remove(GS_HANDLE_MODULE, (uintptr_t)m);
    for (drv_function *f = m->functions; f; f = f->next) gs_handle_remove(GS_HANDLE_FUNCTION, (uintptr_t)f);
    drv_module **p = &all_modules;
    while (*p && *p != m) p = &(*p)->next;
    if (*p) *p = m->next;
}

static void module_free(drv_module *m) {
    for (drv_function *f = m->functions, *next; f; f = next) {
        next = f->next;
        gs_entry_free_layout(&f->entry);
        free((char *)f->entry.name);
        free(f);
    }
    free(m->image);
    free(m);
}

/* The handle m, taken, dies and is freed. When no other live handle and no module of the runtime face has
 * its image, the server releases the image and its variables (MODULE_UNLOAD waits for the devices: queued
 * kernels may use it; a launch already sent carries the image's hash and the kernel's name, not m). */
static CUresult release_image(drv_module *m) {
    uint8_t hash[32];
    memcpy(hash, m->mod.hash, sizeof hash);
    module_free(m);
    int others = 0;
    pthread_mutex_lock(&drv_lock);
    for (drv_module *o = all_modules; o && !others; o = o->next) others = !memcmp(o->mod.hash, hash, 32);
    pthread_mutex_unlock(&drv_lock);
    if (others || gs_registry_uses_hash(hash)) return CUDA_SUCCESS;
    CUresult r = gs_drv_enter(NULL);
    /* no (live) context here: the image stays for the session */
    if (r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_CONTEXT_IS_DESTROYED) r = CUDA_SUCCESS;
    if (r) return r;
    gs_call c;
    gs_call_begin(&c, GS_OP_MODULE_UNLOAD, 1);
    gs_w_bin(c.w, hash, 32);
    cudaError_t e = gs_call_run(&c);
    gs_call_end(&c);
    return gs_drv_err(e);
}

/* JIT option arrays: gpushim compiles nothing here, so log buffers get an empty log. */
enum { JIT_INFO_LOG_BUFFER = 3, JIT_INFO_LOG_SIZE = 4, JIT_ERROR_LOG_BUFFER = 5, JIT_ERROR_LOG_SIZE = 6 };
static void jit_options(unsigned n, const int *opts, void **values) {
    if (!opts || !values) return;
    for (unsigned i = 0; i < n; i++) {
        if (opts[i] != JIT_INFO_LOG_BUFFER && opts[i] != JIT_ERROR_LOG_BUFFER) continue;
        size_t size = 0;
        for (unsigned j = 0; j < n; j++)
            if (opts[j] == opts[i] + 1) size = (size_t)(uintptr_t)values[j];
        if (values[i] && size) ((char *)values[i])[0] = 0;
    }
    for (unsigned i = 0; i < n; i++)
        if (opts[i] == JIT_INFO_LOG_SIZE || opts[i] == JIT_ERROR_LOG_SIZE) values[i] = (void *)(uintptr_t)0;
}

/* Applies a load's JIT options to the image: log buffers, and CU_JIT_MAX_REGISTERS written into PTX text as
 * .maxnreg (then *image is a copy, *owned to be freed after loading). Nonzero when out of memory. */
static int with_jit_options(const void **image, char **owned, unsigned n, int *opts, void **values) {
    unsigned regs = jit_max_registers(n, opts, values);
    jit_options(n, opts, values);
    if (!regs || !*image || !is_ptx_text(*image)) return 0;
    *owned = ptx_with_maxnreg(*image, strlen(*image), regs);
    if (!*owned) return 1;
    *image = *owned;
    return 0;
}

static void *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *b = cap <= MAX_IMAGE ? realloc(buf, cap) : NULL;
            if (!b) { free(buf); fclose(f); return NULL; }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (!got) break;
    }
    fclose(f);
    buf[n] = 0; /* PTX files need not end in a NUL */
    *size = n;
    return buf;
}

/* ---- modules ---- */

GS_DRV CUresult gs_cuModuleLoadData(drv_module **m, const void *image) { return load_image(m, image); }
GS_DRV CUresult gs_cuModuleLoadFatBinary(drv_module **m, const void *image) { return load_image(m, image); }
GS_DRV CUresult gs_cuModuleLoadDataEx(drv_module **m, const void *image, unsigned n, int *opts, void **values) {
    char *capped = NULL;
    if (with_jit_options(&image, &capped, n, opts, values)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = load_image(m, image);
    free(capped);
    return r;
}

GS_DRV CUresult gs_cuModuleLoad(drv_module **m, const char *path) {
    if (!m || !path) return CUDA_ERROR_INVALID_VALUE;
    size_t n;
    void *data = read_file(path, &n);
    if (!data) return CUDA_ERROR_FILE_NOT_FOUND;
    CUresult r = load_image(m, data);
    free(data);
    return r;
}

GS_DRV CUresult gs_cuModuleUnload(drv_module *h) {
    pthread_mutex_lock(&drv_lock);
    drv_module *m = as_module(h);
    int of_library = m && m->of_library;
    if (m && !of_library) module_take_locked(m);
    pthread_mutex_unlock(&drv_lock);
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    if (of_library) return 800; /* CUDA_ERROR_NOT_PERMITTED, as cuModuleUnload documents */
    gs_drv_disown((uintptr_t)m, GS_OWN_MODULE); /* the handle is dead now, whatever the server says */
    return release_image(m);
}

CUresult gs_drv_module_unload(void *module) { return gs_cuModuleUnload(module); }

GS_DRV CUresult gs_cuModuleGetLoadingMode(int *mode) {
    if (!mode) return CUDA_ERROR_INVALID_VALUE;
    *mode = 2; /* CU_MODULE_LAZY_LOADING: the server loads what a launch needs */
    return CUDA_SUCCESS;
}

static CUresult get_function(drv_function **out, drv_module *m, const char *name) {
    if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    DRV_ENTER();
    pthread_mutex_lock(&drv_lock);
    drv_function *f = m->functions;
    while (f && strcmp(f->entry.name, name) != 0) f = f->next;
    pthread_mutex_unlock(&drv_lock);
    if (f) { *out = f; return CUDA_SUCCESS; }
    f = calloc(1, sizeof *f);
    char *copy = strdup(name);
    if (!f || !copy) { free(f); free(copy); return CUDA_ERROR_OUT_OF_MEMORY; }
    f->magic = FUNC_MAGIC;
    f->owner = m;
    f->entry.host = f;
    f->entry.module = &m->mod;
    f->entry.name = copy;
    cudaError_t e = gs_entry_layout(&f->entry); /* the server finds the kernel, or says why not */
    if (e) {
        free(copy);
        free(f);
        return e == 98 ? CUDA_ERROR_NOT_FOUND : gs_drv_err(e);
    }
    pthread_mutex_lock(&drv_lock);
    f->next = m->functions;
    m->functions = f;
    pthread_mutex_unlock(&drv_lock);
    gs_handle_add(GS_HANDLE_FUNCTION, (uintptr_t)f);
    *out = f;
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuModuleGetFunction(drv_function **f, drv_module *m, const char *name) {
    return get_function(f, as_module(m), name);
}

static CUresult get_global(CUdeviceptr *dptr, size_t *bytes, drv_module *m, const char *name) {
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    int dev;
    CUresult r = gs_drv_enter(&dev);
    if (r) return r;
    gs_call c;
    gs_call_begin(&c, GS_OP_SYMBOL_INFO, 3);
    gs_w_int(c.w, dev);
    gs_w_bin(c.w, m->mod.hash, 32);
    gs_w_cstr(c.w, name);
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        uintptr_t p = (uintptr_t)gs_u64(&c);
        size_t s = (size_t)gs_u64(&c);
        if (!gs_ranges_find(p, &(gs_range){0})) gs_ranges_add((gs_range){p, s, dev, cudaMemoryTypeDevice, 0, 0, 0, 0});
        if (dptr) *dptr = p;
        if (bytes) *bytes = s;
    }
    gs_call_end(&c);
    return e == 13 ? CUDA_ERROR_NOT_FOUND : gs_drv_err(e);
}

GS_DRV CUresult gs_cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, drv_module *m, const char *name) {
    return get_global(dptr, bytes, as_module(m), name);
}

/* ---- libraries and kernels ---- */

static CUresult library_load(drv_library **out, const void *code) {
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    drv_library *l = calloc(1, sizeof *l);
    if (!l) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = load_image(&l->module, code);
    if (r) { free(l); return r; }
    l->module->of_library = 1;
    l->magic = LIB_MAGIC;
    pthread_mutex_lock(&drv_lock);
    l->next = libraries;
    libraries = l;
    pthread_mutex_unlock(&drv_lock);
    gs_handle_add(GS_HANDLE_LIBRARY, (uintptr_t)l);
    *out = l;
    return CUDA_SUCCESS;
}

/* The runtime face's cudaKernel_t: a kernel of a live library, found by comparing handles (never by reading
 * through a pointer the application passed, which may be a host stub or garbage). */
gs_entry *gs_drv_kernel_entry(const void *k) {
    gs_entry *found = NULL;
    pthread_mutex_lock(&drv_lock);
    for (drv_library *l = libraries; l && !found; l = l->next)
        for (drv_function *f = l->module->functions; f && !found; f = f->next)
            if ((const void *)f == k) found = &f->entry;
    pthread_mutex_unlock(&drv_lock);
    return found;
}

GS_DRV CUresult gs_cuLibraryLoadData(drv_library **lib, const void *code, int *jit_opts, void **jit_values,
                                    unsigned njit, void *lib_opts, void **lib_values, unsigned nlib) {
    (void)lib_opts;
    (void)lib_values;
    (void)nlib;
    char *capped = NULL;
    if (with_jit_options(&code, &capped, njit, jit_opts, jit_values)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = library_load(lib, code);
    free(capped);
    return r;
}

GS_DRV CUresult gs_cuLibraryLoadFromFile(drv_library **lib, const char *path, int *jit_opts, void **jit_values,
                                        unsigned njit, void *lib_opts, void **lib_values, unsigned nlib) {
    if (!lib || !path) return CUDA_ERROR_INVALID_VALUE;
    size_t n;
    void *data = read_file(path, &n);
    if (!data) return CUDA_ERROR_FILE_NOT_FOUND;
    CUresult r = gs_cuLibraryLoadData(lib, data, jit_opts, jit_values, njit, lib_opts, lib_values, nlib);
    free(data);
    return r;
}

GS_DRV CUresult gs_cuLibraryUnload(drv_library *h) {
    pthread_mutex_lock(&drv_lock);
    drv_library *l = as_library(h);
    drv_module *m = l ? l->module : NULL;
    if (l) {
        gs_handle_remove(GS_HANDLE_LIBRARY, (uintptr_t)l);
        drv_library **p = &libraries;
        while (*p && *p != l) p = &(*p)->next;
        if (*p) *p = l->next;
        module_take_locked(m);
    }
    pthread_mutex_unlock(&drv_lock);
    if (!l) return CUDA_ERROR_INVALID_HANDLE;
    free(l);
    gs_drv_disown((uintptr_t)m, GS_OWN_MODULE);
    return release_image(m);
}

GS_DRV CUresult gs_cuLibraryGetKernel(drv_function **k, drv_library *h, const char *name) {
    drv_library *l = as_library(h);
    return get_function(k, l ? l->module : NULL, name);
}

GS_DRV CUresult gs_cuLibraryGetModule(drv_module **m, drv_library *h) {
    drv_library *l = as_library(h);
    if (!m) return CUDA_ERROR_INVALID_VALUE;
    if (!l) return CUDA_ERROR_INVALID_HANDLE;
    *m = l->module;
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, drv_library *h, const char *name) {
    drv_library *l = as_library(h);
    return get_global(dptr, bytes, l ? l->module : NULL, name);
}

GS_DRV CUresult gs_cuKernelGetFunction(drv_function **f, drv_function *k) {
    if (!f) return CUDA_ERROR_INVALID_VALUE;
    if (!as_function(k)) return CUDA_ERROR_INVALID_HANDLE;
    DRV_ENTER();
    *f = k;
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuKernelGetLibrary(drv_library **lib, drv_function *k) {
    (void)lib;
    (void)k;
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- function attributes ---- */

static const char *const func_attr_names[] = {
    "maxThreadsPerBlock", "sharedSizeBytes", "constSizeBytes", "localSizeBytes", "numRegs", "ptxVersion",
    "binaryVersion", "cacheModeCA", "maxDynamicSharedSizeBytes", "preferredShmemCarveout", "clusterDimMustBeSet",
    "requiredClusterWidth", "requiredClusterHeight", "requiredClusterDepth", "nonPortableClusterSizeAllowed",
    "clusterSchedulingPolicyPreference",
};

static CUresult func_attribute(int *value, int attr, drv_function *f) {
    if (!value || attr < 0 || attr >= (int)(sizeof func_attr_names / sizeof *func_attr_names))
        return CUDA_ERROR_INVALID_VALUE;
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    DRV_ENTER();
    *value = f->is_set[attr] ? f->set[attr] : gs_entry_attr(&f->entry, func_attr_names[attr]);
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuFuncGetAttribute(int *value, int attr, drv_function *f) {
    return func_attribute(value, attr, as_function(f));
}
GS_DRV CUresult gs_cuKernelGetAttribute(int *value, int attr, drv_function *k, CUdevice dev) {
    (void)dev; /* the same kernel on every device of this server */
    return func_attribute(value, attr, as_function(k));
}

enum { ATTR_MAX_DYNAMIC_SHARED = 8, ATTR_CARVEOUT = 9 };

static CUresult func_set_attribute(drv_function *f, int attr, int value) {
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    int dev;
    CUresult r = gs_drv_enter(&dev);
    if (r) return r;
    if (attr == ATTR_MAX_DYNAMIC_SHARED) { /* at most the device's opt-in limit less the static part */
        int optin = 0;
        r = GS_DRV_CALL(gs_cudaDeviceGetAttribute(&optin, 97, dev));
        if (r) return r;
        if (value < 0 || value > optin - gs_entry_attr(&f->entry, "sharedSizeBytes")) return CUDA_ERROR_INVALID_VALUE;
    } else if (attr == ATTR_CARVEOUT && (value < -1 || value > 100)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    gs_call c;
    gs_call_begin(&c, GS_OP_FUNC_SET_ATTR, 5);
    gs_w_int(c.w, dev);
    gs_w_bin(c.w, f->owner->mod.hash, 32);
    gs_w_cstr(c.w, f->entry.name);
    gs_w_int(c.w, attr);
    gs_w_int(c.w, value);
    cudaError_t e = gs_call_run(&c);
    gs_call_end(&c);
    if (!e && attr >= 0 && attr < FUNC_ATTRS) {
        f->set[attr] = value;
        f->is_set[attr] = 1;
    }
    if (!e && attr == FUNC_ATTR_NON_PORTABLE_CLUSTER) f->entry.nonportable_cluster = value != 0; /* launch checks */
    return gs_drv_err(e);
}

GS_DRV CUresult gs_cuFuncSetAttribute(drv_function *f, int attr, int value) {
    return func_set_attribute(as_function(f), attr, value);
}
GS_DRV CUresult gs_cuKernelSetAttribute(int attr, int value, drv_function *k, CUdevice dev) {
    (void)dev;
    return func_set_attribute(as_function(k), attr, value);
}

/* Cache and shared-memory preferences are hints: accepted for a valid function. */
GS_DRV CUresult gs_cuFuncSetCacheConfig(drv_function *f, int cfg) {
    return !as_function(f) ? CUDA_ERROR_INVALID_HANDLE : cfg < 0 || cfg > 3 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
GS_DRV CUresult gs_cuKernelSetCacheConfig(drv_function *k, int cfg, CUdevice dev) {
    (void)dev;
    return gs_cuFuncSetCacheConfig(k, cfg);
}
GS_DRV CUresult gs_cuFuncSetSharedMemConfig(drv_function *f, int cfg) {
    return !as_function(f) ? CUDA_ERROR_INVALID_HANDLE : cfg < 0 || cfg > 2 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult param_info(drv_function *f, size_t index, size_t *offset, size_t *size) {
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    if (!offset && !size) return CUDA_ERROR_INVALID_VALUE;
    if (index >= (size_t)f->entry.nparams) return CUDA_ERROR_INVALID_VALUE;
    if (offset) *offset = f->entry.param_offsets[index];
    if (size) *size = f->entry.param_sizes[index];
    return CUDA_SUCCESS;
}
GS_DRV CUresult gs_cuFuncGetParamInfo(drv_function *f, size_t i, size_t *offset, size_t *size) {
    return param_info(as_function(f), i, offset, size);
}
GS_DRV CUresult gs_cuKernelGetParamInfo(drv_function *k, size_t i, size_t *offset, size_t *size) {
    return param_info(as_function(k), i, offset, size);
}

GS_DRV CUresult gs_cuFuncGetName(const char **name, drv_function *f) {
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    if (!as_function(f)) return CUDA_ERROR_INVALID_HANDLE;
    *name = f->entry.name;
    return CUDA_SUCCESS;
}
GS_DRV CUresult gs_cuKernelGetName(const char **name, drv_function *k) { return gs_cuFuncGetName(name, k); }

GS_DRV CUresult gs_cuFuncGetModule(drv_module **m, drv_function *f) {
    if (!m) return CUDA_ERROR_INVALID_VALUE;
    if (!as_function(f)) return CUDA_ERROR_INVALID_HANDLE;
    *m = f->owner;
    return CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuFuncIsLoaded(int *state, drv_function *f) {
    if (!state) return CUDA_ERROR_INVALID_VALUE;
    if (!as_function(f)) return CUDA_ERROR_INVALID_HANDLE;
    *state = 1; /* CU_FUNCTION_LOADING_STATE_LOADED */
    return CUDA_SUCCESS;
}
GS_DRV CUresult gs_cuFuncLoad(drv_function *f) { return as_function(f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }

/* ---- occupancy ---- */

GS_DRV CUresult gs_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, drv_function *f, int block,
                                                                       size_t smem, unsigned flags) {
    if (!n || block <= 0 || flags > 1) return CUDA_ERROR_INVALID_VALUE;
    if (!as_function(f)) return CUDA_ERROR_INVALID_HANDLE;
    DRV_ENTER();
    return GS_DRV_CALL(gs_entry_occupancy(&f->entry, n, block, smem));
}
GS_DRV CUresult gs_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, drv_function *f, int block, size_t smem) {
    return gs_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, f, block, smem, 0);
}

typedef size_t (*block_to_smem_fn)(int block_size);

/* The block size with the highest occupancy (ties: the larger block), and the grid that fills the device. */
GS_DRV CUresult gs_cuOccupancyMaxPotentialBlockSizeWithFlags(int *min_grid, int *block_out, drv_function *f,
                                                             block_to_smem_fn to_smem, size_t smem, int limit,
                                                             unsigned flags) {
    if (!min_grid || !block_out || flags > 1) return CUDA_ERROR_INVALID_VALUE;
    if (!as_function(f)) return CUDA_ERROR_INVALID_HANDLE;
    int dev;
    CUresult r = gs_drv_enter(&dev);
    if (r) return r;
    int max_tpb = 0, sms = 0;
    r = GS_DRV_CALL(gs_cudaDeviceGetAttribute(&max_tpb, 1, dev));
    if (!r) r = GS_DRV_CALL(gs_cudaDeviceGetAttribute(&sms, 16, dev));
    if (r) return r;
    int kmax = gs_entry_attr(&f->entry, "maxThreadsPerBlock");
    if (kmax > 0 && kmax < max_tpb) max_tpb = kmax;
    if (limit > 0 && limit < max_tpb) max_tpb = limit;
    int best = 0, best_blocks = 0;
    for (int b = (max_tpb / 32) * 32; b >= 32; b -= 32) {
        int nb = 0;
        r = GS_DRV_CALL(gs_entry_occupancy(&f->entry, &nb, b, to_smem ? to_smem(b) : smem));
        if (r) return r;
        if (nb * b > best * best_blocks) { best = b; best_blocks = nb; }
    }
    if (!best) { best = max_tpb < 32 ? max_tpb : 32; best_blocks = 1; }
    *block_out = best;
    *min_grid = best_blocks * sms;
    return CUDA_SUCCESS;
}
GS_DRV CUresult gs_cuOccupancyMaxPotentialBlockSize(int *min_grid, int *block, drv_function *f,
                                                    block_to_smem_fn to_smem, size_t smem, int limit) {
    return gs_cuOccupancyMaxPotentialBlockSizeWithFlags(min_grid, block, f, to_smem, smem, limit, 0);
}

/* Dynamic shared memory a block can have with num_blocks blocks per multiprocessor. */
GS_DRV CUresult gs_cuOccupancyAvailableDynamicSMemPerBlock(size_t *out, drv_function *f, int num_blocks, int block) {
    if (!out || num_blocks <= 0 || block <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (!as_function(f)) return CUDA_ERROR_INVALID_HANDLE;
    int dev;
    CUresult r = gs_drv_enter(&dev);
    if (r) return r;
    int smem_sm = 0, optin = 0;
    r = GS_DRV_CALL(gs_cudaDeviceGetAttribute(&smem_sm, 81, dev));
    if (!r) r = GS_DRV_CALL(gs_cudaDeviceGetAttribute(&optin, 97, dev));
    if (r) return r;
    long per_block = (long)smem_sm / num_blocks - 1024 - gs_entry_attr(&f->entry, "sharedSizeBytes");
    per_block = per_block / 128 * 128;
    if (per_block > optin - gs_entry_attr(&f->entry, "sharedSizeBytes"))
        per_block = optin - gs_entry_attr(&f->entry, "sharedSizeBytes");
    *out = per_block > 0 ? (size_t)per_block : 0;
    return CUDA_SUCCESS;
}

/* ---- launches ---- */

#define LAUNCH_PARAM_END ((void *)0)
#define LAUNCH_PARAM_BUFFER_POINTER ((void *)1)
#define LAUNCH_PARAM_BUFFER_SIZE ((void *)2)

static CUresult drv_launch_attrs(drv_function *f, dim3 grid, dim3 block, unsigned smem, CUstream s, void **params,
                                 void **extra, int ptsz, const gs_launch_attrs *la) {
    if (!as_function(f)) return CUDA_ERROR_INVALID_HANDLE;
    DRV_ENTER();
    const void *packed = NULL;
    size_t packed_len = 0;
    if (extra) {
        if (params) return CUDA_ERROR_INVALID_VALUE; /* one or the other */
        for (int i = 0; extra[i] != LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == LAUNCH_PARAM_BUFFER_POINTER) packed = extra[i + 1];
            else if (extra[i] == LAUNCH_PARAM_BUFFER_SIZE) packed_len = *(size_t *)extra[i + 1];
            else return CUDA_ERROR_INVALID_VALUE;
        }
        if (!packed) return CUDA_ERROR_INVALID_VALUE;
    }
    cudaError_t saved = gs_thread()->last_error; /* a driver launch leaves cudaGetLastError alone */
    cudaError_t e = gs_launch_entry_ex(&f->entry, grid, block, params, packed, packed_len, smem, s, ptsz, la);
    gs_thread()->last_error = saved;
    return e == 9 ? CUDA_ERROR_INVALID_VALUE : gs_drv_err(e);
}
static CUresult drv_launch(drv_function *f, dim3 grid, dim3 block, unsigned smem, CUstream s, void **params,
                           void **extra, int ptsz) {
    return drv_launch_attrs(f, grid, block, smem, s, params, extra, ptsz, NULL);
}

GS_DRV CUresult gs_cuLaunchKernel(drv_function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned smem, CUstream s, void **params, void **extra) {
    return drv_launch(f, (dim3){gx, gy, gz}, (dim3){bx, by, bz}, smem, s, params, extra, 0);
}
GS_DRV CUresult gs_cuLaunchKernel_ptsz(drv_function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                      unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                                      void **extra) {
    return drv_launch(f, (dim3){gx, gy, gz}, (dim3){bx, by, bz}, smem, s, params, extra, 1);
}
/* Cooperative launches: every block of the grid runs, and the emulator lets grid-wide syncs meet. */
GS_DRV CUresult gs_cuLaunchCooperativeKernel(drv_function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                            unsigned by, unsigned bz, unsigned smem, CUstream s, void **params) {
    return drv_launch(f, (dim3){gx, gy, gz}, (dim3){bx, by, bz}, smem, s, params, NULL, 0);
}
GS_DRV CUresult gs_cuLaunchCooperativeKernel_ptsz(drv_function *f, unsigned gx, unsigned gy, unsigned gz,
                                                 unsigned bx, unsigned by, unsigned bz, unsigned smem, CUstream s,
                                                 void **params) {
    return drv_launch(f, (dim3){gx, gy, gz}, (dim3){bx, by, bz}, smem, s, params, NULL, 1);
}

/* CUlaunchConfig (cuda.h, 56 bytes): grid, block, dynamic shared memory, stream, attributes. */
typedef struct {
    unsigned gx, gy, gz, bx, by, bz, smem;
    CUstream stream;
    void *attrs; /* CUlaunchAttribute[numAttrs]: 72 bytes each */
    unsigned nattrs;
} drv_launch_config;

static CUresult drv_launch_ex(const drv_launch_config *c, drv_function *f, void **params, void **extra, int ptsz) {
    if (!c || (c->nattrs && !c->attrs)) return CUDA_ERROR_INVALID_VALUE;
    /* Attributes (cooperative, priority, clusters, access policy, ...) travel to the server in LAUNCH_EX
     * (shim/gs_launch_attrs.c, gpushim/backends/launch_attrs.py). */
    gs_launch_attrs la;
    cudaError_t e = gs_launch_attrs_read(c->attrs, c->nattrs, &la);
    if (e) return e == 400 ? CUDA_ERROR_INVALID_HANDLE : gs_drv_err(e);
    return drv_launch_attrs(f, (dim3){c->gx, c->gy, c->gz}, (dim3){c->bx, c->by, c->bz}, c->smem, c->stream, params,
                            extra, ptsz, &la);
}
GS_DRV CUresult gs_cuLaunchKernelEx(const drv_launch_config *c, drv_function *f, void **params, void **extra) {
    return drv_launch_ex(c, f, params, extra, 0);
}
GS_DRV CUresult gs_cuLaunchKernelEx_ptsz(const drv_launch_config *c, drv_function *f, void **params, void **extra) {
    return drv_launch_ex(c, f, params, extra, 1);
}

/* cuOccupancyMaxActiveClusters (cuBLAS asks it in cublasCreate): the cluster size comes from the launch's
 * CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION or the kernel's required cluster dimensions ("the cluster size from
 * config must either be unspecified or match the required size. Without required sizes, the cluster size must
 * be specified in config, else the function will return an error"). The answer is the blocks that fit on the
 * device at once (the occupancy per multiprocessor, computed as cuOccupancyMaxActiveBlocksPerMultiprocessor does,
 * times the multiprocessors) in whole clusters: a real GPU also keeps each cluster within one GPC, so its
 * count can be lower. */
enum { LAUNCH_ATTR_CLUSTER_DIMENSION = 4, LAUNCH_ATTR_SIZE = 72, INVALID_CLUSTER_SIZE = 912 };
GS_DRV CUresult gs_cuOccupancyMaxActiveClusters(int *n, drv_function *f, const drv_launch_config *c) {
    if (!n || !c || (c->nattrs && !c->attrs) || !c->bx || !c->by || !c->bz) return CUDA_ERROR_INVALID_VALUE;
    if (!as_function(f)) return CUDA_ERROR_INVALID_HANDLE;
    int dev;
    CUresult r = gs_drv_enter(&dev);
    if (!r) r = GS_DRV_CALL(gs_entry_layout(&f->entry));
    if (r) return r;
    unsigned dims[3] = {0, 0, 0};
    for (unsigned i = 0; i < c->nattrs; i++) {
        const unsigned char *a = (const unsigned char *)c->attrs + (size_t)i * LAUNCH_ATTR_SIZE;
        int id;
        memcpy(&id, a, sizeof id);
        if (id == LAUNCH_ATTR_CLUSTER_DIMENSION) memcpy(dims, a + 8, sizeof dims);
    }
    int req[3] = {gs_entry_attr(&f->entry, "requiredClusterWidth"), gs_entry_attr(&f->entry, "requiredClusterHeight"),
                  gs_entry_attr(&f->entry, "requiredClusterDepth")};
    if (req[0] > 0) {
        if (dims[0] && (dims[0] != (unsigned)req[0] || dims[1] != (unsigned)req[1] || dims[2] != (unsigned)req[2]))
            return INVALID_CLUSTER_SIZE;
        for (int i = 0; i < 3; i++) dims[i] = (unsigned)req[i];
    }
    unsigned long size = (unsigned long)dims[0] * dims[1] * dims[2];
    int clusters_ok = 0, sms = 0, blocks = 0;
    r = GS_DRV_CALL(gs_cudaDeviceGetAttribute(&clusters_ok, 120, dev)); /* cudaDevAttrClusterLaunch */
    if (!r) r = GS_DRV_CALL(gs_cudaDeviceGetAttribute(&sms, 16, dev));
    if (r) return r;
    unsigned long limit = gs_entry_attr(&f->entry, "nonPortableClusterSizeAllowed") > 0 ? 16 : 8;
    if (!size || size > limit || !clusters_ok) return INVALID_CLUSTER_SIZE;
    r = GS_DRV_CALL(gs_entry_occupancy(&f->entry, &blocks, (int)(c->bx * c->by * c->bz), c->smem));
    if (r) return r;
    *n = (int)((unsigned long)blocks * (unsigned long)sms / size);
    return CUDA_SUCCESS;
}

/* ---- JIT linking: PTX inputs, linked by the server ---- */

enum { JIT_INPUT_CUBIN = 0, JIT_INPUT_PTX = 1, JIT_INPUT_FATBINARY = 2, JIT_INPUT_OBJECT = 3, JIT_INPUT_LIBRARY = 4 };

typedef struct {
    uint32_t magic;
    gs_wbuf parts; /* the PTX inputs, NUL-separated */
    unsigned count;
    unsigned max_regs; /* CU_JIT_MAX_REGISTERS of cuLinkCreate, 0 when not given */
    uint8_t *image; /* cuLinkComplete's result, owned until cuLinkDestroy */
} drv_link;

/* A live link state (freed by cuLinkDestroy): looked up before it is read. */
static drv_link *as_link(drv_link *l) { return gs_ptr_known(GS_HANDLE_LINK, l) && l->magic == LINK_MAGIC ? l : NULL; }

GS_DRV CUresult gs_cuLinkCreate_v2(unsigned n, int *opts, void **values, drv_link **out) {
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    jit_options(n, opts, values);
    drv_link *l = calloc(1, sizeof *l);
    if (!l) return CUDA_ERROR_OUT_OF_MEMORY;
    l->magic = LINK_MAGIC;
    l->max_regs = jit_max_registers(n, opts, values);
    gs_w_init(&l->parts);
    gs_handle_add(GS_HANDLE_LINK, (uintptr_t)l);
    *out = l;
    return CUDA_SUCCESS;
}

/* libcudadevrt's cooperative-groups entry points, which numba-cuda's grid.sync() calls (cg.py): the grid's
 * workspace from %envreg1/%envreg2 and the grid barrier on it, the algorithm of CUDA's
 * cooperative_groups/details/sync.h (sync_grids_arrive / sync_grids_wait) as nvcc emits it inline. The archive
 * holds only cubins, so a link that adds libcudadevrt gets this PTX instead. */
static const char CG_DEVRT_PTX[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .func (.param .b64 h) cudaCGGetIntrinsicHandle(.param .b32 scope)\n{\n"
    "\t.reg .b32 %r<3>;\n\t.reg .b64 %rd<4>;\n"
    "\tmov.u32 %r1, %envreg2;\n\tmov.u32 %r2, %envreg1;\n"
    "\tcvt.u64.u32 %rd1, %r1;\n\tcvt.u64.u32 %rd2, %r2;\n\tbfi.b64 %rd3, %rd2, %rd1, 32, 32;\n"
    "\tst.param.b64 [h], %rd3;\n\tret;\n}\n"
    ".visible .func (.param .b32 rc) cudaCGSynchronize(.param .b64 handle, .param .b32 flags)\n{\n"
    "\t.reg .pred %p<5>;\n\t.reg .b32 %r<20>;\n\t.reg .b64 %rd<3>;\n"
    "\tld.param.u64 %rd1, [handle];\n\tsetp.ne.s64 %p1, %rd1, 0;\n\t@%p1 bra $L_grid;\n\ttrap;\n"
    "$L_grid:\n\tbarrier.sync 0;\n"
    "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %tid.y;\n\tmov.u32 %r3, %tid.z;\n"
    "\tor.b32 %r4, %r1, %r2;\n\tor.b32 %r4, %r4, %r3;\n\tsetp.ne.s32 %p2, %r4, 0;\n\t@%p2 bra $L_done;\n"
    "\tadd.s64 %rd2, %rd1, 4;\n"
    "\tmov.u32 %r5, %nctaid.x;\n\tmov.u32 %r6, %nctaid.y;\n\tmul.lo.s32 %r7, %r5, %r6;\n"
    "\tmov.u32 %r8, %nctaid.z;\n\tmul.lo.s32 %r9, %r7, %r8;\n"
    "\tmov.u32 %r10, %ctaid.x;\n\tmov.u32 %r11, %ctaid.y;\n\tmov.u32 %r12, %ctaid.z;\n"
    "\tor.b32 %r13, %r10, %r11;\n\tor.b32 %r13, %r13, %r12;\n\tsetp.eq.s32 %p3, %r13, 0;\n"
    "\tmov.u32 %r14, -2147483647;\n\tsub.s32 %r15, %r14, %r9;\n\tselp.b32 %r16, %r15, 1, %p3;\n"
    "\tatom.add.release.gpu.u32 %r17, [%rd2], %r16;\n"
    "$L_wait:\n\tld.acquire.gpu.u32 %r18, [%rd2];\n\txor.b32 %r19, %r18, %r17;\n"
    "\tsetp.gt.s32 %p4, %r19, -1;\n\t@%p4 bra $L_wait;\n"
    "$L_done:\n\tbarrier.sync 0;\n\tmov.u32 %r1, 0;\n\tst.param.b32 [rc], %r1;\n\tret;\n}\n";

/* libcudadevrt.a as a JIT input: an ar archive holding cuda_device_runtime.o */
static int is_cudadevrt(int type, const void *data, size_t size, const char *name) {
    if (type != JIT_INPUT_LIBRARY || size < 8 || memcmp(data, "!<arch>\n", 8) != 0) return 0;
    return (name && strstr(name, "cudadevrt")) || memmem(data, size, "cuda_device_runtime", 19);
}

GS_DRV CUresult gs_cuLinkAddData_v2(drv_link *l, int type, void *data, size_t size, const char *name, unsigned n,
                                   int *opts, void **values) {
    if (!as_link(l)) return CUDA_ERROR_INVALID_HANDLE;
    if (!data || !size) return CUDA_ERROR_INVALID_VALUE;
    jit_options(n, opts, values);
    if (is_cudadevrt(type, data, size, name)) {
        type = JIT_INPUT_PTX;
        data = (void *)CG_DEVRT_PTX;
        size = sizeof CG_DEVRT_PTX;
    }
    if (type != JIT_INPUT_PTX) {
        gs_warn_once("cuLinkAddData-type", "cuLinkAddData: gpushim links PTX inputs only; %s (input type %d) is "
                     "refused with CUDA_ERROR_NOT_SUPPORTED", name ? name : "an input", type);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    size_t len = strnlen(data, size);
    if (!memmem(data, len, ".version", 8)) return CUDA_ERROR_INVALID_PTX;
    if (l->count) gs_w_raw(&l->parts, "", 1);
    gs_w_raw(&l->parts, data, len);
    l->count++;
    return l->parts.oom ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

GS_DRV CUresult gs_cuLinkAddFile_v2(drv_link *l, int type, const char *path, unsigned n, int *opts, void **values) {
    if (!as_link(l)) return CUDA_ERROR_INVALID_HANDLE;
    if (!path) return CUDA_ERROR_INVALID_VALUE;
    size_t size;
    void *data = read_file(path, &size);
    if (!data) return CUDA_ERROR_FILE_NOT_FOUND;
    CUresult r = gs_cuLinkAddData_v2(l, type, data, size + 1, path, n, opts, values);
    free(data);
    return r;
}

GS_DRV CUresult gs_cuLinkComplete(drv_link *l, void **out, size_t *size) {
    if (!as_link(l)) return CUDA_ERROR_INVALID_HANDLE;
    if (!out || !size) return CUDA_ERROR_INVALID_VALUE;
    DRV_ENTER();
    gs_call c;
    gs_call_begin(&c, GS_OP_LINK_PTX, 2);
    gs_w_uint(c.w, l->count);
    c.bulk = l->parts.buf;
    c.bulk_len = l->parts.len;
    cudaError_t e = gs_call_run(&c);
    if (!e) {
        const uint8_t *img;
        uint32_t n;
        if (!gs_r_bin(&c.r, &img, &n)) {
            e = cudaErrorUnknown;
        } else {
            free(l->image);
            l->image = l->max_regs ? (uint8_t *)ptx_with_maxnreg((const char *)img, n, l->max_regs) : malloc((size_t)n + 1);
            if (!l->image) {
                e = cudaErrorMemoryAllocation;
            } else {
                if (!l->max_regs) {
                    memcpy(l->image, img, n);
                    l->image[n] = 0;
                }
                *out = l->image;
                *size = strlen((char *)l->image) + 1;
            }
        }
    }
    gs_call_end(&c);
    return gs_drv_err(e);
}

/* The CUDA 5.5 entry points have the same arguments as their _v2 successors. */
GS_DRV CUresult gs_cuLinkCreate(unsigned n, int *opts, void **values, drv_link **out) {
    return gs_cuLinkCreate_v2(n, opts, values, out);
}
GS_DRV CUresult gs_cuLinkAddData(drv_link *l, int type, void *data, size_t size, const char *name, unsigned n,
                                int *opts, void **values) {
    return gs_cuLinkAddData_v2(l, type, data, size, name, n, opts, values);
}
GS_DRV CUresult gs_cuLinkAddFile(drv_link *l, int type, const char *path, unsigned n, int *opts, void **values) {
    return gs_cuLinkAddFile_v2(l, type, path, n, opts, values);
}

GS_DRV CUresult gs_cuLinkDestroy(drv_link *l) {
    if (!as_link(l)) return CUDA_ERROR_INVALID_HANDLE;
    gs_handle_remove(GS_HANDLE_LINK, (uintptr_t)l);
    l->magic = 0;
    gs_w_free(&l->parts);
    free(l->image);
    free(l);
    return CUDA_SUCCESS;
}
