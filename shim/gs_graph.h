/* CUDA graphs in the client (shim/api_capture.c, api_graph.c, api_graph_exec.c).
 *
 * A graph is a set of nodes with dependencies. Each node holds the calls it makes when the graph runs
 * ("ops"), recorded by the ordinary API paths: a kernel node is the encoded LAUNCH call a cudaLaunchKernel
 * would post, a memcpy node the copy cudaMemcpyAsync would make, ... (a thread-local recorder catches them
 * at the capture hooks of gs_capture.h). Stream capture builds the same nodes, one per captured call, with
 * the dependencies that stream order and cross-stream event waits give.
 *
 * An executable graph is a copy of the graph's ops in a topological order. It is uploaded to the server
 * once (GRAPH_UPLOAD) in segments of ops the server can run by itself; a launch then costs one
 * GRAPH_LAUNCH frame per segment (one for a graph without device-to-host copies into pageable memory,
 * which the client must receive itself). */
#ifndef GS_GRAPH_H
#define GS_GRAPH_H

#include <pthread.h>
#include <stdint.h>

#include "gs_api.h"
#include "gs_registry.h"

/* Defined elsewhere in the unity build (api_memory.c, api_stream.c, api_kernel.c). */
cudaError_t gs_cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, int k,
                                 cudaStream_t st);
cudaError_t gs_cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data);
cudaError_t gs_cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t s);
cudaError_t gs_cudaMemset2DAsync(void *d, size_t p, int v, size_t w, size_t h, cudaStream_t s);
cudaError_t gs_cudaMalloc(void **ptr, size_t size);
cudaError_t gs_cudaFree(void *ptr);
cudaError_t gs_cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **args, size_t sh, cudaStream_t s);

/* cudaGraphNodeType */
enum { GT_KERNEL = 0, GT_MEMCPY = 1, GT_MEMSET = 2, GT_HOST = 3, GT_GRAPH = 4, GT_EMPTY = 5, GT_WAIT_EVENT = 6,
       GT_EVENT_RECORD = 7, GT_MEM_ALLOC = 10, GT_MEM_FREE = 11, GT_BATCH_MEM_OP = 12, GT_CONDITIONAL = 13 };

enum { OP_CALL, OP_COPY, OP_COPY2D, OP_HOST_FUNC };

typedef struct {
    int kind, op;
    /* OP_CALL: the encoded argument array before the stream argument, after it, then the bulk data */
    uint8_t *bytes;
    size_t prefix, suffix, bulk;
    int has_bulk;
    uintptr_t a[7]; /* OP_COPY: dst, src, n, kind; OP_COPY2D: dst, dpitch, src, spitch, w, h, kind;
                       OP_HOST_FUNC: fn, data */
} gs_gop;

typedef struct {
    gs_gop *v;
    size_t n, cap;
} gs_gops;

/* Memory of an allocation node: shared by the graph, its clones and executable graphs; freed with the last. */
typedef struct {
    _Atomic int refs;
    void *ptr;
    size_t size;
} gs_galloc;

struct gs_graph;

/* A conditional handle (cudaGraphConditionalHandleCreate, shim/api_graph_cond.c): the handle is the device
 * address of a 4-byte cell that kernels set with cudaGraphSetConditional and the server reads. */
typedef struct {
    gs_galloc *mem;
    unsigned dflt, flags;
} gs_gcond;

typedef struct gs_gnode {
    struct gs_graph *g;
    int type;
    gs_gops ops;
    struct gs_graph *child; /* GT_GRAPH: the node's own clone of the child graph */
    uint64_t event;         /* event record / wait */
    gs_galloc *alloc;       /* GT_MEM_ALLOC */
    void *dptr;             /* GT_MEM_FREE */
    unsigned char params[208]; /* kernel, memset, host, cudaMemcpy3DParms or CUDA_MEMCPY3D as given (Get calls) */
    uint8_t *blob;             /* memory the params point into at blob_at (a batch node's operations) */
    size_t blob_len, blob_at;
    uint8_t *kargs;         /* GT_KERNEL: a copy of the argument values params' kernelParams points into */
    void **kargv;
    struct gs_gnode **deps;
    size_t ndeps, capdeps;
    const struct gs_gnode *clone_of; /* the node it was cloned from (cudaGraphNodeFindInClone) */
    /* GT_CONDITIONAL: its body graphs (phGraph_out), type (IF/WHILE/SWITCH) and handle */
    struct gs_graph **bodies;
    unsigned nbodies;
    int cond_type;
    uint64_t handle;
} gs_gnode;

/* References a graph or an executable graph holds on user objects (api_graph_user.c). */
typedef struct {
    struct gs_uobj **obj;
    unsigned *count;
    size_t n;
} gs_uobj_refs;

typedef struct gs_graph {
    struct gs_graph *next;
    gs_gnode **nodes;
    size_t n, cap;
    gs_uobj_refs uobjs;
    gs_gcond *conds; /* conditional handles made for this graph */
    size_t nconds;
    const gs_gnode *owner; /* a conditional node's body: owned by that node (cudaGraphDestroy refuses it) */
} gs_graph;

extern pthread_mutex_t gs_graph_lock; /* every graph, node, exec and capture */

int gs_graph_known_locked(const gs_graph *g);
gs_graph *gs_graph_new_locked(void);
void gs_graph_free_locked(gs_graph *g);
gs_gnode *gs_node_new_locked(gs_graph *g, int type);
int gs_node_known_locked(const gs_gnode *n);
cudaError_t gs_node_add_dep_locked(gs_gnode *n, gs_gnode *dep);
/* Takes op->bytes: on failure they are freed. */
cudaError_t gs_ops_append(gs_gops *o, const gs_gop *op);
void gs_ops_clear(gs_gops *o);
cudaError_t gs_ops_copy(gs_gops *dst, const gs_gops *src);
gs_graph *gs_graph_clone_locked(const gs_graph *g);
/* Nodes in a topological order (dependencies first); NULL on a cycle or no memory. */
gs_gnode **gs_graph_order_locked(const gs_graph *g);

/* Thread-local recording: while `on`, the capture hooks append the calls this thread makes to *ops. */
typedef struct {
    gs_gops *ops;
} gs_recorder;
extern _Thread_local gs_recorder *gs_rec;
void gs_record_begin(gs_recorder *r, gs_gops *ops);
void gs_record_end(gs_recorder *r);

/* Builds a node's ops from parameters (also used by the exec SetParams calls). */
cudaError_t gs_build_kernel(gs_gops *ops, const void *params, gs_gnode *n);
cudaError_t gs_build_memset(gs_gops *ops, const void *params);
cudaError_t gs_build_memcpy3d(gs_gops *ops, const void *params);
cudaError_t gs_build_memcpy1d(gs_gops *ops, void *dst, const void *src, size_t count, int kind);
cudaError_t gs_build_host(gs_gops *ops, const void *params);

/* Adds a node made of ops (taken) to graph g after deps; params (psize bytes) kept for the Get calls. */
cudaError_t gs_graph_add_built(void **out, void *g, void *const *deps, size_t nd, int type, gs_gops *ops,
                               const void *params, size_t psize);
cudaError_t gs_graph_node_params(void *n, int type, void *out, size_t size); /* the params kept, checked type */
cudaError_t gs_graph_node_set_ops(void *n, int type, gs_gops *ops, const void *params, size_t psize);
/* The exec SetParams of a node, with ops built by the caller (taken). */
cudaError_t gs_graph_exec_set_ops(void *x, void *node, int type, gs_gops *ops);

/* User objects: copies of a holder's references (each retained), and their release. */
cudaError_t gs_uobj_refs_copy(gs_uobj_refs *dst, const gs_uobj_refs *src);
void gs_uobj_refs_release(gs_uobj_refs *r);

/* Conditional nodes (api_graph_cond.c) */
cudaError_t gs_graph_add_conditional(void **out, void *g, void *const *deps, size_t nd, unsigned char *params);
void gs_cond_node_free_locked(gs_gnode *n);
int gs_cond_node_clone_locked(gs_gnode *d, const gs_gnode *s);
void gs_graph_conds_free_locked(gs_graph *g);
int gs_graph_conds_copy_locked(gs_graph *d, const gs_graph *s);
/* The ops that give every handle of g (and of its child graphs and bodies) with cudaGraphCondAssignDefault its
 * default value, at the start of each launch; each handle's memory is retained in *allocs. */
cudaError_t gs_cond_defaults_locked(gs_gops *ops, const gs_graph *g, gs_galloc ***allocs, size_t *nallocs);

/* Gives node n (known, lock held) its own copy of len bytes the params point to at offset `at`. */
cudaError_t gs_node_keep_blob_locked(gs_gnode *n, const void *data, size_t len, size_t at);

/* Sends one op on stream h as the ordinary call it was (recorded instead when h captures). */
cudaError_t gs_op_replay(const gs_gop *op, uint64_t h);

#endif
