/* Kernels: lazy module upload by content hash, parameter layouts from the server (cached), argument
 * packing, <<<>>> launches for the 11.x/12.x ABI (cudaLaunchKernel) and the 13.x one (__cudaGetKernel +
 * __cudaLaunchKernel), function attributes, occupancy, and module variables (symbols). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gs_api.h"
#include "gs_capture.h"
#include "gs_launch_attrs.h"
#include "gs_registry.h"
#include "gs_sha256.h"

#define cudaErrorInvalidDeviceFunction 98

static pthread_mutex_t module_lock = PTHREAD_MUTEX_INITIALIZER;

/* Uploads the entry's fat binary unless the server already holds its hash. */
cudaError_t gs_module_ensure(gs_module *m) {
    if (m->uploaded) return cudaSuccess;
    if (m->refused) return (cudaError_t)m->refused; /* uploading it again would be refused again */
    pthread_mutex_lock(&module_lock);
    cudaError_t e = cudaSuccess;
    if (!m->uploaded) {
        if (!m->data) {
            e = cudaErrorInvalidKernelImage;
        } else {
            gs_sha256(m->data, m->size, m->hash);
            gs_call c;
            gs_call_begin(&c, GS_OP_MODULE_QUERY, 1);
            gs_w_bin(c.w, m->hash, 32);
            e = gs_call_run(&c);
            int known = !e && gs_i64(&c);
            gs_call_end(&c);
            if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidKernelImage) m->refused = e;
            if (!e && !known) {
                gs_call_begin(&c, GS_OP_MODULE_LOAD, 2);
                gs_w_bin(c.w, m->hash, 32);
                c.bulk = m->data;
                c.bulk_len = m->size;
                e = gs_call_run(&c);
                gs_call_end(&c);
                if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidKernelImage) m->refused = e;
                else gs_log(2, "uploaded a %zu-byte fat binary", m->size);
            }
            if (!e) m->uploaded = 1;
        }
    }
    pthread_mutex_unlock(&module_lock);
    return e;
}

static cudaError_t find_kernel(const void *func, gs_entry **out) {
    gs_entry *k = gs_registry_find(func);
    if (!k) k = gs_drv_kernel_entry(func); /* a cudaKernel_t from cudaLibraryGetKernel */
    if (!k || k->is_var) return cudaErrorInvalidDeviceFunction;
    *out = k;
    cudaError_t e = gs_module_ensure(k->module);
    if (e && k->module->refused && !k->refusal_logged) {
        /* The server's reason names the module's image; say which kernel the application asked for. */
        k->refusal_logged = 1;
        gs_log(1, "kernel %s cannot run: the server refused its module (error %d)", k->name, (int)e);
    }
    return e;
}

/* Fetches a kernel's parameter layout and attributes once. */
cudaError_t gs_entry_layout(gs_entry *k) {
    if (k->have_layout) return cudaSuccess;
    pthread_mutex_lock(&module_lock);
    cudaError_t e = cudaSuccess;
    if (!k->have_layout) {
        gs_call c;
        gs_call_begin(&c, GS_OP_FUNC_INFO, 3);
        gs_w_int(c.w, gs_thread()->device);
        gs_w_bin(c.w, k->module->hash, 32);
        gs_w_cstr(c.w, k->name);
        e = gs_call_run(&c);
        if (!e) {
            uint32_t n = 0;
            gs_r_array(&c.r, &n);
            uint32_t *off = calloc(n ? n : 1, sizeof *off), *size = calloc(n ? n : 1, sizeof *size);
            if (!off || !size) e = cudaErrorMemoryAllocation;
            for (uint32_t i = 0; !e && i < n; i++) {
                uint32_t two;
                uint64_t o, s;
                gs_r_array(&c.r, &two);
                gs_r_uint(&c.r, &o);
                gs_r_uint(&c.r, &s);
                off[i] = (uint32_t)o;
                size[i] = (uint32_t)s;
            }
            k->param_bytes = (uint32_t)gs_u64(&c);
            if (c.r.err) e = cudaErrorUnknown;
            if (!e) {
                k->attrs = c.r;
                k->attr_frame = c.frame;
                c.frame = NULL;
                k->param_offsets = off;
                k->param_sizes = size;
                k->nparams = (int)n;
                k->have_layout = 1;
            } else {
                free(off);
                free(size);
            }
        }
        gs_call_end(&c);
    }
    pthread_mutex_unlock(&module_lock);
    return e;
}

void gs_entry_free_layout(gs_entry *k) {
    free(k->param_offsets);
    free(k->param_sizes);
    gs_call_frame_free(k->attr_frame);
    k->param_offsets = k->param_sizes = NULL;
    k->attr_frame = NULL;
    k->have_layout = 0;
}

int gs_entry_attr(gs_entry *k, const char *name) {
    gs_reader r = k->attrs;
    uint32_t n;
    gs_r_map(&r, &n);
    for (uint32_t i = 0; i < n && !r.err; i++) {
        const char *key;
        uint32_t kl;
        gs_r_str(&r, &key, &kl);
        if (strlen(name) == kl && memcmp(name, key, kl) == 0) {
            int64_t v = 0;
            gs_r_int(&r, &v);
            return (int)v;
        }
        gs_r_skip(&r);
    }
    return 0;
}

/* What CUDA checks when a launch is issued, checked here since launches do not wait for a reply. */
static cudaError_t check_config(gs_entry *k, dim3 grid, dim3 block, size_t shmem) {
    int dev = gs_thread()->device, lim[8];
    static const int attrs[8] = {1, 2, 3, 4, 5, 6, 7, 97}; /* threads/block, block dims, grid dims, smem optin */
    for (int i = 0; i < 8; i++) {
        cudaError_t e = gs_cudaDeviceGetAttribute(&lim[i], attrs[i], dev);
        if (e) return e;
    }
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || !threads || threads > (unsigned)lim[0] || block.x > (unsigned)lim[1] ||
        block.y > (unsigned)lim[2] || block.z > (unsigned)lim[3] || grid.x > (unsigned)lim[4] ||
        grid.y > (unsigned)lim[5] || grid.z > (unsigned)lim[6] ||
        shmem + (size_t)gs_entry_attr(k, "sharedSizeBytes") > (size_t)lim[7])
        return cudaErrorInvalidConfiguration;
    return cudaSuccess;
}

/* Launches kernel k (whose module is uploaded and layout fetched) with its arguments as CUDA's args
 * array, or, when packed is not NULL, as the packed parameter buffer of packed_len bytes (the driver's
 * CU_LAUNCH_PARAM_BUFFER_POINTER). */
cudaError_t gs_launch_entry(gs_entry *k, dim3 grid, dim3 block, void **args, const void *packed, size_t packed_len,
                            size_t shmem, cudaStream_t s, int ptsz) {
    return gs_launch_entry_ex(k, grid, block, args, packed, packed_len, shmem, s, ptsz, NULL);
}

/* The same with cuLaunchKernelEx's attributes (NULL: none): LAUNCH_EX carries them. A graph keeps no
 * attributes: while a stream captures or a node is built, the launch is recorded as a plain LAUNCH. */
cudaError_t gs_launch_entry_ex(gs_entry *k, dim3 grid, dim3 block, void **args, const void *packed,
                               size_t packed_len, size_t shmem, cudaStream_t s, int ptsz, const gs_launch_attrs *la) {
    cudaError_t e = check_config(k, grid, block, shmem);
    if (!e && la) e = gs_launch_attrs_check_cluster(la, k, grid);
    if (e) return gs_ret(e);
    if (la && la->n && gs_capture_any()) {
        gs_warn_once("launch-attrs-graph", "launch attributes are not kept in graphs by gpushim: a captured "
                     "cudaLaunchKernelEx/cuLaunchKernelEx becomes a kernel node without them");
        la = NULL;
    }
    int ex = la && la->n;
    uint64_t stream;
    e = gs_stream_handle(s, ptsz, &stream);
    if (e) return gs_ret(e);
    uint8_t small[512];
    uint8_t *params = k->param_bytes <= sizeof small ? small : calloc(1, k->param_bytes);
    if (!params) return gs_ret(cudaErrorMemoryAllocation);
    memset(params, 0, k->param_bytes);
    if (packed) {
        if (packed_len < k->param_bytes) e = cudaErrorInvalidValue;
        else if (k->param_bytes) memcpy(params, packed, k->param_bytes);
    } else if (k->nparams && !args) {
        e = cudaErrorInvalidValue;
    }
    for (int i = 0; !e && !packed && i < k->nparams; i++) {
        if (k->param_offsets[i] + k->param_sizes[i] > k->param_bytes) { e = cudaErrorInvalidValue; break; }
        memcpy(params + k->param_offsets[i], args[i], k->param_sizes[i]);
    }
    if (!e) {
        gs_call c;
        gs_call_begin(&c, ex ? GS_OP_LAUNCH_EX : GS_OP_LAUNCH, ex ? 9 : 8);
        gs_w_int(c.w, gs_thread()->device);
        gs_w_bin(c.w, k->module->hash, 32);
        gs_w_cstr(c.w, k->name);
        gs_w_array(c.w, 3);
        gs_w_uint(c.w, grid.x);
        gs_w_uint(c.w, grid.y);
        gs_w_uint(c.w, grid.z);
        gs_w_array(c.w, 3);
        gs_w_uint(c.w, block.x);
        gs_w_uint(c.w, block.y);
        gs_w_uint(c.w, block.z);
        gs_w_uint(c.w, shmem);
        gs_w_uint(c.w, stream);
        if (ex) {
            gs_w_array(c.w, 4 * la->n);
            for (unsigned i = 0; i < 4 * la->n; i++) gs_w_uint(c.w, la->v[i]);
        }
        c.bulk = params;
        c.bulk_len = k->param_bytes;
        /* fire-and-forget: a fault surfaces at the next synchronising call; recorded while capturing */
        if (!gs_capture_record(stream, &c, &e)) e = gs_call_post(&c);
    }
    if (params != small) free(params);
    return gs_ret(e);
}

static cudaError_t launch_attrs(const void *func, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t s,
                                int ptsz, const gs_launch_attrs *la) {
    GS_ENTER();
    gs_entry *k;
    cudaError_t e = find_kernel(func, &k);
    if (!e) e = gs_entry_layout(k);
    if (e) return gs_ret(e);
    return gs_launch_entry_ex(k, grid, block, args, NULL, 0, shmem, s, ptsz, la);
}
static cudaError_t launch(const void *func, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t s,
                          int ptsz) {
    return launch_attrs(func, grid, block, args, shmem, s, ptsz, NULL);
}

GS_IMPL cudaError_t gs_cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **args, size_t sh, cudaStream_t s) {
    return launch(f, g, b, args, sh, s, 0);
}
GS_IMPL cudaError_t gs_cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **args, size_t sh, cudaStream_t s) {
    return launch(f, g, b, args, sh, s, 1);
}
/* The CUDA 13 launch path: the "kernel handle" the shim hands out is the host stub address itself. */
GS_IMPL cudaError_t gs___cudaGetKernel(void **kernel, const void *host_fun) {
    if (!kernel) return gs_ret(cudaErrorInvalidValue);
    gs_entry *k = gs_registry_find(host_fun);
    if (!k || k->is_var) return gs_ret(cudaErrorInvalidDeviceFunction);
    *kernel = (void *)host_fun;
    return cudaSuccess;
}
GS_IMPL cudaError_t gs___cudaLaunchKernel(const void *k, dim3 g, dim3 b, void **args, size_t sh, cudaStream_t s) {
    return launch(k, g, b, args, sh, s, 0);
}
GS_IMPL cudaError_t gs___cudaLaunchKernel_ptsz(const void *k, dim3 g, dim3 b, void **args, size_t sh,
                                               cudaStream_t s) {
    return launch(k, g, b, args, sh, s, 1);
}
GS_IMPL cudaError_t gs_cudaLaunchCooperativeKernel(const void *f, dim3 g, dim3 b, void **args, size_t sh,
                                                   cudaStream_t s) {
    return launch(f, g, b, args, sh, s, 0);
}
GS_IMPL cudaError_t gs_cudaLaunchCooperativeKernel_ptsz(const void *f, dim3 g, dim3 b, void **args, size_t sh,
                                                        cudaStream_t s) {
    return launch(f, g, b, args, sh, s, 1);
}

/* cudaLaunchConfig_t is 56 bytes in every version: grid, block, dynamic shared memory, stream, attrs. */
typedef struct {
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
    void *attrs;
    unsigned nattrs;
} launch_config;

static cudaError_t launch_ex(const launch_config *cfg, const void *f, void **args, int ptsz) {
    if (!cfg || (cfg->nattrs && !cfg->attrs)) return gs_ret(cudaErrorInvalidValue);
    /* The attributes travel to the server (gpushim/backends/launch_attrs.py: the cuda backend applies them;
     * the emulator checks the cluster shape and ignores the rest, which change scheduling, not results: kernels
     * of a stream run one after the other, so a programmatic dependent launch's griddepcontrol.wait is met
     * when its grid starts). */
    gs_launch_attrs la;
    cudaError_t e = gs_launch_attrs_read(cfg->attrs, cfg->nattrs, &la);
    if (e) return gs_ret(e);
    return launch_attrs(f, cfg->grid, cfg->block, args, cfg->shmem, cfg->stream, ptsz, &la);
}
GS_IMPL cudaError_t gs_cudaLaunchKernelExC(const launch_config *cfg, const void *f, void **args) {
    return launch_ex(cfg, f, args, 0);
}
GS_IMPL cudaError_t gs_cudaLaunchKernelExC_ptsz(const launch_config *cfg, const void *f, void **args) {
    return launch_ex(cfg, f, args, 1);
}

/* ---- function attributes and occupancy ---- */

static cudaError_t func_attributes(void *attr, const void *func, int major) {
    if (!attr) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_entry *k;
    cudaError_t e = find_kernel(func, &k);
    if (!e) e = gs_entry_layout(k);
    if (e) return gs_ret(e);
    const gs_layout *l = gs_layout_for("cudaFuncAttributes", major);
    if (!l) return gs_ret(cudaErrorNotSupported);
    gs_fill_struct(attr, l, k->attrs);
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaFuncGetAttributes__11(void *a, const void *f) { return func_attributes(a, f, 11); }
GS_IMPL cudaError_t gs_cudaFuncGetAttributes__12(void *a, const void *f) { return func_attributes(a, f, 12); }
GS_IMPL cudaError_t gs_cudaFuncGetAttributes__13(void *a, const void *f) { return func_attributes(a, f, 13); }

GS_IMPL cudaError_t gs_cudaFuncSetAttribute(const void *func, int attr, int value) {
    GS_ENTER();
    gs_entry *k;
    cudaError_t e = find_kernel(func, &k);
    if (e) return gs_ret(e);
    gs_call c;
    gs_call_begin(&c, GS_OP_FUNC_SET_ATTR, 5);
    gs_w_int(c.w, gs_thread()->device);
    gs_w_bin(c.w, k->module->hash, 32);
    gs_w_cstr(c.w, k->name);
    gs_w_int(c.w, attr);
    gs_w_int(c.w, value);
    e = gs_run_simple(&c);
    if (!e && attr == FUNC_ATTR_NON_PORTABLE_CLUSTER) k->nonportable_cluster = value != 0; /* launch checks */
    return e;
}

/* Cache and shared-memory bank preferences are hints; a registered kernel accepts them. */
static cudaError_t func_hint(const void *func, int value, int max) {
    GS_ENTER();
    gs_entry *k;
    if (value < 0 || value > max) return gs_ret(cudaErrorInvalidValue);
    return gs_ret(find_kernel(func, &k));
}
GS_IMPL cudaError_t gs_cudaFuncSetCacheConfig(const void *f, int cfg) { return func_hint(f, cfg, 3); }
GS_IMPL cudaError_t gs_cudaFuncSetSharedMemConfig(const void *f, int cfg) { return func_hint(f, cfg, 2); }

GS_IMPL cudaError_t gs_cudaGetFuncBySymbol(void **fn, const void *symbol) {
    if (!fn) return gs_ret(cudaErrorInvalidValue);
    gs_entry *k = gs_registry_find(symbol);
    if (!k || k->is_var) return gs_ret(cudaErrorInvalidDeviceFunction);
    *fn = (void *)symbol;
    return cudaSuccess;
}

/* Occupancy from the device's limits and the kernel's registers and shared memory, as the CUDA
 * occupancy calculator computes it (allocation granularities: warps, 256 registers, 128 B shared). */
cudaError_t gs_entry_occupancy(gs_entry *k, int *nblocks, int block_size, size_t dyn_smem) {
    cudaError_t e;
    int dev = gs_thread()->device, max_threads = 0, max_blocks = 0, regs_sm = 0, smem_sm = 0, max_tpb = 0;
    e = gs_cudaDeviceGetAttribute(&max_threads, 39, dev); /* MaxThreadsPerMultiProcessor */
    if (!e) e = gs_cudaDeviceGetAttribute(&max_blocks, 106, dev); /* MaxBlocksPerMultiprocessor */
    if (!e) e = gs_cudaDeviceGetAttribute(&regs_sm, 82, dev); /* MaxRegistersPerMultiprocessor */
    if (!e) e = gs_cudaDeviceGetAttribute(&smem_sm, 81, dev); /* MaxSharedMemoryPerMultiprocessor */
    if (!e) e = gs_cudaDeviceGetAttribute(&max_tpb, 1, dev);
    if (e) return gs_ret(e);
    if (block_size > max_tpb) { *nblocks = 0; return cudaSuccess; }
    int warps = (block_size + 31) / 32;
    int by_threads = max_threads / (warps * 32);
    int regs = gs_entry_attr(k, "numRegs");
    int regs_per_warp = ((regs * 32 + 255) / 256) * 256;
    int by_regs = regs_per_warp ? regs_sm / (regs_per_warp * warps) : max_blocks;
    size_t smem = (size_t)gs_entry_attr(k, "sharedSizeBytes") + dyn_smem + 1024; /* 1 KiB reserved per block */
    smem = (smem + 127) / 128 * 128;
    int by_smem = (int)((size_t)smem_sm / smem);
    int n = max_blocks;
    if (by_threads < n) n = by_threads;
    if (by_regs < n) n = by_regs;
    if (by_smem < n) n = by_smem;
    *nblocks = n;
    return cudaSuccess;
}

static cudaError_t occupancy(int *nblocks, const void *func, int block_size, size_t dyn_smem) {
    if (!nblocks || block_size <= 0) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    gs_entry *k;
    cudaError_t e = find_kernel(func, &k);
    if (!e) e = gs_entry_layout(k);
    if (e) return gs_ret(e);
    return gs_entry_occupancy(k, nblocks, block_size, dyn_smem);
}

GS_IMPL cudaError_t gs_cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *f, int bs, size_t sm) {
    return occupancy(n, f, bs, sm);
}
GS_IMPL cudaError_t gs_cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *f, int bs,
                                                                             size_t sm, unsigned flags) {
    if (flags > 1) return gs_ret(cudaErrorInvalidValue);
    return occupancy(n, f, bs, sm);
}

/* ---- module variables ---- */

static cudaError_t symbol_address(const void *symbol, uintptr_t *ptr, size_t *size) {
    gs_entry *v = gs_registry_find(symbol);
    if (!v || !v->is_var) return cudaErrorInvalidSymbol;
    int dev = gs_thread()->device;
    cudaError_t e = gs_module_ensure(v->module);
    if (e) return e;
    if (!v->sym_ptr || v->sym_dev != dev) {
        gs_call c;
        gs_call_begin(&c, GS_OP_SYMBOL_INFO, 3);
        gs_w_int(c.w, dev);
        gs_w_bin(c.w, v->module->hash, 32);
        gs_w_cstr(c.w, v->name);
        e = gs_call_run(&c);
        if (!e) {
            uintptr_t p = (uintptr_t)gs_u64(&c);
            size_t s = (size_t)gs_u64(&c);
            gs_ranges_add((gs_range){p, s, dev, cudaMemoryTypeDevice, 0, 0, 0, 0});
            v->sym_dev = dev;
            v->sym_size = s;
            v->sym_ptr = p;
        }
        gs_call_end(&c);
        if (e) return e;
    }
    *ptr = v->sym_ptr;
    *size = v->sym_size;
    return cudaSuccess;
}

GS_IMPL cudaError_t gs_cudaGetSymbolAddress(void **dev_ptr, const void *symbol) {
    if (!dev_ptr) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    uintptr_t p;
    size_t s;
    cudaError_t e = symbol_address(symbol, &p, &s);
    if (!e) *dev_ptr = (void *)p;
    return gs_ret(e);
}

GS_IMPL cudaError_t gs_cudaGetSymbolSize(size_t *size, const void *symbol) {
    if (!size) return gs_ret(cudaErrorInvalidValue);
    GS_ENTER();
    uintptr_t p;
    cudaError_t e = symbol_address(symbol, &p, size);
    return gs_ret(e);
}

/* The device address of [offset, offset+count) inside a module variable, for a copy of the given kind;
 * `wrong_kind` is the kind that names the wrong direction (device-to-host for a copy to a symbol). */
static cudaError_t symbol_range(const void *symbol, size_t count, size_t offset, int kind, int wrong_kind,
                                uintptr_t *out) {
    if (kind == wrong_kind || kind == cudaMemcpyHostToHost || kind < 0 || kind > cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    size_t size;
    cudaError_t e = symbol_address(symbol, out, &size);
    if (e) return e;
    if (offset > size || count > size - offset) return cudaErrorInvalidValue;
    *out += offset;
    return cudaSuccess;
}

/* The synchronous forms (async 0) follow cudaMemcpy's rules, in _ptds builds too (docs/semantics.md). */
static cudaError_t to_symbol(const void *symbol, const void *src, size_t count, size_t offset, int kind,
                             cudaStream_t s, int ptds, int async) {
    GS_ENTER();
    uintptr_t p;
    cudaError_t e = symbol_range(symbol, count, offset, kind, cudaMemcpyDeviceToHost, &p);
    return e ? gs_ret(e) : gs_memcpy((void *)p, src, count, kind, s, ptds, async);
}

static cudaError_t from_symbol(void *dst, const void *symbol, size_t count, size_t offset, int kind,
                               cudaStream_t s, int ptds, int async) {
    GS_ENTER();
    uintptr_t p;
    cudaError_t e = symbol_range(symbol, count, offset, kind, cudaMemcpyHostToDevice, &p);
    return e ? gs_ret(e) : gs_memcpy(dst, (const void *)p, count, kind, s, ptds, async);
}

GS_IMPL cudaError_t gs_cudaMemcpyToSymbol(const void *sym, const void *src, size_t n, size_t off, int kind) {
    return to_symbol(sym, src, n, off, kind, NULL, 0, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpyToSymbol_ptds(const void *sym, const void *src, size_t n, size_t off, int kind) {
    return to_symbol(sym, src, n, off, kind, NULL, 1, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpyToSymbolAsync(const void *sym, const void *src, size_t n, size_t off, int kind,
                                               cudaStream_t s) {
    return to_symbol(sym, src, n, off, kind, s, 0, 1);
}
GS_IMPL cudaError_t gs_cudaMemcpyToSymbolAsync_ptsz(const void *sym, const void *src, size_t n, size_t off,
                                                    int kind, cudaStream_t s) {
    return to_symbol(sym, src, n, off, kind, s, 1, 1);
}
GS_IMPL cudaError_t gs_cudaMemcpyFromSymbol(void *dst, const void *sym, size_t n, size_t off, int kind) {
    return from_symbol(dst, sym, n, off, kind, NULL, 0, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpyFromSymbol_ptds(void *dst, const void *sym, size_t n, size_t off, int kind) {
    return from_symbol(dst, sym, n, off, kind, NULL, 1, 0);
}
GS_IMPL cudaError_t gs_cudaMemcpyFromSymbolAsync(void *dst, const void *sym, size_t n, size_t off, int kind,
                                                 cudaStream_t s) {
    return from_symbol(dst, sym, n, off, kind, s, 0, 1);
}
GS_IMPL cudaError_t gs_cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *sym, size_t n, size_t off, int kind,
                                                      cudaStream_t s) {
    return from_symbol(dst, sym, n, off, kind, s, 1, 1);
}
