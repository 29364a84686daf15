#define _GNU_SOURCE
#include "gs_client.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "gen/ops.h"
#include "gs_transport.h"

#define GS_SHIM_VERSION "0.1.0"

/* A reply or callback frame read by one thread for another. */
typedef struct frame_node {
    struct frame_node *next;
    uint64_t seq;
    uint8_t *frame;
    size_t len;
} frame_node;

typedef struct callback {
    struct callback *next;
    uint64_t id;
    int is_stream_callback;
    void *fn, *data;
    cudaStream_t stream;
} callback;

enum { DISCONNECTED = 0, CONNECTED = 1, DOWN = 2 };

static struct {
    pthread_mutex_t lock; /* everything below except what wlock guards */
    pthread_cond_t cond;  /* broadcast on every change a waiter may care about */
    pthread_mutex_t wlock; /* socket writes and outq */
    _Atomic int state;
    int fd;
    cudaError_t down_error;
    _Atomic uint64_t next_seq;
    int reader_active;
    frame_node *stash;
    gs_wbuf outq; /* POSTed frames not yet written */
    uint64_t outq_since; /* when the oldest of them was queued */
    /* host callbacks */
    callback *registered, *ready_head, *ready_tail;
    uint64_t next_callback;
    int outstanding;
    int callback_thread_running;
} G = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .cond = PTHREAD_COND_INITIALIZER,
    .wlock = PTHREAD_MUTEX_INITIALIZER,
    .fd = -1,
    .next_seq = 1,
    .next_callback = 1,
};

static void frame_free(uint8_t *f);

/* ---- logging ---- */

int gs_log_level(void) {
    static int level = -1;
    if (level < 0) {
        const char *e = getenv("GPUSHIM_LOG");
        level = e ? atoi(e) : 1;
    }
    return level;
}

void gs_log(int level, const char *fmt, ...) {
    if (gs_log_level() < level) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "gpushim: %s\n", line);
}

void gs_warn_once(const char *key, const char *fmt, ...) {
    /* A small fixed table of keys already printed; past its size warnings still print (never lost). */
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char seen[256][64];
    static int nseen;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nseen; i++)
        if (strncmp(seen[i], key, sizeof seen[i] - 1) == 0) { pthread_mutex_unlock(&mu); return; }
    if (nseen < 256) snprintf(seen[nseen++], sizeof seen[0], "%s", key);
    pthread_mutex_unlock(&mu);
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (gs_log_level() >= 1) fprintf(stderr, "gpushim: %s\n", line);
}

cudaError_t gs_unsupported(const char *name, int major) {
    gs_warn_once(name, "%s is not supported by gpushim yet (CUDA %d ABI); it returns cudaErrorNotSupported",
                 name, major);
    return cudaErrorNotSupported;
}

/* ---- connection ---- */

static void mark_down_locked(cudaError_t err, const char *why) {
    if (G.state == DOWN) return;
    G.state = DOWN;
    G.down_error = err;
    if (why) gs_warn_once("down", "%s", why);
    pthread_cond_broadcast(&G.cond);
}

static void mark_down(cudaError_t err, const char *why) {
    pthread_mutex_lock(&G.lock);
    mark_down_locked(err, why);
    pthread_mutex_unlock(&G.lock);
}

static int handshake(int fd, char *why, size_t whylen, cudaError_t *refusal) {
    gs_wbuf w;
    gs_w_init(&w);
    gs_w_array(&w, 2);
    gs_w_uint(&w, GS_MSG_HELLO);
    gs_w_map(&w, 9);
    gs_w_cstr(&w, "proto");
    gs_w_uint(&w, GS_PROTOCOL_VERSION);
    gs_w_cstr(&w, "runtime");
    gs_w_int(&w, gs_runtime_version_announce());
    gs_w_cstr(&w, "soname");
    gs_w_cstr(&w, gs_runtime_soname());
    gs_w_cstr(&w, "pid");
    gs_w_int(&w, getpid());
    gs_w_cstr(&w, "program");
    gs_w_cstr(&w, program_invocation_short_name);
    gs_w_cstr(&w, "devices");
    gs_w_cstr(&w, getenv("GPUSHIM_DEVICES"));
    gs_w_cstr(&w, "priority");
    gs_w_int(&w, getenv("GPUSHIM_PRIORITY") ? atoi(getenv("GPUSHIM_PRIORITY")) : 0);
    gs_w_cstr(&w, "token");
    gs_w_cstr(&w, gs_transport_token());
    gs_w_cstr(&w, "shim");
    gs_w_cstr(&w, "libgpushim " GS_SHIM_VERSION);
    int ok = !w.oom && gs_send_frame(fd, w.buf, w.len, NULL, 0) == 0;
    gs_w_free(&w);
    if (!ok) { snprintf(why, whylen, "could not send the handshake: %s", strerror(errno)); return -1; }
    uint8_t *frame;
    size_t len;
    if (gs_recv_frame(fd, &frame, &len) != 0) {
        snprintf(why, whylen, "the server closed the connection during the handshake");
        return -1;
    }
    gs_reader r;
    gs_r_init(&r, frame, len);
    uint32_t n, nkeys;
    uint64_t kind;
    int64_t err = 0;
    char message[512] = "";
    if (!gs_r_array(&r, &n) || n < 2 || !gs_r_uint(&r, &kind) || kind != GS_MSG_HELLO || !gs_r_map(&r, &nkeys)) {
        free(frame);
        snprintf(why, whylen, "the server's handshake answer is malformed (is it a gpushim server?)");
        return -1;
    }
    for (uint32_t i = 0; i < nkeys && !r.err; i++) {
        const char *k;
        uint32_t kl;
        gs_r_str(&r, &k, &kl);
        if (kl == 5 && memcmp(k, "error", 5) == 0) gs_r_int(&r, &err);
        else if (kl == 7 && memcmp(k, "message", 7) == 0) {
            const char *m;
            uint32_t ml;
            gs_r_str(&r, &m, &ml);
            snprintf(message, sizeof message, "%.*s", (int)ml, m);
        } else gs_r_skip(&r);
    }
    free(frame);
    if (r.err) { snprintf(why, whylen, "the server's handshake answer is malformed"); return -1; }
    if (err) {
        snprintf(why, whylen, "the server refused this client: %s", message);
        *refusal = (cudaError_t)err;
        return -1;
    }
    return 0;
}

cudaError_t gs_ensure_connected(void) {
    int st = atomic_load(&G.state);
    if (st == CONNECTED) return cudaSuccess;
    pthread_mutex_lock(&G.lock);
    if (G.state == DISCONNECTED) {
        char why[768] = "", addr[512];
        gs_transport_address(addr, sizeof addr);
        cudaError_t refusal = cudaErrorNoDevice;
        int fd = gs_transport_connect(why, sizeof why);
        /* A peer that accepts but never answers (not a gpushim server, or a stuck one) must not hang the
         * application: the handshake has a deadline, then calls wait as long as CUDA's own would. */
        if (fd >= 0) gs_transport_set_timeout(fd, gs_transport_connect_timeout());
        if (fd >= 0 && handshake(fd, why, sizeof why, &refusal) != 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                snprintf(why, sizeof why, "no answer to the handshake within %.0f s (is it a gpushim server?)",
                         gs_transport_connect_timeout());
            close(fd);
            fd = -1;
        }
        if (fd >= 0) gs_transport_set_timeout(fd, 0);
        if (fd < 0) {
            char line[sizeof addr + sizeof why + 160]; /* room for both whole, with the text around them */
            snprintf(line, sizeof line,
                     "no usable gpushim server at %s: %s. Start one with `gpushim serve`, or run the program "
                     "with `gpushim run -- PROGRAM`. Every CUDA call will fail.", addr, why);
            mark_down_locked(refusal, line);
        } else {
            G.fd = fd;
            G.state = CONNECTED;
            gs_log(2, "connected to %s as a CUDA %d client", addr, gs_runtime_version());
        }
    }
    cudaError_t e = G.state == CONNECTED ? cudaSuccess : G.down_error;
    pthread_mutex_unlock(&G.lock);
    return e;
}

/* ---- writing ---- */

static int flush_outq_locked(void) {
    if (!G.outq.len) return 0;
    int rc = gs_send_raw(G.fd, G.outq.buf, G.outq.len, NULL, 0);
    gs_w_reset(&G.outq);
    return rc;
}

#define OUTQ_LIMIT (256u << 10)
#define POST_COPY_LIMIT (64u << 10) /* larger asynchronous payloads are written at once, without a copy */
#define FLUSH_AGE_NS 200000ull

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static pthread_cond_t flusher_cond = PTHREAD_COND_INITIALIZER;
static int flusher_running;

/* Sends queued asynchronous calls that have waited FLUSH_AGE_NS, so an application that queues work and
 * then computes on the host does not leave the device idle. Sleeps on a condition while nothing waits. */
static void *flusher(void *arg) {
    (void)arg;
    pthread_mutex_lock(&G.wlock);
    for (;;) {
        while (!G.outq.len) pthread_cond_wait(&flusher_cond, &G.wlock);
        uint64_t age = now_ns() - G.outq_since;
        if (age >= FLUSH_AGE_NS) {
            if (flush_outq_locked() != 0) gs_log(1, "could not send queued calls to the server");
            continue;
        }
        pthread_mutex_unlock(&G.wlock);
        struct timespec ts = {0, (long)(FLUSH_AGE_NS - age)};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&G.wlock);
    }
    return NULL;
}

static void start_flusher_locked(void) {
    if (!flusher_running) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &a, flusher, NULL) == 0) flusher_running = 1;
        pthread_attr_destroy(&a);
    }
    pthread_cond_signal(&flusher_cond);
}


/* A msgpack unsigned integer at p (the shortest encoding); returns its length. */
static size_t put_uint(uint8_t *p, uint64_t v) {
    if (v < 0x80) { p[0] = (uint8_t)v; return 1; }
    int n = v <= 0xff ? 1 : v <= 0xffff ? 2 : v <= 0xffffffffu ? 4 : 8;
    p[0] = n == 1 ? 0xcc : n == 2 ? 0xcd : n == 4 ? 0xce : 0xcf;
    for (int i = 0; i < n; i++) p[1 + i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    return 1 + (size_t)n;
}

/* [kind, seq, op, args...] header plus the 4-byte length prefix, for the args in c->w (at most 4 + 1 + 1 + 9 +
 * 9 bytes; written in place: this is on every call's path). */
static size_t frame_header(uint8_t *hdr, int kind, uint64_t seq, int op, size_t body_rest) {
    size_t n = 4;
    hdr[n++] = 0x94; /* an array of 4 */
    n += put_uint(hdr + n, (uint64_t)kind);
    n += put_uint(hdr + n, seq);
    n += put_uint(hdr + n, (uint64_t)op);
    uint32_t total = (uint32_t)(n - 4 + body_rest);
    memcpy(hdr, &total, 4); /* little-endian hosts only, which is every CUDA host */
    return n;
}

static _Thread_local gs_wbuf tls_args;

void gs_call_begin(gs_call *c, int op, uint32_t nargs) {
    memset(c, 0, sizeof *c);
    c->op = op;
    c->pass_fd = -1;
    c->w = &tls_args;
    gs_w_reset(c->w);
    gs_w_array(c->w, nargs);
}

void gs_call_end(gs_call *c) {
    frame_free(c->frame);
    c->frame = NULL;
}

static int send_call(gs_call *c, int kind, uint64_t seq) {
    if (c->bulk || c->bulk_len) gs_w_bin_header(c->w, c->bulk_len);
    if (c->w->oom) return -1;
    uint8_t hdr[32];
    size_t hl = frame_header(hdr, kind, seq, c->op, c->w->len + c->bulk_len);
    pthread_mutex_lock(&G.wlock);
    int rc;
    if (kind == GS_MSG_POST && c->bulk_len < POST_COPY_LIMIT) {
        /* Batched: queued calls go out with the next call that waits, when the queue is large, or when
         * the flusher finds them older than FLUSH_AGE_NS (so queued work never waits on the app). */
        if (!G.outq.len) G.outq_since = now_ns();
        gs_w_raw(&G.outq, hdr, hl);
        gs_w_raw(&G.outq, c->w->buf, c->w->len);
        gs_w_raw(&G.outq, c->bulk, c->bulk_len);
        rc = G.outq.oom ? -1 : 0;
        if (rc == 0 && (G.outq.len >= OUTQ_LIMIT || now_ns() - G.outq_since > FLUSH_AGE_NS)) rc = flush_outq_locked();
        else if (rc == 0) start_flusher_locked();
    } else {
        rc = flush_outq_locked();
        if (rc == 0) {
            struct iovec iov[3] = {{hdr, hl}, {c->w->buf, c->w->len}, {(void *)c->bulk, c->bulk_len}};
            rc = c->pass_fd >= 0 ? gs_sendv_fd(G.fd, iov, c->bulk_len ? 3 : 2, c->pass_fd)
                                 : gs_sendv(G.fd, iov, c->bulk_len ? 3 : 2);
        }
    }
    pthread_mutex_unlock(&G.wlock);
    return rc;
}

cudaError_t gs_call_post(gs_call *c) {
    cudaError_t e = gs_ensure_connected();
    if (e) return e;
    if (send_call(c, GS_MSG_POST, atomic_fetch_add(&G.next_seq, 1)) != 0) {
        mark_down(cudaErrorDevicesUnavailable, "lost the connection to the gpushim server while sending");
        return G.down_error;
    }
    return cudaSuccess;
}

/* ---- reading ---- */

/* Reply frames. A large one (a device-to-host chunk) is kept for the next instead of freed: touching fresh
 * pages of a new 16 MiB buffer for every chunk costs more than the copy. A header before each frame holds
 * its capacity. */
#define BIG_FRAME (1u << 20)
static _Atomic(uint8_t *) big_cache;

static uint8_t *frame_alloc(size_t n) {
    if (n >= BIG_FRAME) {
        uint8_t *b = atomic_exchange(&big_cache, NULL);
        if (b) {
            size_t cap;
            memcpy(&cap, b, sizeof cap);
            if (cap >= n) return b + 16;
            free(b);
        }
    }
    uint8_t *b = malloc(n + 16);
    if (!b) return NULL;
    memcpy(b, &n, sizeof n);
    return b + 16;
}

void gs_call_frame_free(uint8_t *frame) { frame_free(frame); }

static void frame_free(uint8_t *f) {
    if (!f) return;
    uint8_t *b = f - 16;
    size_t cap;
    memcpy(&cap, b, sizeof cap);
    if (cap >= BIG_FRAME) {
        uint8_t *expected = NULL;
        if (atomic_compare_exchange_strong(&big_cache, &expected, b)) return;
    }
    free(b);
}

/* Replies are read through one buffer, owned by whichever thread holds the reader role: a small reply and
 * its length prefix usually arrive in one read() instead of two. */
static struct {
    uint8_t buf[64 << 10];
    size_t r, w;
} rbuf;

static int read_frame(int fd, uint8_t **frame, size_t *len) {
    while (rbuf.w - rbuf.r < 4) {
        if (rbuf.r) {
            memmove(rbuf.buf, rbuf.buf + rbuf.r, rbuf.w - rbuf.r);
            rbuf.w -= rbuf.r;
            rbuf.r = 0;
        }
        ssize_t n = read(fd, rbuf.buf + rbuf.w, sizeof rbuf.buf - rbuf.w);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        rbuf.w += (size_t)n;
    }
    uint32_t n;
    memcpy(&n, rbuf.buf + rbuf.r, 4);
    if (n > GS_MAX_FRAME) return -1;
    uint8_t *f = frame_alloc(n);
    if (!f) return -1;
    rbuf.r += 4;
    size_t have = rbuf.w - rbuf.r < n ? rbuf.w - rbuf.r : n;
    memcpy(f, rbuf.buf + rbuf.r, have);
    rbuf.r += have;
    if (rbuf.r == rbuf.w) rbuf.r = rbuf.w = 0;
    for (size_t got = have; got < n;) { /* the rest of a large frame goes straight into it */
        ssize_t k = read(fd, f + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) { frame_free(f); return -1; }
        got += (size_t)k;
    }
    *frame = f;
    *len = n;
    return 0;
}

static void enqueue_callback_locked(uint64_t id) {
    for (callback **p = &G.registered; *p; p = &(*p)->next) {
        if ((*p)->id == id) {
            callback *cb = *p;
            *p = cb->next;
            cb->next = NULL;
            if (G.ready_tail) G.ready_tail->next = cb;
            else G.ready_head = cb;
            G.ready_tail = cb;
            return;
        }
    }
    gs_log(1, "the server reported unknown host callback %llu; ignored", (unsigned long long)id);
}

/* Files a frame read by the reader: returns 1 when it is the reply to `want`. Called with G.lock held. */
static int file_frame_locked(uint8_t *frame, size_t len, uint64_t want) {
    gs_reader r;
    gs_r_init(&r, frame, len);
    uint32_t n;
    uint64_t kind = 99, seq = 0;
    gs_r_array(&r, &n);
    gs_r_uint(&r, &kind);
    if (kind == GS_MSG_CALLBACK) {
        uint64_t stream, id;
        gs_r_uint(&r, &stream);
        gs_r_uint(&r, &id);
        if (!r.err) enqueue_callback_locked(id);
        frame_free(frame);
        return 0;
    }
    gs_r_uint(&r, &seq);
    if (r.err || (kind != GS_MSG_REPLY && kind != GS_MSG_FATAL)) {
        frame_free(frame);
        mark_down_locked(cudaErrorDevicesUnavailable, "the server sent a malformed frame; disconnected");
        return 0;
    }
    if (kind == GS_MSG_FATAL) {
        int64_t err = cudaErrorUnknown;
        const char *m = "";
        uint32_t ml = 0;
        gs_r_int(&r, &err);
        gs_r_str(&r, &m, &ml);
        char line[700];
        snprintf(line, sizeof line, "the server ended this session: %.*s", (int)ml, m);
        frame_free(frame);
        mark_down_locked(cudaErrorDevicesUnavailable, line);
        return 0;
    }
    if (seq == want) return 1;
    frame_node *fn = malloc(sizeof *fn);
    if (!fn) { frame_free(frame); mark_down_locked(cudaErrorMemoryAllocation, "out of host memory"); return 0; }
    *fn = (frame_node){G.stash, seq, frame, len};
    G.stash = fn;
    return 0;
}

static int take_stashed_locked(uint64_t seq, uint8_t **frame, size_t *len) {
    for (frame_node **p = &G.stash; *p; p = &(*p)->next) {
        if ((*p)->seq == seq) {
            frame_node *fn = *p;
            *p = fn->next;
            *frame = fn->frame;
            *len = fn->len;
            free(fn);
            return 1;
        }
    }
    return 0;
}

/* Takes the reader role (G.lock held, nobody reading), reads one frame without the lock, gives the role
 * back and wakes the waiters. Returns 0, or -1 when the connection is lost (marked down). */
static int read_as_reader_locked(uint8_t **f, size_t *l) {
    G.reader_active = 1;
    int fd = G.fd;
    pthread_mutex_unlock(&G.lock);
    int rc = read_frame(fd, f, l);
    pthread_mutex_lock(&G.lock);
    G.reader_active = 0;
    pthread_cond_broadcast(&G.cond);
    if (rc != 0)
        mark_down_locked(cudaErrorDevicesUnavailable,
                         "lost the connection to the gpushim server; every CUDA call now fails");
    return rc;
}

/* Waits until the reply for seq arrives; takes the reader role whenever nobody holds it. */
static int wait_reply(uint64_t seq, uint8_t **frame, size_t *len) {
    pthread_mutex_lock(&G.lock);
    for (;;) {
        if (take_stashed_locked(seq, frame, len)) break;
        if (G.state != CONNECTED) { pthread_mutex_unlock(&G.lock); return -1; }
        if (G.reader_active) { pthread_cond_wait(&G.cond, &G.lock); continue; }
        uint8_t *f;
        size_t l;
        if (read_as_reader_locked(&f, &l) == 0 && file_frame_locked(f, l, seq)) { *frame = f; *len = l; break; }
    }
    pthread_mutex_unlock(&G.lock);
    return 0;
}

/* Writes kernel printf output carried by a reply and prints its note once per operation. */
static void reply_extras(gs_call *c) {
    gs_reader x = c->r;
    for (uint32_t i = 0; i < c->nresults; i++) gs_r_skip(&x);
    if (gs_r_peek(&x) == GS_MP_BIN || gs_r_peek(&x) == GS_MP_STR) {
        const uint8_t *out;
        uint32_t n;
        gs_r_bin(&x, &out, &n);
        if (n) { fwrite(out, 1, n, stdout); fflush(stdout); }
    } else if (gs_r_peek(&x) == GS_MP_NIL) gs_r_nil(&x);
    if (gs_r_peek(&x) == GS_MP_STR) {
        const char *m;
        uint32_t n;
        gs_r_str(&x, &m, &n);
        /* Once per operation and message: the key hashes the whole message (FNV-1a), since messages that
         * differ only in their tail (the kernels they name) are different notes. */
        uint32_t h = 2166136261u;
        for (uint32_t i = 0; i < n; i++) h = (h ^ (uint8_t)m[i]) * 16777619u;
        char key[64];
        snprintf(key, sizeof key, "note:%d:%08x:%.32s", c->op, h, m);
        gs_warn_once(key, "%s: %.*s", c->op <= GS_OP_MAX && gs_op_names[c->op] ? gs_op_names[c->op] : "?",
                     (int)n, m);
    }
}

cudaError_t gs_call_send(gs_call *c) {
    cudaError_t e = gs_ensure_connected();
    if (e) return e;
    c->seq = atomic_fetch_add(&G.next_seq, 1);
    if (send_call(c, GS_MSG_CALL, c->seq) != 0) {
        mark_down(cudaErrorDevicesUnavailable, "lost the connection to the gpushim server while sending");
        return G.down_error;
    }
    return cudaSuccess;
}

cudaError_t gs_call_wait(gs_call *c) {
    size_t len;
    if (wait_reply(c->seq, &c->frame, &len) != 0) return G.down_error;
    gs_r_init(&c->r, c->frame, len);
    uint32_t n;
    uint64_t kind, rseq;
    int64_t err;
    gs_r_array(&c->r, &n);
    gs_r_uint(&c->r, &kind);
    gs_r_uint(&c->r, &rseq);
    gs_r_int(&c->r, &err);
    gs_r_array(&c->r, &c->nresults);
    if (c->r.err || n < 4) {
        mark_down(cudaErrorDevicesUnavailable, "the server sent a malformed reply; disconnected");
        return G.down_error;
    }
    if (n >= 5) reply_extras(c);
    return (cudaError_t)err;
}

cudaError_t gs_call_run(gs_call *c) {
    cudaError_t e = gs_call_send(c);
    return e ? e : gs_call_wait(c);
}

/* ---- host callbacks ---- */

static void run_callback(callback *cb) {
    if (cb->is_stream_callback)
        ((cudaStreamCallback_t)cb->fn)(cb->stream, cudaSuccess, cb->data);
    else
        ((cudaHostFn_t)cb->fn)(cb->data);
    /* No longer outstanding before the server hears that it finished: a synchronisation that waited for it
     * then returns to a caller that sees it done (gs_callbacks_outstanding; a copy made as if it still ran
     * was left posted, unsynchronised, after the call returned). */
    pthread_mutex_lock(&G.lock);
    G.outstanding--;
    pthread_cond_broadcast(&G.cond);
    pthread_mutex_unlock(&G.lock);
    gs_call c;
    gs_call_begin(&c, GS_OP_CALLBACK_DONE, 1);
    gs_w_uint(c.w, cb->id);
    gs_call_post(&c);
    pthread_mutex_lock(&G.wlock);
    if (flush_outq_locked() != 0) gs_log(1, "could not report a finished host callback to the server");
    pthread_mutex_unlock(&G.wlock);
    free(cb);
}

static void *callback_thread(void *arg) {
    (void)arg;
    pthread_mutex_lock(&G.lock);
    for (;;) {
        if (G.ready_head) {
            callback *cb = G.ready_head;
            G.ready_head = cb->next;
            if (!G.ready_head) G.ready_tail = NULL;
            pthread_mutex_unlock(&G.lock);
            run_callback(cb);
            pthread_mutex_lock(&G.lock);
            continue;
        }
        if (G.outstanding > 0 && !G.reader_active && G.state == CONNECTED) {
            uint8_t *f;
            size_t l;
            if (read_as_reader_locked(&f, &l) == 0) file_frame_locked(f, l, 0);
            continue;
        }
        pthread_cond_wait(&G.cond, &G.lock);
    }
    return NULL;
}

uint64_t gs_callback_register(int is_stream_callback, void *fn, void *data, cudaStream_t stream) {
    callback *cb = calloc(1, sizeof *cb);
    if (!cb) return 0;
    pthread_mutex_lock(&G.lock);
    cb->id = G.next_callback++;
    cb->is_stream_callback = is_stream_callback;
    cb->fn = fn;
    cb->data = data;
    cb->stream = stream;
    cb->next = G.registered;
    G.registered = cb;
    G.outstanding++;
    if (!G.callback_thread_running) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &a, callback_thread, NULL) == 0) G.callback_thread_running = 1;
        pthread_attr_destroy(&a);
    }
    pthread_cond_broadcast(&G.cond);
    uint64_t id = G.callback_thread_running ? cb->id : 0;
    if (!id) { G.registered = cb->next; G.outstanding--; free(cb); }
    pthread_mutex_unlock(&G.lock);
    return id;
}

int gs_callbacks_outstanding(void) {
    pthread_mutex_lock(&G.lock);
    int n = G.outstanding;
    pthread_mutex_unlock(&G.lock);
    return n;
}

/* ---- fork ---- */

/* A forked child gets a fresh session on first use: the parent's socket, threads and server-side state
 * are not its own. Locks are re-initialised since another parent thread may have held them. */
static void after_fork_child(void) {
    pthread_mutex_init(&G.lock, NULL);
    pthread_mutex_init(&G.wlock, NULL);
    pthread_cond_init(&G.cond, NULL);
    if (G.fd >= 0) close(G.fd);
    G.fd = -1;
    G.state = DISCONNECTED;
    G.reader_active = 0;
    rbuf.r = rbuf.w = 0;
    G.stash = NULL;
    gs_w_init(&G.outq);
    pthread_cond_init(&flusher_cond, NULL);
    flusher_running = 0;
    G.registered = G.ready_head = G.ready_tail = NULL;
    G.outstanding = 0;
    G.callback_thread_running = 0;
}

__attribute__((constructor)) static void client_init(void) {
    pthread_atfork(NULL, NULL, after_fork_child);
}
