/* The session worker's fast path (gpushim/server/fastpath.py): a loop, run in the worker thread with the GIL
 * released, that owns the client's socket while the session is quiet and answers the common operations itself:
 * STREAM_QUERY, STREAM_SYNC and EVENT_QUERY of idle streams and events, DEVICE_SYNC, MEM_INFO, MEMSET and the
 * copies between the client and a known allocation (MEMCPY_H2D, MEMCPY_D2H, and through the client's shared
 * pinned memory MEMCPY_H2D_SHM, MEMCPY_H2D_STAGED, MEMCPY_D2H_SHM), launches of empty kernels. Anything else (an
 * op it does not take, an argument encoded in a way it does not accept exactly, a handle or address it was
 * not told about, descriptors, end of file, an error) returns to Python with the unconsumed bytes left in the
 * FrameReader's buffer, and Python handles them exactly as it would have without this file.
 *
 * Python is the only other writer of fp_state: after it handled frames it clears `fresh`, and the loop asks it
 * to refresh the mirror (FP_REFRESH, fastpath.py: refresh) before taking another frame. What this loop does
 * (queries, memsets, counting empty launches) changes nothing that the state describes.
 * Replies are the bytes Python would send: msgpack of [REPLY, seq, 0, [], nil, nil] (tests/server/
 * test_fastpath.py compares them). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#define FP_API __attribute__((visibility("default")))
#define FP_MAX_HANDLES 256
#define FP_MAX_ALLOCS 4096
#define FP_MAX_FDS 8
#define FP_MAX_LAUNCHES 64
#define FP_MAX_NAME 255
#define FP_MAX_DEVS 16
#define FP_SMALL_PARAMS 4096 /* gpushim/compat/policy.py SMALL_PARAM_LIMIT: no verdict to build below it */
#define FP_MAX_SHMS 64
#define FP_LEDGER_SLOTS 1024 /* gpushim/backends/accounting.py HostLedger.SLOTS */

enum {
    OP_DEVICE_SYNC = 4, OP_MEM_INFO = 7, OP_MEMCPY_H2D = 23, OP_MEMCPY_D2H = 24, OP_MEMSET = 29,
    OP_MEMCPY_H2D_SHM = 34, OP_MEMCPY_D2H_SHM = 35, OP_MEMCPY_H2D_STAGED = 36, OP_STREAM_SYNC = 42,
    OP_STREAM_QUERY = 43, OP_EVENT_QUERY = 53, OP_LAUNCH = 63
};
enum { KIND_CALL = 1, KIND_POST = 3 };
/* why fp_serve returned */
enum { FP_FRAME = 1, FP_READ = 2, FP_FDS = 3, FP_EOF = 4, FP_RECV_ERROR = 5, FP_SEND_ERROR = 6, FP_REFRESH = 7 };

typedef struct {
    uint64_t addr, size; /* the allocation as the client sees it (size: what it asked for) */
    uint64_t host;       /* where its first byte is in this process (the arena) */
} fp_alloc;

/* A launch configuration of an empty kernel (every thread returns at once) that Python's launch already
 * checked and ran once (backend.py: _launches, _count_empty): launching it again only counts. */
typedef struct {
    int32_t dev;      /* the client's device ordinal */
    uint32_t backend_dev;
    uint8_t hash[32];
    uint32_t grid[3], block[3], shared, nparams;
    uint64_t threads; /* the thread-instructions one launch counts */
    uint32_t name_len;
    char name[FP_MAX_NAME + 1];
} fp_launch;

/* The client's shared pinned memory (session.py: host_maps), mapped in this process. */
typedef struct {
    uint64_t id, host, size;
} fp_shm;

/* What cudaMemGetInfo answers (ops_devices.py: op_mem_info; accounting.py: MemoryAccount.headroom): each client
 * device's free and total bytes, less the session's quota room and the host ledger's room. The ledger is shared
 * with other workers, so it is read here, as HostLedger.used reads it: only while no process that holds a slot
 * has exited (none of the pidfds Python watches is readable) and the slots are held by the processes Python's
 * watch was built from (the pid and start-time rows equal its snapshot); otherwise Python reclaims and answers. */
typedef struct {
    uint32_t ok;           /* Python filled this in: MEM_INFO may be answered here */
    uint32_t ledger;       /* the host ledger limits the session */
    int64_t quota_room;    /* bytes the quota leaves, or -1: no quota */
    int64_t cap;           /* the ledger's cap */
    uint64_t ids, bytes;   /* addresses of the ledger's pid and start-time rows, and of its bytes row */
    uint64_t seen;         /* address of Python's snapshot of the pid and start-time rows (2 * SLOTS int64) */
    uint32_t nheld, npidfds;
    uint64_t free[FP_MAX_DEVS], total[FP_MAX_DEVS]; /* by client device */
    int32_t held[FP_LEDGER_SLOTS];                  /* the slots the watch saw held */
    int32_t pidfds[FP_LEDGER_SLOTS];
} fp_meminfo;

typedef struct {
    /* counters: only this loop writes them; any thread may read them */
    uint64_t calls, queries, memsets, launches, thread_instructions;
    uint64_t copies, copy_bytes; /* MEMCPY_* answered here, and the bytes they moved */
    uint64_t memset_misses; /* memsets and copies handed to Python for want of an allocation (fastpath.py rebuilds
                            * allocs) */
    uint64_t kernels[FP_MAX_DEVS]; /* launches per backend device (Python adds them to the scheduler's table) */
    /* set by Python before each entry */
    uint64_t ops;       /* bit n: op n may be answered here (bits of OP_MEMSET etc.; the policy refuses none) */
    uint32_t quiet;     /* no error pending, nothing queued or waiting, no printf output to deliver */
    uint32_t fresh;     /* the mirror is current: Python refreshed it since it last handled a frame */
    uint32_t max_frame; /* frames above it go to Python, which reports them */
    uint32_t nstreams, nevents, nallocs, nlaunches, ndevs, nshms;
    uint32_t allocs_stale; /* allocations changed since Python built allocs: a miss asks it to rebuild them */
    /* the socket and the FrameReader's buffer, its read and write offsets (fp_serve's arguments: one pointer
     * crosses ctypes, which costs far less than five) */
    int32_t fd;
    uint64_t buf, cap, r, w;
    int32_t err;        /* errno of FP_RECV_ERROR / FP_SEND_ERROR */
    int32_t nfds;       /* descriptors received with FP_FDS */
    int32_t fds[FP_MAX_FDS];
    uint64_t streams[FP_MAX_HANDLES]; /* stream handles (legacy ones included) this loop may answer for */
    uint64_t events[FP_MAX_HANDLES];  /* idle events of this session */
    fp_alloc allocs[FP_MAX_ALLOCS];   /* every allocation of every device, sorted by addr */
    fp_launch launch[FP_MAX_LAUNCHES];
    fp_shm shms[FP_MAX_SHMS];
    fp_meminfo mi;
} fp_state;

static uint64_t be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* An unsigned msgpack integer (positive fixint, uint 8..64); 0 when the bytes are anything else. */
static int rd_uint(const uint8_t **pp, const uint8_t *end, uint64_t *v) {
    const uint8_t *p = *pp;
    if (p >= end)
        return 0;
    int n;
    if (*p < 0x80) {
        *v = *p;
        *pp = p + 1;
        return 1;
    }
    switch (*p) {
    case 0xcc: n = 1; break;
    case 0xcd: n = 2; break;
    case 0xce: n = 4; break;
    case 0xcf: n = 8; break;
    default: return 0;
    }
    if (end - p < 1 + n)
        return 0;
    *v = be(p + 1, n);
    *pp = p + 1 + n;
    return 1;
}

/* A msgpack integer in int32's range (any encoding msgpack decodes to an int there); 0 otherwise. */
static int rd_i32(const uint8_t **pp, const uint8_t *end, int64_t *v) {
    const uint8_t *p = *pp;
    if (p >= end)
        return 0;
    if (*p >= 0xe0) { /* negative fixint */
        *v = (int8_t)*p;
        *pp = p + 1;
        return 1;
    }
    int n;
    switch (*p) {
    case 0xd0: n = 1; break;
    case 0xd1: n = 2; break;
    case 0xd2: n = 4; break;
    case 0xd3: n = 8; break;
    default: {
        uint64_t u;
        if (!rd_uint(pp, end, &u) || u > INT32_MAX)
            return 0;
        *v = (int64_t)u;
        return 1;
    }
    }
    if (end - p < 1 + n)
        return 0;
    uint64_t u = be(p + 1, n);
    int64_t s = n == 1 ? (int8_t)u : n == 2 ? (int16_t)u : n == 4 ? (int32_t)u : (int64_t)u;
    if (s < INT32_MIN || s > INT32_MAX)
        return 0;
    *v = s;
    *pp = p + 1 + n;
    return 1;
}

static int has(const uint64_t *set, uint32_t n, uint64_t h) {
    for (uint32_t i = 0; i < n; i++)
        if (set[i] == h)
            return 1;
    return 0;
}

/* The allocation containing addr (memory.py: DeviceMemory.find), or NULL. */
static const fp_alloc *find(const fp_state *st, uint64_t addr) {
    uint32_t lo = 0, hi = st->nallocs; /* first index whose addr > addr */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (st->allocs[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const fp_alloc *a = &st->allocs[lo - 1];
    uint64_t span = a->size ? a->size : 1;
    return addr - a->addr < span ? a : NULL;
}

static int send_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* v as Python's msgpack Packer writes a non-negative int (the shortest unsigned form). */
static uint8_t *wr_uint(uint8_t *p, uint64_t v) {
    if (v < 0x80) {
        *p++ = (uint8_t)v;
        return p;
    }
    int n = v <= 0xff ? 1 : v <= 0xffff ? 2 : v <= 0xffffffffu ? 4 : 8;
    *p++ = n == 1 ? 0xcc : n == 2 ? 0xcd : n == 4 ? 0xce : 0xcf;
    for (int i = n - 1; i >= 0; i--)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

/* The start of a reply frame, [REPLY, seq, 0, [<nres results follow>: the caller writes them after it; the
 * frame's length (f[0..3]) is set by finish(). */
static uint8_t *reply_head(uint8_t *f, uint64_t seq, int nres) {
    uint8_t *p = f + 4;
    *p++ = 0x96;
    *p++ = 0x02;
    p = wr_uint(p, seq);
    *p++ = 0x00;
    *p++ = (uint8_t)(0x90 | nres);
    return p;
}

/* Sets the frame's length: extra bytes follow the head (bulk data, then the tail nil, nil). */
static void frame_len(uint8_t *f, size_t head, uint64_t extra) {
    uint32_t len = (uint32_t)(head - 4 + extra);
    memcpy(f, &len, 4); /* little-endian hosts only (x86-64, aarch64): fastpath.py checks */
}

static int send_iov(int fd, struct iovec *iov, int n) {
    while (n) {
        struct msghdr msg = {0};
        msg.msg_iov = iov;
        msg.msg_iovlen = (size_t)n;
        ssize_t k = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        while (n && (size_t)k >= iov->iov_len) {
            k -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n) {
            iov->iov_base = (uint8_t *)iov->iov_base + k;
            iov->iov_len -= (size_t)k;
        }
    }
    return 0;
}

/* msgpack of [REPLY, seq, 0, [results...], nil, nil] in a frame, as Python's Packer writes it. */
static int reply_uints(int fd, uint64_t seq, const uint64_t *res, int nres) {
    uint8_t f[64], *p = reply_head(f, seq, nres);
    for (int i = 0; i < nres; i++)
        p = wr_uint(p, res[i]);
    *p++ = 0xc0;
    *p++ = 0xc0;
    frame_len(f, (size_t)(p - f), 0);
    return send_all(fd, f, (size_t)(p - f));
}

static int reply_ok(int fd, uint64_t seq) { return reply_uints(fd, seq, NULL, 0); }

/* [REPLY, seq, 0, [bin of n bytes at data], nil, nil]: the bytes Python sends for a memoryview result (msgpack's
 * shortest bin header; worker.py sends 64 KiB and more through wire.reply_with_bulk, whose bin 32 is that too). */
static int reply_bin(int fd, uint64_t seq, const void *data, uint64_t n) {
    uint8_t f[48], *p = reply_head(f, seq, 1);
    if (n <= 0xff) {
        *p++ = 0xc4;
        *p++ = (uint8_t)n;
    } else if (n <= 0xffff) {
        *p++ = 0xc5;
        *p++ = (uint8_t)(n >> 8);
        *p++ = (uint8_t)n;
    } else {
        *p++ = 0xc6;
        for (int i = 3; i >= 0; i--)
            *p++ = (uint8_t)(n >> (8 * i));
    }
    uint8_t tail[2] = {0xc0, 0xc0};
    frame_len(f, (size_t)(p - f), n + 2);
    struct iovec iov[3] = {{f, (size_t)(p - f)}, {(void *)(uintptr_t)data, n}, {tail, 2}};
    return send_iov(fd, iov, 3);
}

/* A msgpack bin of at most max bytes (any bin encoding); 0 otherwise. */
static int rd_bin(const uint8_t **pp, const uint8_t *end, const uint8_t **data, uint64_t *len, uint64_t max) {
    const uint8_t *p = *pp;
    int n;
    if (p >= end)
        return 0;
    switch (*p) {
    case 0xc4: n = 1; break;
    case 0xc5: n = 2; break;
    case 0xc6: n = 4; break;
    default: return 0;
    }
    if (end - p < 1 + n)
        return 0;
    uint64_t k = be(p + 1, n);
    if (k > max || (uint64_t)(end - p - 1 - n) < k)
        return 0;
    *data = p + 1 + n;
    *len = k;
    *pp = p + 1 + n + k;
    return 1;
}

/* A msgpack str (fixstr, str 8/16/32); 0 otherwise. Its bytes are only compared with names Python gave. */
static int rd_str(const uint8_t **pp, const uint8_t *end, const uint8_t **data, uint64_t *len) {
    const uint8_t *p = *pp;
    int n;
    uint64_t k;
    if (p >= end)
        return 0;
    if ((*p & 0xe0) == 0xa0) {
        k = *p & 0x1f;
        n = 0;
    } else {
        switch (*p) {
        case 0xd9: n = 1; break;
        case 0xda: n = 2; break;
        case 0xdb: n = 4; break;
        default: return 0;
        }
        if (end - p < 1 + n)
            return 0;
        k = be(p + 1, n);
    }
    if ((uint64_t)(end - p - 1 - n) < k)
        return 0;
    *data = p + 1 + n;
    *len = k;
    *pp = p + 1 + n + k;
    return 1;
}

/* Three uint32 in a fixarray of 3 (grid, block). */
static int rd_dim3(const uint8_t **pp, const uint8_t *end, uint32_t out[3]) {
    if (*pp >= end || **pp != 0x93)
        return 0;
    (*pp)++;
    for (int i = 0; i < 3; i++) {
        uint64_t v;
        if (!rd_uint(pp, end, &v) || v > UINT32_MAX)
            return 0;
        out[i] = (uint32_t)v;
    }
    return 1;
}

/* LAUNCH's arguments (dev hash name grid block shared stream params): 1 when they name a known configuration
 * of an empty kernel on a known stream, which is then counted as launched. */
static int launch(fp_state *st, const uint8_t *p, const uint8_t *end) {
    int64_t dev;
    const uint8_t *hash, *name, *params;
    uint64_t hash_len, name_len, nparams, shared, stream;
    uint32_t grid[3], block[3];
    if (!rd_i32(&p, end, &dev) || !rd_bin(&p, end, &hash, &hash_len, 32) || hash_len != 32
        || !rd_str(&p, end, &name, &name_len) || !rd_dim3(&p, end, grid) || !rd_dim3(&p, end, block)
        || !rd_uint(&p, end, &shared) || shared > UINT32_MAX || !rd_uint(&p, end, &stream)
        || !rd_bin(&p, end, &params, &nparams, FP_SMALL_PARAMS) || p != end)
        return 0;
    if (!has(st->streams, st->nstreams, stream))
        return 0;
    for (uint32_t i = 0; i < st->nlaunches; i++) {
        fp_launch *l = &st->launch[i];
        if (l->dev != dev || l->nparams != nparams || l->shared != shared || l->name_len != name_len
            || memcmp(l->grid, grid, sizeof grid) || memcmp(l->block, block, sizeof block)
            || memcmp(l->hash, hash, 32) || memcmp(l->name, name, name_len))
            continue;
        st->launches++;
        st->thread_instructions += l->threads;
        if (l->backend_dev < FP_MAX_DEVS)
            st->kernels[l->backend_dev]++;
        return 1;
    }
    return 0;
}

/* [addr, addr+n) inside one known allocation: where it is in this process, or NULL (memory.py: check_range). A
 * miss is counted: Python rebuilds the table, which it lets go stale after allocations change; take() then
 * returns miss(st). */
static uint8_t *device_range(fp_state *st, uint64_t addr, uint64_t n) {
    const fp_alloc *a = find(st, addr);
    if (!a || n > a->addr + a->size - addr) {
        st->memset_misses++;
        return NULL;
    }
    return (uint8_t *)(uintptr_t)(a->host + (addr - a->addr));
}

/* What take() returns for a frame whose address missed the table: 2 (ask Python to rebuild it, then take the
 * frame again) while the table is stale, as it is after every malloc or free; else 0 (Python handles the frame
 * and reports the bad address). */
static int miss(const fp_state *st) { return st->allocs_stale ? 2 : 0; }

/* [offset, offset+n) of the client's shared memory `id` (ops_memory.py: _shared), or NULL. */
static uint8_t *shared_range(const fp_state *st, uint64_t id, uint64_t offset, uint64_t n) {
    for (uint32_t i = 0; i < st->nshms; i++) {
        const fp_shm *m = &st->shms[i];
        if (m->id == id)
            return offset <= m->size && n <= m->size - offset ? (uint8_t *)(uintptr_t)(m->host + offset) : NULL;
    }
    return NULL;
}

/* MEM_INFO's free bytes of client device dev (ops_devices.py: op_mem_info): 1 when answered here. */
static int mem_free(const fp_state *st, int64_t dev, uint64_t *free) {
    const fp_meminfo *mi = &st->mi;
    if (!mi->ok || dev < 0 || dev >= st->ndevs || dev >= FP_MAX_DEVS)
        return 0;
    int64_t room = mi->quota_room;
    if (mi->ledger) {
        if (memcmp((const void *)(uintptr_t)mi->ids, (const void *)(uintptr_t)mi->seen, 2 * FP_LEDGER_SLOTS * 8))
            return 0; /* a process took or left a slot: Python rebuilds its watch */
        if (mi->npidfds) {
            struct pollfd fds[FP_LEDGER_SLOTS];
            for (uint32_t i = 0; i < mi->npidfds; i++)
                fds[i] = (struct pollfd){.fd = mi->pidfds[i], .events = POLLIN};
            if (poll(fds, mi->npidfds, 0) != 0)
                return 0; /* one exited (or poll failed): Python reclaims its slot */
        }
        const volatile int64_t *bytes = (const volatile int64_t *)(uintptr_t)mi->bytes;
        int64_t used = 0;
        for (uint32_t i = 0; i < mi->nheld; i++)
            used += bytes[mi->held[i]];
        int64_t host = mi->cap - used > 0 ? mi->cap - used : 0;
        room = room < 0 || host < room ? host : room;
    }
    *free = mi->free[dev];
    if (room >= 0 && (uint64_t)room < *free)
        *free = (uint64_t)room;
    return 1;
}

/* 1: the frame was handled (and answered); 0: Python must handle it; 2: it may be, once Python has refreshed
 * the mirror (it handled frames since it last did); -1: sending the reply failed. */
static int take(fp_state *st, int fd, const uint8_t *p, uint32_t n) {
    const uint8_t *end = p + n;
    if (n < 5 || p[0] != 0x94 || (p[1] != KIND_CALL && p[1] != KIND_POST))
        return 0;
    int kind = p[1];
    p += 2;
    uint64_t seq, op;
    if (!rd_uint(&p, end, &seq) || !rd_uint(&p, end, &op) || op >= 64 || !(st->ops & ((uint64_t)1 << op)) || p >= end)
        return 0;
    if (!st->fresh)
        return 2;
    if (!st->quiet)
        return 0;
    uint8_t args = *p++;
    if (op == OP_STREAM_QUERY || op == OP_STREAM_SYNC || op == OP_EVENT_QUERY) {
        /* the session is quiet: every stream and event it knows is idle, so a synchronisation returns now */
        uint64_t h;
        if (args != 0x91 || !rd_uint(&p, end, &h) || p != end)
            return 0;
        if (op == OP_EVENT_QUERY ? !has(st->events, st->nevents, h) : !has(st->streams, st->nstreams, h))
            return 0;
        st->queries++;
    } else if (op == OP_DEVICE_SYNC) {
        int64_t dev;
        if (args != 0x91 || !rd_i32(&p, end, &dev) || p != end || dev < 0 || dev >= st->ndevs)
            return 0;
        st->queries++;
    } else if (op == OP_MEM_INFO) {
        int64_t dev;
        uint64_t res[2];
        if (kind != KIND_CALL || args != 0x91 || !rd_i32(&p, end, &dev) || p != end || !mem_free(st, dev, &res[0]))
            return 0;
        res[1] = st->mi.total[dev];
        st->queries++;
        st->calls++;
        return reply_uints(fd, seq, res, 2) < 0 ? -1 : 1;
    } else if (op == OP_MEMSET) {
        uint64_t dst, nbytes, stream;
        int64_t value;
        if (args != 0x94 || !rd_uint(&p, end, &dst) || !rd_i32(&p, end, &value) || !rd_uint(&p, end, &nbytes)
            || !rd_uint(&p, end, &stream) || p != end)
            return 0;
        if (!has(st->streams, st->nstreams, stream))
            return 0;
        uint8_t *to = device_range(st, dst, nbytes); /* Python reports the error, or finds what this table lacks */
        if (!to)
            return miss(st);
        memset(to, (int)(value & 0xff), nbytes);
        st->memsets++;
    } else if (op == OP_MEMCPY_H2D) {
        uint64_t dst, stream, nbytes;
        const uint8_t *data;
        if (args != 0x93 || !rd_uint(&p, end, &dst) || !rd_uint(&p, end, &stream)
            || !rd_bin(&p, end, &data, &nbytes, UINT32_MAX) || p != end || !has(st->streams, st->nstreams, stream))
            return 0;
        uint8_t *to = device_range(st, dst, nbytes);
        if (!to)
            return miss(st);
        memcpy(to, data, nbytes);
        st->copies++;
        st->copy_bytes += nbytes;
    } else if (op == OP_MEMCPY_D2H) {
        uint64_t src, nbytes, stream;
        if (kind != KIND_CALL || args != 0x93 || !rd_uint(&p, end, &src) || !rd_uint(&p, end, &nbytes)
            || !rd_uint(&p, end, &stream) || p != end || nbytes > UINT32_MAX || !has(st->streams, st->nstreams, stream))
            return 0;
        const uint8_t *from = device_range(st, src, nbytes);
        if (!from)
            return miss(st);
        st->copies++;
        st->copy_bytes += nbytes;
        st->calls++;
        return reply_bin(fd, seq, from, nbytes) < 0 ? -1 : 1;
    } else if (op == OP_MEMCPY_H2D_SHM || op == OP_MEMCPY_H2D_STAGED || op == OP_MEMCPY_D2H_SHM) {
        uint64_t dev, stream, shm, offset, nbytes;
        if (args != 0x95 || !rd_uint(&p, end, &dev) || !rd_uint(&p, end, &stream) || !rd_uint(&p, end, &shm)
            || !rd_uint(&p, end, &offset) || !rd_uint(&p, end, &nbytes) || p != end
            || !has(st->streams, st->nstreams, stream))
            return 0;
        uint8_t *host = shared_range(st, shm, offset, nbytes);
        if (!host)
            return 0;
        uint8_t *d = device_range(st, dev, nbytes);
        if (!d)
            return miss(st);
        if (op == OP_MEMCPY_D2H_SHM)
            memmove(host, d, nbytes); /* memmove: the client may pass overlapping nonsense, not undefined here */
        else
            memmove(d, host, nbytes);
        st->copies++;
        st->copy_bytes += nbytes;
    } else if (op == OP_LAUNCH) {
        if (args != 0x98 || !launch(st, p, end))
            return 0;
    } else {
        return 0;
    }
    st->calls++;
    if (kind == KIND_CALL && reply_ok(fd, seq) < 0)
        return -1;
    return 1;
}

/* Serves frames from buf[r, w) and from the socket until something needs Python; r and w come back updated (the
 * FrameReader's). Returns FP_* saying why. */
FP_API int fp_serve(fp_state *st) {
    int fd = st->fd;
    uint8_t *buf = (uint8_t *)(uintptr_t)st->buf;
    uint64_t cap = st->cap, r = st->r, w = st->w;
    int ret;
    for (;;) {
        while (w - r >= 4) {
            uint32_t n;
            memcpy(&n, buf + r, 4);
            if (n > st->max_frame) {
                ret = FP_FRAME;
                goto out;
            }
            if (w - r - 4 < n)
                break;
            int done = take(st, fd, buf + r + 4, n);
            if (done == 0 || done == 2) {
                ret = done ? FP_REFRESH : FP_FRAME;
                goto out;
            }
            r += 4 + (uint64_t)n;
            if (done < 0) {
                st->err = errno;
                ret = FP_SEND_ERROR;
                goto out;
            }
        }
        if (r == w)
            r = w = 0;
        if (cap - w < (1u << 16)) {
            ret = FP_READ; /* Python makes room */
            goto out;
        }
        if (w - r >= 4) {
            uint32_t n;
            memcpy(&n, buf + r, 4);
            if (r + 4 + (uint64_t)n > cap) {
                ret = FP_READ;
                goto out;
            }
        }
        union {
            struct cmsghdr align;
            char space[CMSG_SPACE(sizeof(int) * FP_MAX_FDS)];
        } anc;
        struct iovec iov = {buf + w, cap - w};
        struct msghdr msg = {0};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = anc.space;
        msg.msg_controllen = sizeof anc.space;
        ssize_t k = recvmsg(fd, &msg, 0);
        if (k < 0) {
            if (errno == EINTR) {
                ret = FP_READ; /* Python runs its signal handlers, then reads */
                goto out;
            }
            st->err = errno;
            ret = FP_RECV_ERROR;
            goto out;
        }
        if (k == 0) {
            ret = FP_EOF;
            goto out;
        }
        w += (uint64_t)k;
        if (msg.msg_controllen) {
            st->nfds = 0;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                    continue;
                size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < count && st->nfds < FP_MAX_FDS; i++)
                    memcpy(&st->fds[st->nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            }
            if (st->nfds) {
                ret = FP_FDS;
                goto out;
            }
        }
    }
out:
    st->r = r;
    st->w = w;
    return ret;
}

FP_API uint64_t fp_state_size(void) { return sizeof(fp_state); }
