/* The handles this process holds, by kind: a set of live values per kind, so an application's handle is
 * checked before the shim looks behind it. A destroyed or never-valid handle (CUDA leaves its behaviour
 * undefined) then gets CUDA's invalid-handle error instead of crashing the client (docs/semantics.md).
 * Streams and events are server handles (ids); the other kinds are pointers to the shim's own structs. */
#ifndef GS_HANDLES_H
#define GS_HANDLES_H

#include <stdint.h>

enum {
    GS_HANDLE_STREAM = 0, /* cudaStream_t / CUstream (server handle) */
    GS_HANDLE_EVENT,      /* cudaEvent_t / CUevent (server handle) */
    GS_HANDLE_CTX,        /* CUcontext from cuCtxCreate (primary contexts are a fixed array) */
    GS_HANDLE_MODULE,     /* CUmodule */
    GS_HANDLE_FUNCTION,   /* CUfunction / CUkernel */
    GS_HANDLE_LIBRARY,    /* CUlibrary / cudaLibrary_t */
    GS_HANDLE_LINK,       /* CUlinkState */
    GS_HANDLE_NODE,       /* cudaGraphNode_t / CUgraphNode */
    GS_HANDLE_GRAPH,      /* cudaGraph_t / CUgraph */
    GS_HANDLE_EXEC,       /* cudaGraphExec_t / CUgraphExec */
    GS_HANDLE_KINDS
};

/* O(1) on average, thread-safe; the sets allocate only when they grow. 0 is never a handle. */
void gs_handle_add(int kind, uint64_t h);
void gs_handle_remove(int kind, uint64_t h);
int gs_handle_known(int kind, uint64_t h);

/* In a forked child: the locks are reset, and the server handles (streams, events) forgotten, since the child's
 * session does not know them; the shim's own objects were copied with the process and stay valid. */
void gs_handles_after_fork(void);

static inline int gs_ptr_known(int kind, const void *p) { return p && gs_handle_known(kind, (uintptr_t)p); }

#endif
