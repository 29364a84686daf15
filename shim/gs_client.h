/* The shim's connection to the gpushim server: handshake, calls, replies, host callbacks, fork.
 *
 * Any number of application threads may call at once. Replies are matched by sequence number; whichever
 * waiting thread finds the socket unread becomes the reader for everyone (leader/follower), so a round
 * trip costs no thread hand-off. While host functions are outstanding, the callback thread takes the
 * reader role when no application thread holds it, so callbacks run even if the application makes no
 * further CUDA call. */
#ifndef GS_CLIENT_H
#define GS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "gs_cuda.h"
#include "gs_msgpack.h"

typedef struct {
    gs_wbuf *w;            /* the call's arguments, encoded after gs_call_begin */
    const void *bulk;      /* optional bytes sent as a bin after the encoded arguments (no copy) */
    size_t bulk_len;
    int op;
    int pass_fd; /* a file descriptor sent with the call (SCM_RIGHTS), or -1 */
    uint64_t seq;
    /* reply */
    uint8_t *frame;
    gs_reader r; /* positioned at the first result */
    uint32_t nresults;
} gs_call;

/* Starts a call with nargs arguments; encode them with gs_w_* on c->w. When the last argument is bulk
 * data, count it in nargs, encode nothing for it and set c->bulk / c->bulk_len. */
void gs_call_begin(gs_call *c, int op, uint32_t nargs);
/* Sends the call and waits for its reply. Returns the call's cudaError_t; on success c->r reads the
 * results. Always pair with gs_call_end. */
cudaError_t gs_call_run(gs_call *c);
/* gs_call_run in two halves, so several calls can be in flight (pipelined bulk transfers). The
 * arguments must be encoded in a buffer of the caller's (c->w) when calls overlap. */
cudaError_t gs_call_send(gs_call *c);
cudaError_t gs_call_wait(gs_call *c);
/* Queues the call without waiting (asynchronous CUDA semantics); errors surface at a later call. */
cudaError_t gs_call_post(gs_call *c);
void gs_call_end(gs_call *c);
/* Frees a reply frame taken from a call (c->frame kept, then set to NULL before gs_call_end). */
void gs_call_frame_free(uint8_t *frame);

/* Connects when needed; returns cudaSuccess or the error every call gets while no server is usable. */
cudaError_t gs_ensure_connected(void);

/* Host functions: registers fn to run when the server reports that `stream` reached callback `id`. */
uint64_t gs_callback_register(int is_stream_callback, void *fn, void *data, cudaStream_t stream);
/* How many registered host functions have not finished running (any stream, any thread). */
int gs_callbacks_outstanding(void);

/* What every unimplemented CUDA function returns: cudaErrorNotSupported, its name logged once. */
cudaError_t gs_unsupported(const char *name, int major);

/* Prints "gpushim: <msg>" once per distinct key. */
void gs_warn_once(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gs_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int gs_log_level(void);

/* The client's runtime API version (e.g. 12040) and its libcudart soname, found at load. */
int gs_runtime_version(void);
int gs_runtime_version_announce(void); /* gs_runtime_version, for the handshake (a later version is sent on) */
const char *gs_runtime_soname(void);
void gs_detect_runtime(void);

#endif
